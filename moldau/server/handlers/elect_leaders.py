"""ElectLeaders (key 43): move leadership to preferred replicas, or elect a leader for leaderless partitions.

Forwarded to the active controller. Election type 0 (preferred) makes each partition's first replica its
leader if that replica is live and in the ISR (PREFERRED_LEADER_NOT_AVAILABLE otherwise, ELECTION_NOT_NEEDED
if it already leads); type 1 (unclean, v1+) gives a leaderless partition a live replica as leader even if it is
out of sync (ELIGIBLE_LEADERS_NOT_AVAILABLE if none is live). `topic_partitions` null means every partition,
and then only the partitions that changed or failed are reported, as Kafka does.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import CLUSTER_NAME, AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE

PREFERRED, UNCLEAN = 0, 1


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        refused = KafkaError(ErrorCode.cluster_authorization_failed, f"{ctx.principal} may not ALTER the cluster")
        wanted_refused = [] if request.topic_partitions is None else [
            (t.topic, int(p)) for t in request.topic_partitions for p in t.partitions]
        return _response(ctx, ErrorCode.cluster_authorization_failed, dict.fromkeys(wanted_refused, refused))
    forwarded = await ctx.broker.forward_to_controller(ctx, request)
    if forwarded is not None:
        return forwarded
    election_type = getattr(request, "election_type", PREFERRED)
    if election_type not in (PREFERRED, UNCLEAN):
        return _response(ctx, ErrorCode.invalid_request, {})
    wanted = None
    if request.topic_partitions is not None:
        wanted = [(t.topic, int(p)) for t in request.topic_partitions for p in t.partitions]
    try:
        outcomes = await ctx.broker.controller.elect_leaders(election_type == UNCLEAN, wanted)
    except KafkaError as exc:
        if wanted is None:
            return _response(ctx, exc.code, {})
        outcomes = {key: exc for key in wanted}
    return _response(ctx, ErrorCode.none, outcomes)


def _response(ctx: RequestContext, code: ErrorCode, outcomes: dict[tuple[str, int], KafkaError | None]) -> Any:
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), error in outcomes.items():
        by_topic.setdefault(topic, []).append(make(
            ctx.nested("PartitionResult"), partition_id=partition,
            error_code=ErrorCode.none if error is None else error.code,
            error_message=None if error is None else error.message))
    results = tuple(make(ctx.nested("ReplicaElectionResult"), topic=topic, partition_result=tuple(parts))
                    for topic, parts in by_topic.items())
    fields: dict[str, Any] = {"throttle_time": NO_THROTTLE, "replica_election_results": results}
    if ctx.version >= 1:
        fields["error_code"] = code
    return make(ctx.schema.response_type, **fields)


API = Api(key=43, name="ElectLeaders", min_version=0, max_version=2, handle=handle)
