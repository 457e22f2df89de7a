"""The console's pages, one module per area; each has `routes(ctx)` returning its Starlette routes.

Paths are stable and linkable (`/`, `/brokers`, `/topics`, `/topics/<name>`, `/groups/<name>` ...). Pages are
rendered on the server from templates/<area>/; parts that refresh live are htmx fragments of the same templates.
"""

from __future__ import annotations

from starlette.routing import BaseRoute

from moldau.console.context import ConsoleContext
from moldau.console.pages import (
    acls,
    auth,
    brokers,
    connectors,
    groups,
    messages,
    overview,
    quotas,
    schemas,
    throughput,
    tokens,
    topics,
)

__all__ = ["page_routes"]


def page_routes(ctx: ConsoleContext) -> list[BaseRoute]:
    return [
        *overview.routes(ctx),
        *brokers.routes(ctx),
        *topics.routes(ctx),
        *messages.routes(ctx),
        *groups.routes(ctx),
        *throughput.routes(ctx),
        *schemas.routes(ctx),
        *auth.routes(ctx),
        *acls.routes(ctx),
        *quotas.routes(ctx),
        *tokens.routes(ctx),
        *connectors.routes(ctx),
    ]
