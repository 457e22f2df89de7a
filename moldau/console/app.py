"""The console's Starlette application: its pages (moldau.console.pages) and their static files, `/metrics` in
Prometheus' text format (or OpenMetrics when asked), and the routes other subsystems add (the client metrics pushed
to a broker, moldau.telemetry.http)."""

from __future__ import annotations

from collections.abc import Sequence

from confluent_kafka import KafkaException
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from moldau.console.context import STATIC_DIR, ConsoleContext
from moldau.console.errors import ConsoleError, error_response
from moldau.console.pages import page_routes
from moldau.console.signin import SignInMiddleware
from moldau.registry.http.slashes import EncodedSlashes

__all__ = ["build_app"]


def build_app(registry: CollectorRegistry, routes: Sequence[BaseRoute] = (),
              console: ConsoleContext | None = None) -> Starlette:
    """The listener's application; `console` None serves `/metrics` and `routes` only (controller-only nodes)."""

    async def metrics(request: Request) -> Response:
        # Collected in the broker's loop, between requests: the collectors read its state without locks.
        encode, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(encode(registry), media_type=content_type)

    all_routes: list[BaseRoute] = [Route("/metrics", metrics, methods=["GET"]), *routes]
    if console is None:
        return Starlette(routes=all_routes)
    all_routes += [Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"), *page_routes(console)]

    async def on_error(request: Request, exc: Exception) -> Response:
        return error_response(console, request, exc)

    # Sign-in on secured clusters and the cross-site check of forms (signin.py); then names sent with an encoded
    # slash (`/groups/team%2Fa`) kept as one path segment for the `{name:segment}` routes.
    middleware = [Middleware(SignInMiddleware, signin=console.signin), Middleware(EncodedSlashes)]
    return Starlette(routes=all_routes, exception_handlers={ConsoleError: on_error, KafkaException: on_error},
                     middleware=middleware)
