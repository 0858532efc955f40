"""Schemathesis against ``/openapi.json`` of a real server: no input makes it answer 5xx."""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok

from tests.support.server import Server, live_server

__all__ = ["live_server"]
EXAMPLES = 25  # per operation: 11 operations, well under a minute
CALLS: list[int] = []  # statuses seen


def test_no_input_causes_a_server_error(live_server: Server) -> None:
    schema = schemathesis.openapi.from_url(f"{live_server.url}/openapi.json")
    results = list(schema.get_all_operations())
    assert all(isinstance(r, Ok) for r in results), results  # every operation is valid
    operations = [r.ok() for r in results if isinstance(r, Ok)]
    assert len(operations) >= 10
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        def check(case: schemathesis.Case[Any]) -> None:
            response = case.call(timeout=30)
            CALLS.append(response.status_code)
            case.validate_response(response, checks=[not_a_server_error])

        check()
    assert len(CALLS) >= 100 and any(s < 300 for s in CALLS)  # the run was not vacuous
