"""The OpenAPI document (``/openapi.json``): what each route really answers, declared here.

A route names the errors only it answers with :func:`problems` (``responses={**problems(404,
412)}``) and its raw bodies with :func:`raw_request` and :func:`raw_response`. What every
route of a kind answers is added by :func:`complete`, from the route itself:

- every operation: 400 (a malformed request, its framing, or a ``Host`` the service does not
  answer to; a parameter that does not parse) and 431 (headers too large);
- a route that needs a token scope (:func:`blobledger.api.auth.declared_scope`): 401 and 403,
  and its ``security`` requirement names that scope (``{"HTTPBearer": ["write"]}``);
- a method other than GET and HEAD: 403 (a page on another site sent it);
- POST, PUT and PATCH: 503 (every upload slot taken, ``Retry-After``);
- a route that reads a body: 408 (the body arrived too slowly); a JSON body: 413 (too large).

FastAPI's own 422 (a validation error) is never answered: the service answers 400 (a
problem document listing the ``errors``). Every error is an RFC 9457 problem document
(``application/problem+json``, :data:`PROBLEM_SCHEMA`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

from blobledger.api.auth import CHALLENGE, declared_scope, routes_of
from blobledger.api.problems import MEDIA_TYPE, TYPE_PREFIX

PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}
PROBLEM_SCHEMA: dict[str, Any] = {
    "title": "Problem",
    "description": "An RFC 9457 problem document: every error the service answers with.",
    "type": "object",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string", "description": f"``{TYPE_PREFIX}<kind>``, or "
                 "``about:blank`` for a plain HTTP error (an unknown path, a method the "
                 "path does not take)",
                 "examples": [f"{TYPE_PREFIX}name-taken"]},
        "title": {"type": "string", "description": "the status's reason phrase"},
        "status": {"type": "integer", "minimum": 400, "maximum": 599},
        "detail": {"type": "string", "description": "what went wrong, for a person"},
        "instance": {"type": "string", "description": "the path of the request"},
        "current_version": {"type": "integer", "description": "a failed If-Match: the "
                            "document's current version (its ETag is that number, quoted)"},
        "errors": {"type": "array", "description": "a request that does not parse: each "
                   "parameter in fault", "items": {
                       "type": "object", "required": ["location", "message"],
                       "properties": {"location": {"type": "string"},
                                      "message": {"type": "string"}}}},
    },
    "additionalProperties": True,
}

#: what each status means, wherever it is answered
MEANINGS: dict[int, str] = {
    400: "The request is malformed: a parameter, a header or the body does not parse, its "
         "framing is ambiguous, or the service does not answer to its Host.",
    401: "A bearer token is required, or the one presented is not valid.",
    403: "The token lacks the scope this route needs, or a page on another site sent a "
         "request that changes something.",
    404: "No such document or upload (or variant: not configured, or not an image).",
    408: "The request body arrived too slowly, or stopped arriving.",
    409: "A conflict with the current state: the name is taken, an upload's offset differs, "
         "an upload is finished or in progress, or a check is already running.",
    410: "The upload expired or was swept, or the version asked for was replaced.",
    412: "A precondition failed (If-Match, Tus-Resumable).",
    413: "The body is larger than the service takes.",
    415: "The body's media type is not one this route takes, or (a variant) the image is in "
         "a format the service cannot read.",
    416: "The range is not satisfiable (Content-Range names the size).",
    422: "The Idempotency-Key was used for a different request, or (a variant) the image is "
         "too large (pixels or bytes) or does not decode.",
    428: "If-Match is required.",
    429: "The caller holds too many open uploads or reserved names.",
    431: "The request headers are too large.",
    460: "The Upload-Checksum does not match the bytes (tus).",
    502: "The object store answered an error.",
    503: "The database or the object store is unreachable, the service is starting or "
         "stopping, or every upload slot is taken: retry after Retry-After seconds.",
}

#: response headers of some error statuses
ERROR_HEADERS: dict[int, dict[str, Any]] = {
    401: {"WWW-Authenticate": {"description": f"``{CHALLENGE['WWW-Authenticate']}``",
                               "schema": {"type": "string"}}},
    503: {"Retry-After": {"description": "seconds to wait before retrying",
                          "schema": {"type": "string"}}},
    416: {"Content-Range": {"description": "``bytes */<size>``", "schema": {"type": "string"}}},
}

BINARY = {"type": "string", "format": "binary"}
SAFE = frozenset({"GET", "HEAD"})
UPLOADS = frozenset({"POST", "PUT", "PATCH"})


def problem_response(status: int) -> dict[str, Any]:
    """The declaration of an error answer: a problem document."""
    answer: dict[str, Any] = {"description": MEANINGS.get(status, "An error."),
                              "content": {MEDIA_TYPE: {"schema": PROBLEM_REF}}}
    if status in ERROR_HEADERS:
        answer["headers"] = ERROR_HEADERS[status]
    return answer


def problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for the errors a route answers (beyond those :func:`complete` adds)."""
    return {status: problem_response(status) for status in statuses}


def headers(**described: str) -> dict[str, Any]:
    """Response headers (``Upload_Offset="..."`` names ``Upload-Offset``), as strings."""
    return {name.replace("_", "-"): {"description": text, "schema": {"type": "string"}}
            for name, text in described.items()}


def empty(description: str, **described: str) -> dict[str, Any]:
    """An answer without a body (and the headers it carries)."""
    answer: dict[str, Any] = {"description": description, "content": {}}
    if described:
        answer["headers"] = headers(**described)
    return answer


def json_body(description: str, schema: Mapping[str, Any], **described: str) -> dict[str, Any]:
    """A JSON answer of ``schema``."""
    answer: dict[str, Any] = {"description": description,
                              "content": {"application/json": {"schema": dict(schema)}}}
    if described:
        answer["headers"] = headers(**described)
    return answer


def raw_response(description: str, media_types: Sequence[str] = ("*/*",),
                 **described: str) -> dict[str, Any]:
    """An answer whose body is raw bytes (a download)."""
    answer: dict[str, Any] = {"description": description,
                              "content": {kind: {"schema": BINARY} for kind in media_types}}
    if described:
        answer["headers"] = headers(**described)
    return answer


def raw_request(description: str, media_types: Sequence[str] = ("*/*",), *,
                required: bool = True, form: Mapping[str, Any] | None = None,
                parameters: Iterable[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """``openapi_extra=`` for a route that reads its body itself: raw bytes of
    ``media_types`` (and a ``multipart/form-data`` form of ``form``'s schema), and the
    header ``parameters`` it reads itself."""
    content: dict[str, Any] = {kind: {"schema": BINARY} for kind in media_types}
    if form is not None:
        content["multipart/form-data"] = {"schema": dict(form)}
    extra: dict[str, Any] = {"requestBody": {"required": required, "description": description,
                                             "content": content}}
    if parameters:
        extra["parameters"] = [dict(p) for p in parameters]
    return extra


def header_parameter(name: str, description: str, *, required: bool = False,
                     schema: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A request header a route reads itself (not through a FastAPI parameter)."""
    return {"name": name, "in": "header", "required": required, "description": description,
            "schema": dict(schema or {"type": "string"})}


def common_statuses(route: APIRoute, method: str, operation: Mapping[str, Any]) -> list[int]:
    """The errors every route of this kind answers (see the module's docstring)."""
    statuses = [400, 431]
    if declared_scope(route) is not None:
        statuses += [401, 403]
    if method not in SAFE:
        statuses.append(403)
    if method in UPLOADS:
        statuses.append(503)
    body = operation.get("requestBody", {}).get("content", {})
    if body:
        statuses.append(408)
    if "application/json" in body:
        statuses.append(413)
    return statuses


def _is_validation_error(answer: Mapping[str, Any]) -> bool:
    schema = answer.get("content", {}).get("application/json", {}).get("schema", {})
    return bool(schema.get("$ref", "").endswith("/HTTPValidationError"))


def complete(document: dict[str, Any], routes: Iterable[Any]) -> dict[str, Any]:
    """The document FastAPI made, made true: no 422 validation errors (the service answers
    400), the common errors of each route added, every error a problem document."""
    for route in routes:
        if not isinstance(route, APIRoute) or not route.include_in_schema:
            continue
        for method in sorted(route.methods or ()):
            operation = document["paths"][route.path_format].get(method.lower())
            if operation is None:
                continue
            scope = declared_scope(route)
            if scope is not None and operation.get("security"):
                # OpenAPI 3.1: a scheme other than OAuth2 may list the roles it needs
                operation["security"] = [{name: [scope] for requirement in
                                          operation["security"] for name in requirement}]
            answers: dict[str, Any] = operation["responses"]
            if _is_validation_error(answers.get("422", {})):
                del answers["422"]
            for common in common_statuses(route, method, operation):
                answers.setdefault(str(common), problem_response(common))
            for key, answer in answers.items():
                if key.isdigit() and int(key) >= 400:
                    answer["content"] = {MEDIA_TYPE: {"schema": PROBLEM_REF}}
            operation["responses"] = dict(sorted(answers.items()))
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    schemas["Problem"] = PROBLEM_SCHEMA
    return document


def install(app: FastAPI) -> None:
    """Serve the completed document as ``app``'s ``/openapi.json``."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = complete(get_openapi(
                title=app.title, version=app.version, openapi_version=app.openapi_version,
                description=app.description, routes=app.routes), routes_of(app.router))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
