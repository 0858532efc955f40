"""With the deferred retag, ``doctor`` refuses (a failed must-have) a blobledger lifecycle
rule whose age is not far beyond the retag lag the settings allow
(``BLOBLEDGER_RETAG_WARN_AFTER`` times ``RETAG_FACTOR``): it would delete a ready
document's blob still tagged ``pending``. The rules are S3's answer, as read."""

from __future__ import annotations

from blobledger.workers.doctor.checks import FAIL, PASS, Report
from blobledger.workers.doctor.s3 import _lifecycle


def rule(days: int) -> dict[str, object]:
    return {"ID": f"blobledger-pending-{days}d", "Expiration": {"Days": days}}


def test_a_rule_near_the_retag_lag_fails_the_doctor() -> None:
    report = Report("s3://bucket")
    report.add(*_lifecycle([rule(1)], retag_warn_after=3600.0))  # 1 d < 100 h
    (check,) = report.checks
    assert (check.must, check.status) == (True, FAIL) and report.failed
    assert "blobledger-pending-1d" in check.detail


def test_a_rule_far_beyond_the_lag_passes() -> None:
    report = Report("s3://bucket")
    report.add(*_lifecycle([rule(7)], retag_warn_after=3600.0))  # 7 d > 100 h
    assert report.checks[0].status == PASS and not report.failed


def test_with_the_inline_retag_the_lag_is_not_judged() -> None:
    report = Report("s3://bucket")
    report.add(*_lifecycle([rule(1)], retag_warn_after=None))
    assert report.checks[0].status == PASS and not report.failed
