"""GetObject's and HeadObject's ``response-*`` query parameters: headers of the answer the
request sets (a presigned URL that downloads under another name or type). S3 takes them on
signed requests only: an unsigned one (a public object's) that sends them is refused."""

from __future__ import annotations

from blobledger.s3api.call import Call
from blobledger.s3api.errors import S3Error
from blobledger.s3api.sigv4 import ANONYMOUS

#: each override and the header it sets
RESPONSE_HEADERS = {
    "response-content-type": "Content-Type",
    "response-content-language": "Content-Language",
    "response-expires": "Expires",
    "response-cache-control": "Cache-Control",
    "response-content-disposition": "Content-Disposition",
    "response-content-encoding": "Content-Encoding",
}
RESPONSE_QUERY = frozenset(RESPONSE_HEADERS)


def overrides(call: Call) -> dict[str, str]:
    """The headers the request's ``response-*`` parameters set (a value that is not one
    printable line is an ``InvalidArgument``: it could not be one header)."""
    found = {}
    for name, value in call.params.items():
        header = RESPONSE_HEADERS.get(name)
        if header is None:
            continue
        if call.signed.key_id == ANONYMOUS:
            raise S3Error("InvalidRequest", "Request specific response headers cannot be used "
                          "for anonymous GET requests.")
        if not value.isprintable():
            raise S3Error("InvalidArgument", f"{name} must be one line of printable "
                          "characters")
        found[header] = value
    return found
