"""UpdateRaftVoter (key 82, KIP-853): a voter tells the quorum leader its current endpoints and directory id
(controller listener only). Moldau's voters send it when their entry in the voter set differs from what they are
(after `kraft.version` is upgraded, only the leader's directory id is known; a restart on another port).

Needs CLUSTER_ACTION on the cluster, as the other requests controllers send each other (checked before the
handler runs, moldau.security.acl.rules). The leader records the
endpoints in a new VotersRecord (a no-op when they did not change); VOTER_NOT_FOUND for a node that is not a voter,
UNSUPPORTED_VERSION for a static quorum, NOT_LEADER_OR_FOLLOWER (with the leader, when known) elsewhere.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE
from moldau.server.handlers.raft_voters import DEFAULT_TIMEOUT_S, check_cluster, voter_from_request


async def handle(ctx: RequestContext, request: Any) -> Any:
    quorum = ctx.broker.quorum
    try:
        check_cluster(ctx, request)
        if not quorum.dynamic:
            raise KafkaError(ErrorCode.unsupported_version, "the voter set is static (kraft.version 0)")
        if request.current_leader_epoch not in (-1, quorum.epoch):
            raise KafkaError(ErrorCode.fenced_leader_epoch if request.current_leader_epoch < quorum.epoch
                             else ErrorCode.unknown_leader_epoch)
        await quorum.update_voter(voter_from_request(ctx, request), DEFAULT_TIMEOUT_S)
    except KafkaError as exc:
        return _response(ctx, exc.code)
    return _response(ctx, ErrorCode.none)


def _response(ctx: RequestContext, code: ErrorCode) -> Any:
    quorum = ctx.broker.quorum
    leader = quorum.leader_address()
    current = make(ctx.nested("CurrentLeader"), leader_id=-1 if quorum.leader_id is None else quorum.leader_id,
                   leader_epoch=quorum.epoch, host="" if leader is None else leader.host,
                   port=-1 if leader is None else leader.port)
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=code, current_leader=current)


API = Api(key=82, name="UpdateRaftVoter", min_version=0, max_version=0, handle=handle)
