"""RemoveRaftVoter (key 81, KIP-853): take a voter out of the metadata quorum; it carries on as an observer.

Needs ALTER on the cluster; forwarded to the quorum leader as AddRaftVoter is. VOTER_NOT_FOUND for a node that
is not a voter (or whose recorded directory id differs), UNSUPPORTED_VERSION for a static quorum,
REQUEST_TIMED_OUT while another voter change is uncommitted. Asked to remove itself, the leader hands its
leadership over and answers NOT_LEADER_OR_FOLLOWER; the client retries at the new leader (see docs/raft.md).
"""

from __future__ import annotations

from typing import Any

from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.raft_voters import DEFAULT_TIMEOUT_S, change_voters, directory_id


async def handle(ctx: RequestContext, request: Any) -> Any:
    async def remove() -> None:
        await ctx.broker.quorum.remove_voter(int(request.voter_id), directory_id(request.voter_directory_id),
                                             DEFAULT_TIMEOUT_S)

    return await change_voters(ctx, request, remove)


API = Api(key=81, name="RemoveRaftVoter", min_version=0, max_version=0, handle=handle)
