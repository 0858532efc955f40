"""Schemathesis against ``/openapi.json`` of a real server: what the service answers is what
its document says (each status declared, each content type declared, each body and declared
header as the schema has it), and no input makes it answer 5xx."""

from __future__ import annotations

from collections import Counter
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings

from tests.support.openapi import CONFORMANCE, operations
from tests.support.server import Server, live_server

__all__ = ["live_server"]
EXAMPLES = 12  # per operation: 25 operations
#: Left out, as they judge nothing here: ``negative_data_rejection`` (for invalid data, which
#: these cases are not), ``positive_data_acceptance`` (valid data
#: naming no document is rightly a 404), ``ignored_auth`` (this server has no tokens:
#: tests/api/test_auth.py holds 401/403), the stateful ones (``use_after_free``,
#: ``ensure_resource_availability``) and those of the coverage phase
#: (``missing_required_header``, ``unsupported_method``), which these cases never trigger.


def test_the_answers_are_those_the_document_declares(live_server: Server) -> None:
    found = operations(live_server.url)
    assert len(found) >= 20
    statuses: Counter[int] = Counter()
    for operation in found:

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        def check(case: schemathesis.Case[Any]) -> None:
            response = case.call(timeout=30)
            statuses[response.status_code] += 1
            case.validate_response(response, checks=CONFORMANCE)

        check()
    # the run was not vacuous: many answers, successes and refusals among them
    assert statuses.total() >= 150 and any(s < 300 for s in statuses), statuses
    assert any(400 <= s < 500 for s in statuses), statuses
