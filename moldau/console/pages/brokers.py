"""`/brokers`: every broker with its address, rack, whether it is the active controller, its log directories
(size of what they hold, free space) and how many partitions it leads and hosts."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from moldau.console.cluster_view import gather_brokers
from moldau.console.context import ConsoleContext

__all__ = ["routes"]


def routes(ctx: ConsoleContext) -> list[BaseRoute]:
    async def brokers(request: Request) -> Response:
        details = await gather_brokers(ctx.clients_for(request))
        return ctx.render(request, "brokers/index.html", brokers=details)

    return [Route("/brokers", brokers, methods=["GET"])]
