"""BeginQuorumEpoch (key 53): a new leader announces itself to the voters (controller listener only)."""

from __future__ import annotations

from typing import Any

from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import quorum_answer


async def handle(ctx: RequestContext, request: Any) -> Any:
    return quorum_answer(ctx.broker.quorum.handle_begin_epoch, request)


API = Api(key=53, name="BeginQuorumEpoch", min_version=1, max_version=1, handle=handle)
