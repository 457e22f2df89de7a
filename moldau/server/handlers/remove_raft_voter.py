"""RemoveRaftVoter (key 81, KIP-853): take a voter out of the metadata quorum; it carries on as an observer.

Needs ALTER on the cluster; forwarded to the quorum leader as AddRaftVoter is. VOTER_NOT_FOUND for a node that
is not a voter (or whose recorded directory id differs), UNSUPPORTED_VERSION for a static quorum,
REQUEST_TIMED_OUT while another voter change is uncommitted. Asked to remove itself, the leader hands its
leadership over and answers NOT_LEADER_OR_FOLLOWER; the client retries at the new leader (see docs/raft.md).
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import CLUSTER_NAME, AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE
from moldau.server.handlers.raft_voters import DEFAULT_TIMEOUT_S, check_cluster, directory_id


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return _response(ctx, ErrorCode.cluster_authorization_failed, f"{ctx.principal} may not ALTER the cluster")
    forwarded = await ctx.broker.forward_to_controller(ctx, request)
    if forwarded is not None:
        return forwarded
    try:
        check_cluster(ctx, request)
        await ctx.broker.quorum.remove_voter(int(request.voter_id), directory_id(request.voter_directory_id),
                                             DEFAULT_TIMEOUT_S)
    except KafkaError as exc:
        return _response(ctx, exc.code, exc.message)
    return _response(ctx, ErrorCode.none, None)


def _response(ctx: RequestContext, code: ErrorCode, message: str | None) -> Any:
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=code, error_message=message)


API = Api(key=81, name="RemoveRaftVoter", min_version=0, max_version=0, handle=handle)
