"""Where werkzeug's header parsing and the service's documented semantics differ, the
service's hold (each case here is one werkzeug alone would answer otherwise)."""

from __future__ import annotations

import pytest
from werkzeug.http import parse_etags, parse_if_range_header, parse_range_header

from blobledger.api.headers import Unsatisfiable, etag_versions, if_range_matches, parse_range


@pytest.mark.parametrize("value", ["3", 'w/"3"', '"1"junk, "3"', '"1" "3", "3"'])
def test_a_malformed_entity_tag_list_matches_nothing(value: str) -> None:
    assert "3" in parse_etags(value).as_set(include_weak=True)  # werkzeug finds one
    assert etag_versions(value, weak=True) == []


@pytest.mark.parametrize("value", ['W/"3"', "3"])
def test_if_range_is_the_strong_quoted_etag_only(value: str) -> None:
    assert parse_if_range_header(value).etag == "3"  # werkzeug drops the W/ and the quotes
    assert not if_range_matches(value, 3)


def test_a_start_past_the_end_is_416_whatever_its_digits() -> None:
    huge = "9" * 5000
    assert parse_range_header(f"bytes={huge}-") is None  # werkzeug: beyond int()'s limit
    with pytest.raises(Unsatisfiable):
        parse_range(f"bytes={huge}-", 10)
    assert parse_range(f"bytes=0{'0' * 30}-", 10) is not None


def test_a_zero_suffix_is_416() -> None:
    assert parse_range_header("bytes=-0") is None  # werkzeug: malformed, ignored
    with pytest.raises(Unsatisfiable):
        parse_range("bytes=-0", 10)
