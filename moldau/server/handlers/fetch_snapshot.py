"""FetchSnapshot (key 59): a voter or observer too far behind copies the leader's metadata snapshot in chunks."""

from __future__ import annotations

from typing import Any

from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import quorum_answer


async def handle(ctx: RequestContext, request: Any) -> Any:
    return quorum_answer(ctx.broker.quorum.handle_fetch_snapshot, request)


API = Api(key=59, name="FetchSnapshot", min_version=1, max_version=1, handle=handle)
