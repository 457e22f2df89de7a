"""DescribeQuorum (key 55): the metadata quorum's leader, epoch, high watermark, voters and observers.

Only the leader knows how far each replica has fetched, so a node that is not the leader forwards the request to
it (from a client listener) or answers NOT_LEADER_OR_FOLLOWER (on the controller listener), as Kafka does.
Timestamps are wall-clock milliseconds, converted from the quorum's monotonic clock. v2 (KIP-853) adds each
replica's directory id (known for voters of a dynamic quorum) and the voters' endpoints (`nodes`).
"""

from __future__ import annotations

from typing import Any

from moldau.metadata.raft_wire import METADATA_TOPIC
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.raft import ReplicaState, VoterInfo
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api


async def handle(ctx: RequestContext, request: Any) -> Any:
    quorum = ctx.broker.quorum
    if not quorum.is_active_controller() and not ctx.on_controller_listener:
        forwarded = await ctx.broker.forward_to_controller(ctx, request)
        if forwarded is not None:
            return forwarded
    if quorum.leader_id != quorum.node_id:
        return _answer(ctx, ErrorCode.not_leader_or_follower, "this node is not the quorum leader", [], [])
    states = quorum.replica_states()
    offset_ms = ctx.broker.clock.time_ms() - quorum.clock_ms()
    record = quorum.voter_record()
    voters = [_replica(ctx, s, offset_ms, record.get(s.node_id)) for s in states if s.is_voter]
    observers = [_replica(ctx, s, offset_ms, None) for s in states if not s.is_voter]
    return _answer(ctx, ErrorCode.none, None, voters, observers)


def _replica(ctx: RequestContext, state: ReplicaState, offset_ms: int, voter: VoterInfo | None) -> Any:
    def wall(ms: int | None) -> int:
        return -1 if ms is None else ms + offset_ms

    directory = None if voter is None else voter.directory_id
    return make(ctx.nested("ReplicaState"), replica_id=state.node_id, replica_directory_id=directory,
                log_end_offset=state.log_end_offset, last_fetch_timestamp=wall(state.last_fetch_ms),
                last_caught_up_timestamp=wall(state.last_caught_up_ms))


def _answer(ctx: RequestContext, code: ErrorCode, message: str | None, voters: list[Any],
            observers: list[Any]) -> Any:
    quorum = ctx.broker.quorum
    leader = quorum.leader_id
    partition = make(ctx.nested("PartitionData"), partition_index=0, error_code=code, error_message=message,
                     leader_id=-1 if leader is None else leader, leader_epoch=quorum.node.term,
                     high_watermark=quorum.high_watermark, current_voters=tuple(voters), observers=tuple(observers))
    topic = make(ctx.nested("TopicData"), topic_name=METADATA_TOPIC, partitions=(partition,))
    return make(ctx.schema.response_type, error_code=ErrorCode.none, error_message=None, topics=(topic,),
                nodes=_nodes(ctx) if ctx.version >= 2 else ())


def _nodes(ctx: RequestContext) -> tuple[Any, ...]:
    """The voters' endpoints, as the voter set records them."""
    return tuple(
        make(ctx.nested("Node"), node_id=v.node_id,
             listeners=tuple(make(ctx.nested("Listener"), name=e.name, host=e.host, port=e.port) for e in v.endpoints))
        for v in ctx.broker.quorum.voter_record().voters if v.endpoints
    )


API = Api(key=55, name="DescribeQuorum", min_version=0, max_version=2, handle=handle)
