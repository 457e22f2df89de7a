"""The durable form of groups: records of the compacted internal topic `__consumer_offsets`.

The encoding is Kafka's own (the `OffsetCommitKey/Value` and `GroupMetadataKey/Value` schemas), so Kafka's tools
read these records and a Kafka broker could load them. Every key and value starts with an int16 schema version;
strings are int16-length-prefixed UTF-8 (-1 for null), bytes int32-length-prefixed, arrays int32-counted.

    OffsetCommitKey   v1: group string, topic string, partition int32
    OffsetCommitValue v3: offset int64, leader_epoch int32, metadata string, commit_timestamp int64
    GroupMetadataKey  v2: group string
    GroupMetadataValue v3: protocol_type string, generation int32, protocol string?, leader string?,
                          current_state_timestamp int64, members [member_id string, group_instance_id string?,
                          client_id string, client_host string, rebalance_timeout int32, session_timeout int32,
                          subscription bytes, assignment bytes]

These versions are written; values of versions 0..3 are read. A null value is a tombstone: the entity is gone,
and compaction, which keeps the latest record per key, eventually forgets it. A group is placed on partition
`abs(javaStringHashCode(group)) % partitions`, exactly as Kafka does, so tools agree on where a group lives.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from moldau.coordinator.record_codec import Reader as _Reader
from moldau.coordinator.record_codec import RecordFormatError as RecordFormatError
from moldau.coordinator.record_codec import Writer as _Writer
from moldau.coordinator.record_codec import partition_for as partition_for

OFFSETS_TOPIC = "__consumer_offsets"

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3


# -- entities ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int  # -1: unknown
    metadata: str
    commit_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes  # the member's metadata for the group's selected protocol
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str  # "" when none
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int  # -1: unknown
    members: tuple[MemberValue, ...]


# -- encoding ------------------------------------------------------------------------------------------------


def encode_key(key: RecordKey) -> bytes:
    if isinstance(key, ConsumerGroupKey):
        return _encode_consumer_key(key)
    if isinstance(key, ShareGroupKey):
        return bytes(_Writer(SG_METADATA).string(key.group).buf)
    if isinstance(key, ShareMemberKey):
        return bytes(_Writer(SG_MEMBER).string(key.group).string(key.member_id).buf)
    if isinstance(key, OffsetKey):
        return _encode_offset_key(key)
    return bytes(_Writer(GROUP_KEY_VERSION).string(key.group).buf)


def encode_value(value: RecordValue | None) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, ShareGroupValue):
        w = _Writer(CONSUMER_VALUE_VERSION).i32(value.epoch).i32(len(value.topics))
        for topic in value.topics:
            w.string(topic)
        return bytes(w.buf)
    if isinstance(value, ShareMemberValue):
        w = _Writer(CONSUMER_VALUE_VERSION).i32(value.member_epoch).string(value.rack_id).string(value.client_id)
        w.string(value.client_host).i32(len(value.subscribed_topics))
        for topic in value.subscribed_topics:
            w.string(topic)
        return bytes(w.buf)
    if not isinstance(value, OffsetValue | GroupValue):
        return _encode_consumer_value(value)
    if isinstance(value, OffsetValue):
        return _encode_offset_value(value)
    w = _Writer(GROUP_VALUE_VERSION).string(value.protocol_type).i32(value.generation)
    w.string(value.protocol).string(value.leader).i64(value.current_state_timestamp_ms).i32(len(value.members))
    for m in value.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
        w.i32(m.rebalance_timeout_ms).i32(m.session_timeout_ms).bytes_(m.subscription).bytes_(m.assignment)
    return bytes(w.buf)


# Offset records are written for every commit, so they are packed directly rather than field by field with a
# `_Writer`: the same bytes (tests/unit/coordinator/test_records.py), a few calls instead of a dozen.
_OFFSET_KEY_HEAD = struct.Struct(">hh")  # version, group length
_LENGTH = struct.Struct(">h")
_PARTITION = struct.Struct(">i")
_OFFSET_VALUE_HEAD = struct.Struct(">hqih")  # version, offset, leader epoch, metadata length
_TIMESTAMP = struct.Struct(">q")


def _encode_offset_key(key: OffsetKey) -> bytes:
    group, topic = key.group.encode(), key.topic.encode()
    return b"".join((_OFFSET_KEY_HEAD.pack(OFFSET_KEY_VERSION, len(group)), group, _LENGTH.pack(len(topic)), topic,
                     _PARTITION.pack(key.partition)))


def _encode_offset_value(value: OffsetValue) -> bytes:
    metadata = value.metadata.encode()
    return b"".join((_OFFSET_VALUE_HEAD.pack(OFFSET_VALUE_VERSION, value.offset, value.leader_epoch, len(metadata)),
                     metadata, _TIMESTAMP.pack(value.commit_timestamp_ms)))


# -- decoding ------------------------------------------------------------------------------------------------


def decode_key(data: bytes) -> RecordKey:
    r = _Reader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.string(), r.string(), r.i32())
    if version == 2:
        return GroupKey(r.string())
    if CG_METADATA <= version <= CG_CURRENT:
        member_records = (CG_MEMBER, CG_TARGET_MEMBER, CG_CURRENT)
        return ConsumerGroupKey(version, r.string(), r.string() if version in member_records else None)
    if version == SG_METADATA:
        return ShareGroupKey(r.string())
    if version == SG_MEMBER:
        return ShareMemberKey(r.string(), r.string())
    raise RecordFormatError(f"unknown key version {version}")


def decode_value(key: RecordKey, data: bytes | None) -> RecordValue | None:
    if data is None:
        return None
    r = _Reader(data)
    if isinstance(key, ConsumerGroupKey):
        return _decode_consumer_value(key, r)
    if isinstance(key, ShareGroupKey):
        if (version := r.i16()) != CONSUMER_VALUE_VERSION:
            raise RecordFormatError(f"unknown share group value version {version}")
        return ShareGroupValue(r.i32(), tuple(r.string() for _ in range(_count(r))))
    if isinstance(key, ShareMemberKey):
        if (version := r.i16()) != CONSUMER_VALUE_VERSION:
            raise RecordFormatError(f"unknown share group member value version {version}")
        epoch, rack, client_id, host = r.i32(), r.nullable_string(), r.string(), r.string()
        return ShareMemberValue(epoch, rack, client_id, host, tuple(r.string() for _ in range(_count(r))))
    version = r.i16()
    if isinstance(key, OffsetKey):
        return _offset_value(r, version)
    return _group_value(r, version)


def _offset_value(r: _Reader, version: int) -> OffsetValue:
    if not 0 <= version <= 3:
        raise RecordFormatError(f"unknown offset value version {version}")
    offset = r.i64()
    leader_epoch = r.i32() if version >= 3 else -1
    metadata = r.string()
    commit_ts = r.i64()
    if version == 1:
        r.i64()  # expire timestamp: retention is the broker's business now
    return OffsetValue(offset, leader_epoch, metadata, commit_ts)


def _group_value(r: _Reader, version: int) -> GroupValue:
    if not 0 <= version <= 3:
        raise RecordFormatError(f"unknown group value version {version}")
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    state_ts = r.i64() if version >= 2 else -1
    members = tuple(_member_value(r, version) for _ in range(r.i32()))
    return GroupValue(protocol_type, generation, protocol, leader, state_ts, members)


def _member_value(r: _Reader, version: int) -> MemberValue:
    member_id = r.string()
    instance_id = r.nullable_string() if version >= 3 else None
    client_id = r.string()
    client_host = r.string()
    rebalance_timeout = r.i32() if version >= 1 else -1
    session_timeout = r.i32()
    if rebalance_timeout < 0:  # v0 had one timeout for both
        rebalance_timeout = session_timeout
    return MemberValue(member_id, instance_id, client_id, client_host, rebalance_timeout, session_timeout,
                       r.bytes_(), r.bytes_())


def decode(key: bytes, value: bytes | None) -> Record:
    parsed = decode_key(key)
    return Record(parsed, decode_value(parsed, value))


def encode(record: Record) -> tuple[bytes, bytes | None]:
    return encode_key(record.key), encode_value(record.value)


# -- consumer groups (KIP-848) -------------------------------------------------------------------------------
#
# Keys use Kafka's record types and key layouts (int16 type, then group string and, per member, member id
# string), so tools can tell what a record is about. Values use Moldau's own layout, version 0, in the same
# non-flexible primitives as above (Kafka's values are flexible-version schemas with topic ids); a Kafka
# broker cannot load them. Layouts, after the int16 value version:
#
#   3 ConsumerGroupMetadata               epoch int32
#   4 ConsumerGroupPartitionMetadata      topics [name string, partitions int32]
#   5 ConsumerGroupMemberMetadata         instance_id string?, rack_id string?, client_id string,
#                                         client_host string, topics [string], regex string?,
#                                         rebalance_timeout int32, server_assignor string?, principal string?
#                                         (value version 1; absent in version 0), and for a member of the
#                                         classic protocol: session_timeout int32,
#                                         protocols [name string, metadata bytes]
#   6 ConsumerGroupTargetAssignmentMetadata  assignment_epoch int32
#   7 ConsumerGroupTargetAssignmentMember    assignment
#   8 ConsumerGroupCurrentMemberAssignment   member_epoch int32, previous_member_epoch int32, state int8,
#                                            assigned assignment, pending_revocation assignment
#  10 ShareGroupMemberMetadata            member_epoch int32, rack_id string?, client_id string,
#                                         client_host string, topics [string] (a share group's member; its
#                                         assignment follows from its topics, so it is not written)
#  11 ShareGroupMetadata                  epoch int32, topics [string] (a share group, KIP-932; the topics it
#                                         may have share-partition state of)
#
# where assignment = [topic string, partitions [int32]].

CG_METADATA, CG_PARTITIONS, CG_MEMBER, CG_TARGET_METADATA, CG_TARGET_MEMBER, CG_CURRENT = range(3, 9)
CONSUMER_VALUE_VERSION = 0
# Member records carry the member's principal from version 1 (its regex is resolved with the principal's rights).
MEMBER_VALUE_VERSION = 1
SG_MEMBER = 10  # ShareGroupMemberMetadata: a member of a share group, at its member epoch
SG_METADATA = 11  # ShareGroupMetadata: a share group exists, at this group epoch

# topic -> partitions; sorted tuples so equal assignments compare and encode equally.
Assignment = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    """A consumer group record's key: its type (3..8), the group and, for member records, the member."""

    record_type: int
    group: str
    member_id: str | None = None


@dataclass(frozen=True, slots=True)
class ShareGroupKey:
    """A share group's record (type 11): its value is `ShareGroupValue`, a tombstone its deletion."""

    group: str


@dataclass(frozen=True, slots=True)
class ShareMemberKey:
    """A share group member's record (type 10): its value is `ShareMemberValue`, a tombstone its leaving."""

    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareMemberValue:
    """What a share group member is, as its coordinator needs it back after a restart to let it carry on."""

    member_epoch: int
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ShareGroupValue:
    """A share group's epoch and the topics it may have share-partition state of (those its members subscribed
    to, or an administrator set offsets of, less those whose offsets were deleted), sorted."""

    epoch: int
    topics: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GroupEpochValue:
    epoch: int


@dataclass(frozen=True, slots=True)
class PartitionMetadataValue:
    topics: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """What a member speaking the classic protocol inside a consumer group brought in its JoinGroup."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]  # (name, subscription metadata), in the member's preference


@dataclass(frozen=True, slots=True)
class ConsumerMemberValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topics: tuple[str, ...]
    subscribed_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic: ClassicMemberMetadata | None = None  # None: a member of the consumer protocol
    # Who the member heartbeats as ("User:alice"): its regex matches only topics this principal may DESCRIBE.
    # None in records written before it was kept (version 0), until the member's next heartbeat.
    principal: str | None = None


@dataclass(frozen=True, slots=True)
class TargetEpochValue:
    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class TargetMemberValue:
    assignment: Assignment


@dataclass(frozen=True, slots=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # 0 stable, 1 unrevoked partitions, 2 unreleased partitions
    assigned: Assignment
    pending_revocation: Assignment


ConsumerValue = (GroupEpochValue | PartitionMetadataValue | ConsumerMemberValue | TargetEpochValue
                 | TargetMemberValue | CurrentAssignmentValue)
RecordKey = OffsetKey | GroupKey | ConsumerGroupKey | ShareGroupKey | ShareMemberKey
RecordValue = OffsetValue | GroupValue | ConsumerValue | ShareGroupValue | ShareMemberValue


@dataclass(frozen=True, slots=True)
class Record:
    """One record of `__consumer_offsets`; `value` None is a tombstone."""

    key: RecordKey
    value: RecordValue | None


def _encode_consumer_key(key: ConsumerGroupKey) -> bytes:
    w = _Writer(key.record_type).string(key.group)
    if key.member_id is not None:
        w.string(key.member_id)
    return bytes(w.buf)


def _write_assignment(w: _Writer, assignment: Assignment) -> None:
    w.i32(len(assignment))
    for topic, partitions in assignment:
        w.string(topic).i32(len(partitions))
        for p in partitions:
            w.i32(p)


def _encode_consumer_value(value: ConsumerValue) -> bytes:
    w = _Writer(MEMBER_VALUE_VERSION if isinstance(value, ConsumerMemberValue) else CONSUMER_VALUE_VERSION)
    if isinstance(value, GroupEpochValue):
        w.i32(value.epoch)
    elif isinstance(value, TargetEpochValue):
        w.i32(value.assignment_epoch)
    elif isinstance(value, PartitionMetadataValue):
        w.i32(len(value.topics))
        for name, count in value.topics:
            w.string(name).i32(count)
    elif isinstance(value, ConsumerMemberValue):
        w.string(value.instance_id).string(value.rack_id).string(value.client_id).string(value.client_host)
        w.i32(len(value.subscribed_topics))
        for topic in value.subscribed_topics:
            w.string(topic)
        w.string(value.subscribed_regex).i32(value.rebalance_timeout_ms).string(value.server_assignor)
        w.string(value.principal)
        if value.classic is not None:
            w.i32(value.classic.session_timeout_ms).i32(len(value.classic.protocols))
            for name, metadata in value.classic.protocols:
                w.string(name).bytes_(metadata)
    elif isinstance(value, TargetMemberValue):
        _write_assignment(w, value.assignment)
    else:
        w.i32(value.member_epoch).i32(value.previous_member_epoch)
        w.buf += bytes([value.state])
        _write_assignment(w, value.assigned)
        _write_assignment(w, value.pending_revocation)
    return bytes(w.buf)


def _count(r: _Reader) -> int:
    n = r.i32()
    if n < 0 or n > len(r.data):
        raise RecordFormatError(f"bad array length {n}")
    return n


def _read_assignment(r: _Reader) -> Assignment:
    return tuple((r.string(), tuple(r.i32() for _ in range(_count(r)))) for _ in range(_count(r)))


def _decode_consumer_value(key: ConsumerGroupKey, r: _Reader) -> ConsumerValue:
    version = r.i16()
    kind = key.record_type
    if version != CONSUMER_VALUE_VERSION and not (kind == CG_MEMBER and version == MEMBER_VALUE_VERSION):
        raise RecordFormatError(f"unknown consumer group value version {version}")
    if kind == CG_METADATA:
        return GroupEpochValue(r.i32())
    if kind == CG_TARGET_METADATA:
        return TargetEpochValue(r.i32())
    if kind == CG_PARTITIONS:
        return PartitionMetadataValue(tuple((r.string(), r.i32()) for _ in range(_count(r))))
    if kind == CG_MEMBER:
        head = (r.nullable_string(), r.nullable_string(), r.string(), r.string())
        topics = tuple(r.string() for _ in range(_count(r)))
        regex, rebalance_timeout, assignor = r.nullable_string(), r.i32(), r.nullable_string()
        principal = r.nullable_string() if version >= MEMBER_VALUE_VERSION else None
        classic = None
        if r.pos < len(r.data):  # only members of the classic protocol carry the trailing fields
            session = r.i32()
            classic = ClassicMemberMetadata(session, tuple((r.string(), r.bytes_()) for _ in range(_count(r))))
        return ConsumerMemberValue(*head, topics, regex, rebalance_timeout, assignor, classic, principal)
    if kind == CG_TARGET_MEMBER:
        return TargetMemberValue(_read_assignment(r))
    epochs = (r.i32(), r.i32())
    state = r._raw(1)[0]
    return CurrentAssignmentValue(*epochs, state, _read_assignment(r), _read_assignment(r))
