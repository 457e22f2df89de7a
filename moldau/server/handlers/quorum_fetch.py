"""Fetch (key 1) on the controller listener: a voter or observer fetches the metadata log (KRaft's flow).

The fetch carries the replica id, the fetch offset and the epoch of the entry before it; the answer carries the
entries, the quorum's high watermark and, when the logs diverge or the offset is below the leader's snapshot,
where to truncate to or which snapshot to fetch. A consumer's Fetch on this listener is refused.
"""

from __future__ import annotations

from typing import Any

from moldau.metadata.raft_wire import is_metadata_fetch
from moldau.protocol.codec import InvalidRequest
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import quorum_answer


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not is_metadata_fetch(request):
        raise InvalidRequest("the controller listener serves only fetches of the metadata log")
    return quorum_answer(ctx.broker.quorum.handle_fetch, request)


API = Api(key=1, name="Fetch", min_version=17, max_version=17, handle=handle)
