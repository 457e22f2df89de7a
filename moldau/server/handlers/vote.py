"""Vote (key 52): a candidate or pre-candidate asks this voter for its vote (controller listener only)."""

from __future__ import annotations

from typing import Any

from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import quorum_answer


async def handle(ctx: RequestContext, request: Any) -> Any:
    return quorum_answer(ctx.broker.quorum.handle_vote, request)


# v2 carries KIP-996's pre-vote flag, which the core's pre-vote phase needs.
API = Api(key=52, name="Vote", min_version=2, max_version=2, handle=handle)
