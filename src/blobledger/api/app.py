"""The ASGI application: ``create_app(ledger)`` wires routes, problems, auth and lifespan.

Embed it in your own service (``app.mount("/files", create_app(ledger))``) or run it with
``blobledger serve``. Given a ledger, the app uses it and leaves closing it to the caller;
given none, its lifespan opens one from the settings (migrating the database) and closes it.
Background workers (``workers=[...]``: :class:`blobledger.workers.supervisor.Worker`, or
plain coroutine functions taking the ledger) run for the app's lifetime, each under a
supervisor that logs a failure at once and restarts the worker with backoff
(:mod:`blobledger.workers.supervisor`), and are cancelled at shutdown: that is where a
sweeper plugs in. Their states are ``app.state.workers`` (``/readyz``, ``/ops/workers``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from fastapi import FastAPI

from blobledger import __version__, web
from blobledger.api import browser, docs, openapi, problems
from blobledger.api.guard import Guard
from blobledger.api.routes import (
    buckets,
    content,
    direct,
    documents,
    ops,
    pipeline,
    service,
    tus,
    variants,
)
from blobledger.config import Settings
from blobledger.config import from_env as settings_from_env
from blobledger.db import Database
from blobledger.protocol.ledger import Ledger
from blobledger.stores import open_store
from blobledger.workers import supervisor
from blobledger.workers.supervisor import Worker

log = logging.getLogger("blobledger.api")

#: a plain worker: a coroutine function taking the ledger, run (and restarted) for the app's
#: lifetime but not judged by ``/readyz`` (it reports no completed run)
PlainWorker = Callable[[Ledger], Awaitable[None]]


def create_app(
    ledger: Ledger | None = None,
    settings: Settings | None = None,
    *,
    workers: Sequence[Worker | PlainWorker] = (),
    body_timeout: float | None = None,
) -> FastAPI:
    """The blobledger HTTP service over ``ledger`` (or one built from ``settings``/env).

    ``body_timeout``: seconds an upload may go without a byte before it is refused (408);
    ``settings.body_timeout`` (``BLOBLEDGER_BODY_TIMEOUT``) unless given.
    """
    settings = settings or (ledger.settings if ledger is not None else settings_from_env())

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned: Ledger | None = None
        if app.state.ledger is None:
            owned = Ledger(Database(settings.database_url),
                           open_store(settings.store_url, settings), settings)
            await owned.connect()
            app.state.ledger = owned
        states, tasks = supervisor.start([_supervised(worker) for worker in workers],
                                         app.state.ledger, settings.worker_grace)
        app.state.workers = states
        tasks.append(asyncio.create_task(ops.sample_metrics(app.state.metrics_history),
                                         name="metrics history"))
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            results = await asyncio.gather(*tasks, return_exceptions=True)
            for task, result in zip(tasks, results, strict=True):
                if isinstance(result, Exception):
                    log.error("background worker %s failed", task.get_name(), exc_info=result)
            if owned is not None:
                await owned.close()
                app.state.ledger = None

    app = FastAPI(
        title="blobledger",
        version=__version__,
        description="Documents whose bytes live in an object store and whose truth lives in "
        "a database, kept consistent through every crash. Errors are RFC 9457 problem "
        "documents.",
        lifespan=lifespan,
        redirect_slashes=False,  # a redirect would be built from the client's Host header
        # the docs page is served from a package's files (api/docs.py), never from a CDN
        docs_url=None, redoc_url=None, swagger_ui_oauth2_redirect_url=None,
    )
    app.state.ledger = ledger
    app.state.settings = settings
    app.state.workers = {}
    app.state.body_timeout = settings.body_timeout if body_timeout is None else body_timeout
    problems.install(app)
    openapi.install(app)
    app.include_router(documents.router)
    app.include_router(buckets.router)
    app.include_router(content.router)
    app.include_router(variants.router)
    app.include_router(service.router)
    app.include_router(tus.router)
    app.include_router(direct.router)
    app.include_router(ops.router)
    app.include_router(pipeline.router)
    app.include_router(web.router)
    app.include_router(docs.router)
    app.state.metrics_history = ops.MetricsHistory()
    app.add_middleware(Guard, max_uploads=settings.max_uploads,
                       min_body_rate=settings.min_body_rate,
                       body_rate_window=settings.body_rate_window)
    browser.install(app, settings)  # the outermost layer: before all else
    return app


def _supervised(worker: Worker | PlainWorker) -> Worker:
    if isinstance(worker, Worker):
        return worker

    async def loop(ledger: Ledger, beat: supervisor.Beat) -> None:
        await worker(ledger)

    return Worker(getattr(worker, "__name__", "worker"), None, loop)
