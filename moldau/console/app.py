"""The Starlette application of the console's pages (moldau.console.pages) and their static files.

`listener.py` serves it beside `/metrics` and the routes other subsystems add."""

from __future__ import annotations

from confluent_kafka import KafkaException
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from moldau.console.context import STATIC_DIR, ConsoleContext
from moldau.console.errors import ConsoleError, error_response
from moldau.console.pages import page_routes
from moldau.console.signin import SignInMiddleware
from moldau.registry.http.slashes import EncodedSlashes

__all__ = ["build_pages_app"]


def build_pages_app(console: ConsoleContext) -> Starlette:
    """The console's pages and their static files, behind the sign-in check (moldau.console.lazy_pages builds it
    when the first request reaches it)."""
    routes: list[BaseRoute] = [Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
                               *page_routes(console)]

    async def on_error(request: Request, exc: Exception) -> Response:
        return error_response(console, request, exc)

    # Sign-in on secured clusters and the cross-site check of forms (signin.py); then names sent with an encoded
    # slash (`/groups/team%2Fa`) kept as one path segment for the `{name:segment}` routes.
    middleware = [Middleware(SignInMiddleware, signin=console.signin), Middleware(EncodedSlashes)]
    return Starlette(routes=routes, exception_handlers={ConsoleError: on_error, KafkaException: on_error},
                     middleware=middleware)
