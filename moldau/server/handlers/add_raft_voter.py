"""AddRaftVoter (key 80, KIP-853): make a controller that already replicates the metadata log (an observer) a
voter of the quorum.

Needs ALTER on the cluster. A node that is not the quorum leader forwards the request from a client listener, or
answers NOT_LEADER_OR_FOLLOWER on the controller listener. The leader adds the voter once it has caught up and
no other voter change is uncommitted, retrying until the request's timeout (then REQUEST_TIMED_OUT); an existing
voter gets DUPLICATE_VOTER, a static quorum (`kraft.version` 0) UNSUPPORTED_VERSION. v1's `ack_when_committed`
false (KIP-1186) answers once the change is appended instead of committed.
"""

from __future__ import annotations

from typing import Any

from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.raft_voters import change_voters, timeout_s, voter_from_request


async def handle(ctx: RequestContext, request: Any) -> Any:
    async def add() -> None:
        voter = voter_from_request(ctx, request)
        ack = bool(getattr(request, "ack_when_committed", True))
        await ctx.broker.quorum.add_voter(voter, timeout_s(request.timeout), ack_when_committed=ack)

    return await change_voters(ctx, request, add)


API = Api(key=80, name="AddRaftVoter", min_version=0, max_version=1, handle=handle)
