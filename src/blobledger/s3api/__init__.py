"""An S3-compatible endpoint over the ledger (docs/s3.md): S3 clients (boto3, the AWS CLI)
read and write the service's documents, with the ledger's guarantees, by pointing their
endpoint at ``http://host:port/s3``.

One bucket (``BLOBLEDGER_S3API_BUCKET``) holds today's documents, a key naming a
document; requests are signed with SigV4 by the access keys of ``BLOBLEDGER_S3API_KEYS``
(:mod:`.sigv4`, verified by botocore's own canonicalisation). ``blobledger serve`` mounts
it (:func:`mount`) when keys are set.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.routing import Host, Mount, Route
from starlette.types import ASGIApp

from blobledger.config import Settings


def create_s3_app(settings: Settings, prefix: str | None = None) -> ASGIApp:
    """The endpoint's ASGI app, to mount at ``prefix`` (``settings.s3api_prefix`` unless
    given; ``""``: the root of a host of its own) inside the service's app (whose
    ``state.ledger`` it uses)."""
    from blobledger.s3api.app import S3App

    return S3App(settings, settings.s3api_prefix if prefix is None else prefix)


def mount(app: Starlette, settings: Settings) -> None:
    """Serve the endpoint at ``settings.s3api_prefix`` of ``app``: the prefix itself (where
    an SDK sends ListBuckets when its endpoint URL ends there) and every path under it; and,
    with ``settings.s3api_host``, the whole of that host (path-style from its root) and of
    each ``BUCKET.`` before it (virtual-host-style)."""
    s3 = create_s3_app(settings)
    app.router.routes.append(Route(settings.s3api_prefix, s3))
    app.router.routes.append(Mount(settings.s3api_prefix, s3))
    if settings.s3api_host:  # before every other route: the whole host is S3's
        root = create_s3_app(settings, "")
        app.router.routes.insert(0, Host(settings.s3api_host, root))
        app.router.routes.insert(0, Host("{s3_bucket}." + settings.s3api_host, root))
