"""`/brokers`: every broker with its address, rack, whether it is the active controller, its log directories
(size of what they hold, free space) and how many partitions it leads and hosts. The active controller is the
metadata quorum's leader, which may be a controller-only node that is not in the list."""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from moldau.console.cluster_view import gather_brokers
from moldau.console.context import ConsoleContext

__all__ = ["routes"]


def routes(ctx: ConsoleContext) -> list[BaseRoute]:
    async def brokers(request: Request) -> Response:
        details, controller_id = await gather_brokers(ctx.clients_for(request), int(time.time() * 1000))
        return ctx.render(request, "brokers/index.html", brokers=details, controller_id=controller_id,
                          controller_is_broker=any(b.node_id == controller_id for b in details))

    return [Route("/brokers", brokers, methods=["GET"])]
