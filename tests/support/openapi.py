"""Schemathesis as the suite uses it: the service's ``/openapi.json``, with the tus body's
media type sent as raw bytes, and the checks that hold answers to the document."""

from __future__ import annotations

from typing import Any

import schemathesis
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.result import Ok
from schemathesis.schemas import APIOperation

OFFSET_TYPE = "application/offset+octet-stream"

#: every answer: no 5xx, its status declared, its content type declared, its body and its
#: declared headers as the schema has them
CONFORMANCE = [not_a_server_error, status_code_conformance, content_type_conformance,
               response_schema_conformance, response_headers_conformance]

schemathesis.serializer.alias(OFFSET_TYPE, "application/octet-stream")


def operations(base_url: str) -> list[APIOperation[Any, Any, Any, Any]]:
    """The operations of the document the service at ``base_url`` serves (all valid)."""
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json")
    results = list(schema.get_all_operations())
    assert all(isinstance(r, Ok) for r in results), results
    return [r.ok() for r in results if isinstance(r, Ok)]
