"""How a request's body is framed, read strictly: one reading, or a refusal.

A request whose length two parsers could read differently is refused, so that no front end
and this service ever disagree on where one request ends and the next begins (request
smuggling):

- ``Content-Length`` and ``Transfer-Encoding`` together;
- ``Content-Length`` more than once (even with one value), as a list, or not 1 to 19 digits;
- ``Transfer-Encoding`` more than once, anything but exactly ``chunked`` (surrounding blanks
  aside: ``Chunked`` too, which a front end may not read as chunked), or in an HTTP/1.0
  request.

``blobledger serve`` applies this to every request head before it reaches the app
(:mod:`blobledger.api.connections`: 400, connection closed); the app applies it again for
any other server it is embedded in (:mod:`blobledger.api.browser`).
"""

from __future__ import annotations

from collections.abc import Iterable

MAX_LENGTH_DIGITS = 19


def framing_error(headers: Iterable[tuple[bytes, bytes]], http_version: str) -> str | None:
    """Why the framing of a request with these headers is refused, or None if it is not."""
    lengths = []
    encodings = []
    for name, value in headers:
        key = name.lower()
        if key == b"content-length":
            lengths.append(value)
        elif key == b"transfer-encoding":
            encodings.append(value)
    if lengths and encodings:
        return "Content-Length and Transfer-Encoding together"
    if len(lengths) > 1:
        return "Content-Length more than once"
    if lengths:
        text = lengths[0].strip(b" \t")
        if not (text.isdigit() and 0 < len(text) <= MAX_LENGTH_DIGITS):
            return "Content-Length is not a number of bytes"
    if len(encodings) > 1:
        return "Transfer-Encoding more than once"
    if encodings:
        if encodings[0].strip(b" \t") != b"chunked":
            return "Transfer-Encoding other than chunked"
        if http_version == "1.0":
            return "Transfer-Encoding in an HTTP/1.0 request"
    return None
