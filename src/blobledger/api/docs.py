"""The API's documentation, ``/docs``: Swagger UI served from the files of the
``fastapi-offline`` package (Swagger UI 5, which reads OpenAPI 3.1), never from a CDN, so it
works with no network beyond this service.

The page holds no inline script: its one script of our own (``static/swagger-init.js``)
starts Swagger UI on ``openapi.json``. Its Content Security Policy allows scripts, styles,
images and connections from this origin only (and ``data:`` images, the icons of Swagger
UI's stylesheet). All URLs are relative, so the page also works where the app is mounted
under a path.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from fastapi import APIRouter, HTTPException
from starlette.responses import FileResponse, HTMLResponse, Response

from blobledger import __version__
from blobledger.web import page_headers

SWAGGER_UI = Path(str(importlib.resources.files("fastapi_offline") / "static"))
OWN = Path(__file__).parent / "static"
#: the files the page loads (and nothing else of either folder)
FILES = {
    "swagger-ui-bundle.js": SWAGGER_UI / "swagger-ui-bundle.js",
    "swagger-ui.css": SWAGGER_UI / "swagger-ui.css",
    "favicon.png": SWAGGER_UI / "favicon.png",
    "swagger-init.js": OWN / "swagger-init.js",
}
MEDIA_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
               ".png": "image/png"}
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
HEADERS = page_headers(CONTENT_SECURITY_POLICY)
PAGE = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>blobledger {__version__}: API</title>
<link rel="stylesheet" href="docs/static/swagger-ui.css">
<link rel="icon" type="image/png" href="docs/static/favicon.png">
</head>
<body>
<div id="swagger-ui" data-openapi="openapi.json"></div>
<script src="docs/static/swagger-ui-bundle.js"></script>
<script src="docs/static/swagger-init.js"></script>
</body>
</html>
"""

router = APIRouter(include_in_schema=False)


@router.get("/docs")
async def api_docs() -> Response:
    """The page."""
    return HTMLResponse(PAGE, headers=HEADERS)


@router.get("/docs/static/{name}")
async def api_docs_file(name: str) -> Response:
    """One of the files the page loads."""
    path = FILES.get(name)
    if path is None:
        raise HTTPException(404, "no such file")
    return FileResponse(path, media_type=MEDIA_TYPES[path.suffix], headers=HEADERS)
