"""The console listener's application: `/metrics` in Prometheus' text format (or OpenMetrics when asked), the routes
other subsystems add (the client metrics pushed to a broker, moldau.telemetry.http) and, on brokers, the console's
pages (`app.py`), built when the first request reaches them.

Building the pages loads the page modules, Jinja and the clients the pages use (librdkafka's admin client,
kafka-python's protocol classes): about half of what a broker imports, most of a second of every start. A broker
whose console nobody opens never loads them, and `/metrics` never waits for them.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

if TYPE_CHECKING:
    from moldau.console.context import ConsoleContext

__all__ = ["LazyPages", "build_app"]

# What building the pages imports, module by module (the rest comes with these).
PAGE_MODULES = ("moldau.console.context", "moldau.console.app")


class LazyPages:
    """The console's pages as one ASGI application, made on the first request that reaches them."""

    def __init__(self, make_context: Callable[[], ConsoleContext]) -> None:
        self._make_context = make_context  # called in the event loop, once the page modules are imported
        self._lock = asyncio.Lock()
        self._app: ASGIApp | None = None
        self.context: ConsoleContext | None = None  # None until built

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self._app if self._app is not None else await self._build()
        await app(scope, receive, send)

    async def _build(self) -> ASGIApp:
        async with self._lock:  # requests arriving meanwhile wait for the one build
            if self._app is None:
                # In a worker thread: the event loop keeps serving Kafka clients between the import's steps.
                await asyncio.to_thread(_import_page_modules)
                from moldau.console.app import build_pages_app

                self.context = self._make_context()
                self._app = build_pages_app(self.context)
            return self._app

    async def stop(self) -> None:
        """End the pages' background work and close their users' connections (if they were ever built)."""
        for stop in self.context.on_stop if self.context is not None else ():
            await stop()


def _import_page_modules() -> None:
    for module in PAGE_MODULES:
        importlib.import_module(module)


def build_app(registry: CollectorRegistry, routes: Sequence[BaseRoute] = (),
              pages: LazyPages | None = None) -> Starlette:
    """The listener's application; `pages` None serves `/metrics` and `routes` only (controller-only nodes)."""

    async def metrics(request: Request) -> Response:
        # Collected in the broker's loop, between requests: the collectors read its state without locks.
        encode, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(encode(registry), media_type=content_type)

    app = Starlette(routes=[Route("/metrics", metrics, methods=["GET"]), *routes])
    if pages is not None:
        # What no route here serves goes to the pages. Their own route (a mount) would also take a known path with
        # the wrong method, which must stay a 405 (a POST to /metrics, a GET of the client telemetry endpoint).
        app.router.default = pages
    return app
