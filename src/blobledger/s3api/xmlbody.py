"""What the endpoint's XML answers share: S3's namespace, the answer itself, its dates."""

from __future__ import annotations

from datetime import UTC, datetime

from starlette.responses import Response

from blobledger.s3api.call import Call
from blobledger.s3api.errors import XML_TYPE

NAMESPACE = "http://s3.amazonaws.com/doc/2006-03-01/"


def xml_response(body: str, call: Call, **more: str) -> Response:
    return Response('<?xml version="1.0" encoding="UTF-8"?>\n' + body, 200,
                    headers=call.headers(**more), media_type=XML_TYPE)


def iso(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + \
        f"{when.microsecond // 1000:03d}Z"
