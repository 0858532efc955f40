"""Schemathesis against a real ``blobledger serve`` (SQLite and a local folder), with data
that fits the schema and data that does not: no input makes the service answer 5xx, every
answer is one the document declares (status, content type, body, headers), every error is a
problem document.

``negative_data_rejection`` is left out: the document declares the bearer scheme on every
route that takes a token, and a server with no tokens configured (this one) rightly answers
a request without ``Authorization``, which that check counts as invalid data accepted."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from tests.hostile.support import Served, serve
from tests.support.openapi import CONFORMANCE, operations

EXAMPLES = 12  # per operation and mode


@pytest.fixture(scope="module")
def server() -> Iterator[Served]:
    with serve(env={"BLOBLEDGER_BODY_TIMEOUT": "2s"}) as served:
        yield served


@pytest.mark.slow
@pytest.mark.parametrize("mode", [GenerationMode.NEGATIVE, GenerationMode.POSITIVE])
def test_no_input_causes_a_server_error(server: Served, mode: GenerationMode) -> None:
    found = operations(server.url)
    assert len(found) >= 20
    statuses: list[int] = []
    exercised = 0
    for operation in found:

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=EXAMPLES, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        def check(case: schemathesis.Case[Any]) -> None:
            response = case.call(timeout=30)
            statuses.append(response.status_code)
            case.validate_response(response, checks=CONFORMANCE)
            if response.status_code >= 400:
                assert response.headers["content-type"] == ["application/problem+json"]

        try:
            check()
        except Unsatisfiable:  # nothing of this operation can be made invalid (e.g. /healthz)
            assert mode is GenerationMode.NEGATIVE
            continue
        exercised += 1
    assert exercised >= 6 and len(statuses) >= 100  # the run was not vacuous
    if mode is GenerationMode.NEGATIVE:
        assert any(400 <= s < 500 for s in statuses)
