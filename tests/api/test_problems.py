"""The mapping from blobledger errors to problems: outages are 503 with Retry-After, an
interrupted upload's lost intent is retryable, bad input is a 400."""

from __future__ import annotations

from blobledger.api.problems import ERROR_STATUS, problem_for
from blobledger.errors import (
    DatabaseUnavailable,
    IntentLost,
    InvalidInput,
    InvalidName,
    StoreUnavailable,
    UploadAborted,
)


def test_outages_and_lost_intents_are_retryable_503s() -> None:
    for error, kind in ((DatabaseUnavailable("down"), "database-unavailable"),
                        (StoreUnavailable("down"), "store-unavailable"),
                        (IntentLost("taken over"), "upload-abandoned")):
        problem = problem_for(error)
        assert (problem.status, problem.kind) == (503, kind)
        assert problem.headers["Retry-After"].isdigit()


def test_input_errors_are_400() -> None:
    for error in (InvalidInput("bad content type"), InvalidName("bad name")):
        problem = problem_for(error)
        assert (problem.status, problem.kind) == (400, "invalid-input")
    assert problem_for(UploadAborted("deadline")).status == 408


def test_subclasses_come_before_their_bases() -> None:
    classes = [cls for cls, _ in ERROR_STATUS]
    for i, cls in enumerate(classes):
        assert not any(issubclass(cls, earlier) for earlier in classes[:i]), cls
