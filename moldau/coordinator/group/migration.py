"""Classic members inside consumer (KIP-848) groups, and the conversions between the two kinds of group, sans-I/O.

Kafka lets a group move between protocols while it has members (`group.consumer.migration.policy`):

- upgrade: a member of the consumer protocol joining a Stable classic group of protocol type "consumer" turns it
  into a consumer group (a rebalancing one only once it is Stable again: see `upgrade_records`). Each classic
  member becomes a member at an epoch equal to the classic generation, keeping the partitions of its last
  assignment as its current and target assignment, so nobody loses anything at the switch; the newcomer's join
  then bumps the group epoch and the assignor moves partitions.
- classic members stay in the consumer group: JoinGroup, SyncGroup, Heartbeat and LeaveGroup work on it.
  Their generation is their member epoch. A JoinGroup is their heartbeat in the consumer protocol's terms:
  it carries their subscription and the partitions they still own (none for eager members, which give up
  everything before they rejoin); the answer gives the epoch, SyncGroup the partitions the reconciliation
  gave them. Heartbeat answers REBALANCE_IN_PROGRESS whenever they must rejoin to move on: the target moved
  past their epoch, they have partitions to give up, or partitions they wait for are now free. The assignor
  runs on the broker, so nobody is the leader.
- downgrade: when the last member of the consumer protocol leaves (or is expired) and only classic members
  remain, the group becomes a classic group again, Stable at the highest epoch of those members with their
  current partitions as assignments, and a rebalance starts at once: they rejoin and their leader assigns.
- a JoinGroup to a consumer group without members, or a ConsumerGroupHeartbeat to a classic group without
  members, converts it whatever the policy, as in Kafka.

Committed offsets belong to the group id, not to the kind of group: conversions never touch them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from moldau.coordinator.group.classic import ClassicGroup, GroupLimits, GroupState
from moldau.coordinator.group.consumer import (
    JOIN_EPOCH,
    STABLE,
    UNRELEASED,
    UNREVOKED,
    ConsumerGroup,
    HeartbeatRequest,
    to_assignment,
)
from moldau.coordinator.group.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    assigned_partitions,
    encode_assignment,
    owned_partitions,
    subscribed_topics,
)
from moldau.coordinator.group.member import JoinRequest, JoinResult, SyncRequest, SyncResult
from moldau.coordinator.group.records import (
    CG_CURRENT,
    CG_MEMBER,
    CG_METADATA,
    CG_PARTITIONS,
    CG_TARGET_MEMBER,
    CG_TARGET_METADATA,
    ClassicMemberMetadata,
    ConsumerGroupKey,
    ConsumerMemberValue,
    CurrentAssignmentValue,
    GroupEpochValue,
    GroupKey,
    GroupValue,
    MemberValue,
    PartitionMetadataValue,
    Record,
    TargetEpochValue,
    TargetMemberValue,
)
from moldau.protocol.errors import ErrorCode

POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")


def upgrade_allowed(policy: str) -> bool:
    return policy.lower() in ("bidirectional", "upgrade")


def downgrade_allowed(policy: str) -> bool:
    return policy.lower() in ("bidirectional", "downgrade")


@dataclass(frozen=True, slots=True)
class ClassicJoin:
    """The records a classic member's JoinGroup on a consumer group appends, and its answer."""

    records: list[Record]
    result: JoinResult
    must_rejoin: bool = False


# -- classic members in a consumer group ----------------------------------------------------------------------


def join(group: ConsumerGroup, request: JoinRequest, topics: Mapping[str, int], limits: GroupLimits,
         new_member_id: str) -> ClassicJoin:
    """A JoinGroup on a consumer group with members; `new_member_id` is used if the member has none yet."""
    error = _check_join(group, request, limits)
    if error != ErrorCode.none:
        return ClassicJoin([], JoinResult(error, request.member_id))
    first = request.protocols[0]
    topics_wanted = subscribed_topics(first.metadata)
    owned = owned_partitions(first.metadata)
    if topics_wanted is None or owned is None:
        return ClassicJoin([], JoinResult(ErrorCode.inconsistent_group_protocol, request.member_id))
    member_id = request.member_id
    if not member_id:
        member_id = new_member_id
        if request.group_instance_id is None and request.require_known_member_id:
            # KIP-394: the client rejoins with this id, so a lost answer leaves no member behind.
            return ClassicJoin([], JoinResult(ErrorCode.member_id_required, member_id))
    if member_id not in group.members and len(group.members) >= group.settings.max_size:
        return ClassicJoin([], JoinResult(ErrorCode.group_max_size_reached, member_id))
    classic = ClassicMemberMetadata(request.session_timeout_ms, tuple((p.name, p.metadata) for p in request.protocols))
    outcome = group.update_member(HeartbeatRequest(
        member_id, JOIN_EPOCH, instance_id=request.group_instance_id,
        rebalance_timeout_ms=request.rebalance_timeout_ms, subscribed_topics=tuple(sorted(topics_wanted)),
        owned=owned, client_id=request.client_id, client_host=request.client_host, classic=classic), topics)
    if outcome.result.error != ErrorCode.none:
        return ClassicJoin([], JoinResult(outcome.result.error, member_id))
    result = JoinResult(ErrorCode.none, member_id, outcome.result.member_epoch, CONSUMER_PROTOCOL_TYPE, first.name)
    return ClassicJoin(outcome.records, result)


def _check_join(group: ConsumerGroup, request: JoinRequest, limits: GroupLimits) -> ErrorCode:
    if request.protocol_type != CONSUMER_PROTOCOL_TYPE or not request.protocols:
        return ErrorCode.inconsistent_group_protocol
    if not limits.min_session_timeout_ms <= request.session_timeout_ms <= limits.max_session_timeout_ms:
        return ErrorCode.invalid_session_timeout
    if request.member_id:
        meta = group.members.get(request.member_id)
        if meta is not None and meta.classic is None:
            return ErrorCode.unknown_member_id  # a member of the consumer protocol has no JoinGroup
        if meta is not None and request.group_instance_id != meta.instance_id:
            return ErrorCode.fenced_instance_id
    if request.group_instance_id is not None:
        holder = group.member_of_instance(request.group_instance_id)
        if holder is not None and holder != request.member_id:
            return ErrorCode.fenced_instance_id if request.member_id else ErrorCode.unreleased_instance_id
    return ErrorCode.none


def _validate(group: ConsumerGroup, member_id: str, instance_id: str | None, generation: int) -> ErrorCode:
    meta = group.members.get(member_id)
    current = group.current.get(member_id)
    if meta is None or meta.classic is None or current is None:
        return ErrorCode.unknown_member_id
    if instance_id is not None and meta.instance_id != instance_id:
        return ErrorCode.fenced_instance_id
    return ErrorCode.none if generation == current.member_epoch else ErrorCode.illegal_generation


def sync(group: ConsumerGroup, request: SyncRequest) -> SyncResult:
    """SyncGroup: the member's partitions as the reconciliation left them; what a leader sends is ignored."""
    error = _validate(group, request.member_id, request.group_instance_id, request.generation_id)
    if error != ErrorCode.none:
        return SyncResult(error)
    meta = group.members[request.member_id]
    names = [name for name, _ in meta.classic.protocols] if meta.classic is not None else []
    if request.protocol_type not in (None, CONSUMER_PROTOCOL_TYPE) or (
            request.protocol_name is not None and request.protocol_name not in names):
        return SyncResult(ErrorCode.inconsistent_group_protocol)
    assigned = group.current[request.member_id].assigned
    return SyncResult(ErrorCode.none, encode_assignment(assigned), CONSUMER_PROTOCOL_TYPE,
                      request.protocol_name or (names[0] if names else None))


def heartbeat(group: ConsumerGroup, member_id: str, instance_id: str | None, generation: int) -> ErrorCode:
    error = _validate(group, member_id, instance_id, generation)
    if error != ErrorCode.none:
        return error
    return ErrorCode.rebalance_in_progress if must_rejoin(group, member_id) else ErrorCode.none


def must_rejoin(group: ConsumerGroup, member_id: str) -> bool:
    """Whether a classic member has something to catch up on that only a JoinGroup can bring it."""
    current = group.current[member_id]
    if current.member_epoch < group.target_epoch or current.state == UNREVOKED:
        return True
    if current.state == UNRELEASED:
        waiting = group.targets.get(member_id, frozenset()) - current.assigned
        return bool(waiting - group.owned_by_others(member_id))
    return False


def leave(group: ConsumerGroup, identities: Sequence[tuple[str, str | None]],
          topics: Mapping[str, int]) -> tuple[list[Record], tuple[ErrorCode, ...]]:
    """LeaveGroup of classic members: each named member goes, in one change of the group."""
    leaving: list[str] = []
    errors = []
    for member_id, instance_id in identities:
        found = group.member_of_instance(instance_id) if instance_id is not None else member_id
        meta = group.members.get(found or "")
        if found is None or meta is None:
            errors.append(ErrorCode.unknown_member_id)
        elif instance_id is not None and member_id and member_id != found:
            errors.append(ErrorCode.fenced_instance_id)
        else:
            errors.append(ErrorCode.none)
            leaving.append(found)
    records = group.remove_members(sorted(set(leaving)), topics) if leaving else []
    return records, tuple(errors)


# -- conversions ----------------------------------------------------------------------------------------------


def upgrade_records(classic: ClassicGroup, topics: Mapping[str, int]) -> list[Record] | None:
    """The records turning a Stable classic group with members into a consumer group holding the same members
    and partitions, or None when it cannot be: not Stable, not of the "consumer" protocol type, or a member's
    subscription or assignment that cannot be read.

    Only a Stable group: in the middle of a rebalance the coordinator no longer knows what each member still
    holds (assignments are reset once a generation's join completes), and handing those partitions to the
    newcomer at once could let two members consume one partition. The newcomer is told to retry
    (COORDINATOR_LOAD_IN_PROGRESS, see `GroupShard.consumer_heartbeat`) until the group is Stable. Should a
    request still wait in the group, replaying the records tells it to rejoin (`GroupShard.take_released`)."""
    protocol = classic.protocol_name
    if classic.state != GroupState.STABLE or classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return None
    group_id, generation = classic.group_id, classic.generation_id
    member_records: list[Record] = []
    subscribed: set[str] = set()
    for m in classic.members.values():
        # Before its first generation a group has no selected protocol: the member's favourite stands in.
        topics_wanted = subscribed_topics(m.metadata(protocol) if protocol in m.protocol_names()
                                          else m.protocols[0].metadata)
        assigned = assigned_partitions(m.assignment)
        if topics_wanted is None or assigned is None:
            return None
        subscribed |= topics_wanted
        value = ConsumerMemberValue(m.group_instance_id, None, m.client_id, m.client_host,
                                    tuple(sorted(topics_wanted)), None, m.rebalance_timeout_ms, None,
                                    ClassicMemberMetadata(m.session_timeout_ms,
                                                          tuple((p.name, p.metadata) for p in m.protocols)))
        assignment = to_assignment(assigned)
        member_records += [
            Record(ConsumerGroupKey(CG_MEMBER, group_id, m.member_id), value),
            Record(ConsumerGroupKey(CG_TARGET_MEMBER, group_id, m.member_id), TargetMemberValue(assignment)),
            Record(ConsumerGroupKey(CG_CURRENT, group_id, m.member_id),
                   CurrentAssignmentValue(generation, generation, STABLE, assignment, ())),
        ]
    metadata = tuple(sorted((t, n) for t, n in topics.items() if t in subscribed))
    return [
        Record(GroupKey(group_id), None),
        Record(ConsumerGroupKey(CG_METADATA, group_id), GroupEpochValue(generation)),
        Record(ConsumerGroupKey(CG_PARTITIONS, group_id), PartitionMetadataValue(metadata)),
        *member_records,
        Record(ConsumerGroupKey(CG_TARGET_METADATA, group_id), TargetEpochValue(generation)),
    ]


def downgrade_records(group: ConsumerGroup, leaving: Collection[str], now_ms: int) -> list[Record] | None:
    """The records replacing a consumer group, once `leaving` are gone, by a classic group of the remaining
    members, or None when that is not what Kafka does: nobody would remain, a remaining member speaks the
    consumer protocol, or they share no protocol."""
    rest = [m for m in group.members if m not in leaving]
    classic = [group.members[m].classic for m in rest]
    if not rest or any(c is None for c in classic):
        return None
    protocols = [dict(c.protocols) for c in classic if c is not None]
    first = classic[0]
    assert first is not None
    common = [name for name, _ in first.protocols if all(name in p for p in protocols)]
    if not common:
        return None
    protocol = common[0]
    members = []
    for member_id, offered in zip(rest, protocols, strict=True):
        meta = group.members[member_id]
        members.append(MemberValue(member_id, meta.instance_id, meta.client_id, meta.client_host,
                                   meta.rebalance_timeout_ms, group.session_timeout_ms(member_id), offered[protocol],
                                   encode_assignment(group.current[member_id].assigned)))
    generation = max(group.current[m].member_epoch for m in rest)
    value = GroupValue(CONSUMER_PROTOCOL_TYPE, generation, protocol, rest[0], now_ms, tuple(members))
    tombstones = [r for m in group.members for r in group.member_tombstones(m)]
    return [*tombstones, *group.tombstones(), Record(GroupKey(group.group_id), value)]
