"""A fuzz pass over the header parsers and the input checks (hypothesis): whatever arrives,
each either answers or raises its one documented error, and what it accepts is safe."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st
from werkzeug.datastructures import ETags

from blobledger._base.names import check_content_type, check_document_name, check_name_prefix
from blobledger.api.headers import (
    ByteRange,
    MalformedHeader,
    Unsatisfiable,
    etag,
    etag_versions,
    expected_digests,
    if_range_matches,
    matches,
    parse_entity_tags,
    parse_range,
)
from blobledger.api.problems import Problem
from blobledger.errors import InvalidInput, InvalidName

#: header values arrive as Latin-1 text: every code point up to U+00FF
LATIN1 = st.text(alphabet=st.characters(max_codepoint=0xFF), max_size=200)
DIGITS = st.text(alphabet="0123456789\xb2\xb3\xb9", max_size=6000)
ETAG_LIKE = st.lists(st.sampled_from(['"', "W/", ",", " ", "1", "0", "*", "\xb2", "a", "\t"]),
                     max_size=30).map("".join)
FUZZ = settings(max_examples=400, deadline=None, database=None)


@FUZZ
@given(st.one_of(LATIN1, ETAG_LIKE), st.integers(min_value=1, max_value=10**12))
def test_conditional_headers_never_fail(value: str, version: int) -> None:
    try:
        tags = parse_entity_tags(value)
    except MalformedHeader:
        tags = ETags()  # no tag
    versions = etag_versions(value)
    assert versions is None or all(0 < v < 10**18 for v in versions)
    assert (tags is None) == (versions is None)
    assert isinstance(matches(value, version), bool)
    assert isinstance(matches(value, version, weak=False), bool)
    assert isinstance(if_range_matches(value, version), bool)


@FUZZ
@given(st.integers(min_value=1, max_value=10**15))
def test_our_own_etags_round_trip(version: int) -> None:
    assert etag_versions(etag(version)) == [version]
    assert matches(f'W/{etag(version)}', version)
    assert not matches(f'W/{etag(version)}', version, weak=False)
    assert if_range_matches(etag(version), version)
    assert etag_versions(f'"0{version}"') == []


@FUZZ
@given(st.one_of(LATIN1, st.builds(lambda a, b: f"bytes={a}-{b}", DIGITS, DIGITS)),
       st.integers(min_value=0, max_value=10**13))
def test_ranges_are_inside_the_representation_or_refused(value: str, size: int) -> None:
    try:
        wanted = parse_range(value, size)
    except Unsatisfiable:
        return
    if wanted is not None:
        assert isinstance(wanted, ByteRange)
        assert 0 <= wanted.start < size and 0 < wanted.length <= size - wanted.start


@FUZZ
@given(st.one_of(st.none(), LATIN1), st.one_of(st.none(), LATIN1))
def test_digest_headers_are_400_or_hex(repr_digest: str | None, md5: str | None) -> None:
    try:
        sha256, md5_hex = expected_digests(repr_digest, md5)
    except Problem as problem:
        assert problem.status == 400
        return
    assert sha256 is None or len(sha256) == 64
    assert md5_hex is None or len(md5_hex) == 32


@FUZZ
@given(st.one_of(LATIN1, st.text(max_size=300), st.builds(
    lambda t, s, p: f"{t}/{s}{p}", st.text(max_size=10), st.text(max_size=10), LATIN1)))
def test_an_accepted_media_type_is_a_safe_header_value(value: str) -> None:
    try:
        accepted = check_content_type(value)
    except InvalidInput as exc:
        assert not isinstance(exc, InvalidName)
        return
    assert accepted.isascii() and len(accepted) <= 255
    assert all(c == "\t" or 0x20 <= ord(c) < 0x7F for c in accepted)
    assert check_content_type(accepted) == accepted


@FUZZ
@given(st.text(max_size=300))
def test_an_accepted_name_is_nfc_and_visible(value: str) -> None:
    try:
        name = check_document_name(value)
    except InvalidName:
        return
    assert name == unicodedata.normalize("NFC", name)
    assert all(unicodedata.category(c) not in {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}
               for c in name)
    assert check_document_name(name) == name
    assert check_name_prefix(name) == name
