"""EndQuorumEpoch (key 54): a leader that shuts down resigns, so the voters elect a successor at once."""

from __future__ import annotations

from typing import Any

from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import quorum_answer


async def handle(ctx: RequestContext, request: Any) -> Any:
    return quorum_answer(ctx.broker.quorum.handle_end_epoch, request)


API = Api(key=54, name="EndQuorumEpoch", min_version=1, max_version=1, handle=handle)
