"""`/throughput` and `/api/throughput`: live message and byte rates, for the whole cluster and per topic, drawn by
`templates/charts/_throughput.html` (uPlot, polling the JSON every 2 s). One sampler per console user (so each sees
only the topics their ACLs allow) runs while charts keep asking; see moldau.console.throughput for the sources."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from moldau.console.context import ConsoleContext
from moldau.console.throughput import HISTORY_S, INTERVAL_S, SOURCES, ThroughputSampler

__all__ = ["routes"]

BUSY_TOPIC_CHARTS = 6


def routes(ctx: ConsoleContext) -> list[BaseRoute]:
    def sampler_for(request: Request) -> ThroughputSampler:
        return ctx.throughput.watched(ctx.clients_for(request))

    async def api(request: Request) -> Response:
        topic = request.query_params.get("topic") or None
        history = sampler_for(request).history
        extra = {} if topic else {"busy": history.busiest(BUSY_TOPIC_CHARTS)}
        return JSONResponse({"topic": topic, "interval_s": INTERVAL_S, "history_s": HISTORY_S,
                             **history.series(topic), **extra, "sources": SOURCES})

    async def page(request: Request) -> Response:
        busy = sampler_for(request).history.busiest(BUSY_TOPIC_CHARTS)
        return ctx.render(request, "throughput/index.html", busy=busy)

    return [Route("/throughput", page, methods=["GET"]), Route("/api/throughput", api, methods=["GET"])]
