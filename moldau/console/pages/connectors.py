"""`/connectors`: the connectors of the Kafka Connect cluster the console is pointed at (`console.connect.urls`),
with their state and tasks, live, and pause / resume / restart buttons. Without that config the page says how to
set it. The HTTP side is moldau.console.connect_client."""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from moldau.console.connect_client import ACTIONS, ConnectError, connector_action, list_connectors
from moldau.console.context import ConsoleContext
from moldau.console.errors import ConsoleError

__all__ = ["routes"]


def routes(ctx: ConsoleContext) -> list[BaseRoute]:
    async def index(request: Request) -> Response:
        fragment = bool(request.headers.get("hx-request"))
        template = "connectors/_table.html" if fragment else "connectors/index.html"
        if not ctx.connect_urls:
            return ctx.render(request, template, configured=False, rows=[], error=None)
        try:
            rows, error = await list_connectors(ctx.connect_urls), None
        except ConnectError as exc:
            rows, error = [], exc.message
        return ctx.render(request, template, configured=True, rows=rows, error=error, urls=ctx.connect_urls,
                          notice=request.query_params.get("notice"))

    async def act(request: Request) -> Response:
        name, action = request.path_params["name"], request.path_params["action"]
        if action not in ACTIONS:
            raise ConsoleError(404, f"no action {action!r}: {', '.join(ACTIONS)}")
        if not ctx.connect_urls:
            raise ConsoleError(400, "set console.connect.urls to manage connectors")
        try:
            await connector_action(ctx.connect_urls, name, action)
        except ConnectError as exc:
            raise ConsoleError(exc.status if 400 <= exc.status < 500 else 502, exc.message) from None
        return RedirectResponse("/connectors?" + urlencode({"notice": f"{action}: {name}"}), status_code=303)

    return [Route("/connectors", index, methods=["GET"]),
            Route("/connectors/{name}/{action}", act, methods=["POST"])]
