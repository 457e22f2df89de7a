"""What the broker reads and writes of the "consumer" embedded protocol.

Group members send opaque protocol metadata; for protocol type "consumer" it is Kafka's
ConsumerProtocolSubscription: version int16, topics [string] (int32 count, int16-length strings), user data
bytes, then from version 1 owned partitions [topic string, partitions [int32]], and fields the broker never
needs (generation, rack). The broker reads the topics to know which committed offsets a group still uses
(OffsetDelete, offset expiry) and whether a restarted static member changed its subscription.

Classic members of a consumer (KIP-848) group are assigned by the broker, not by a leader: it reads what they
own from their subscription and hands them a ConsumerProtocolAssignment (version int16, the same partition
array, user data bytes) in SyncGroup; converting a classic group reads its members' assignments the same way.
"""

from __future__ import annotations

import struct

CONSUMER_PROTOCOL_TYPE = "consumer"

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def subscribed_topics(metadata: bytes) -> frozenset[str] | None:
    """The topics of a ConsumerProtocolSubscription, or None when `metadata` is not one."""
    try:
        pos = _I16.size  # the version: every version starts with the topic list
        (count,) = _I32.unpack_from(metadata, pos)
        pos += _I32.size
        if count < 0 or count > len(metadata):
            return None
        topics = []
        for _ in range(count):
            (length,) = _I16.unpack_from(metadata, pos)
            pos += _I16.size
            if length < 0 or pos + length > len(metadata):
                return None
            topics.append(metadata[pos : pos + length].decode())
            pos += length
    except (struct.error, UnicodeDecodeError):
        return None
    return frozenset(topics)


TopicPartitions = frozenset[tuple[str, int]]


def _partitions(metadata: bytes, pos: int) -> tuple[TopicPartitions, int]:
    """A [topic string, partitions [int32]] array at `pos`; raises struct.error or ValueError if malformed."""
    (count,) = _I32.unpack_from(metadata, pos)
    pos += _I32.size
    if count < -1 or count > len(metadata):
        raise ValueError("bad topic count")
    found: set[tuple[str, int]] = set()
    for _ in range(max(count, 0)):
        (length,) = _I16.unpack_from(metadata, pos)
        pos += _I16.size
        if length < 0 or pos + length > len(metadata):
            raise ValueError("bad topic name")
        topic = metadata[pos : pos + length].decode()
        pos += length
        (n,) = _I32.unpack_from(metadata, pos)
        pos += _I32.size
        if n < -1 or n > len(metadata):
            raise ValueError("bad partition count")
        for _ in range(max(n, 0)):
            (partition,) = _I32.unpack_from(metadata, pos)
            pos += _I32.size
            found.add((topic, partition))
    return frozenset(found), pos


def _skip_topics_and_user_data(metadata: bytes) -> int:
    pos = _I16.size
    (count,) = _I32.unpack_from(metadata, pos)
    pos += _I32.size
    for _ in range(max(count, 0)):
        (length,) = _I16.unpack_from(metadata, pos)
        pos += _I16.size + max(length, 0)
    (user_data,) = _I32.unpack_from(metadata, pos)
    return int(pos + _I32.size + max(user_data, 0))


def owned_partitions(metadata: bytes) -> TopicPartitions | None:
    """The partitions a ConsumerProtocolSubscription says its member owns: empty for version 0, which has no
    such field (eager members give up everything before they rejoin); None when `metadata` is not one."""
    try:
        (version,) = _I16.unpack_from(metadata, 0)
        if version < 1:
            return frozenset() if subscribed_topics(metadata) is not None else None
        return _partitions(metadata, _skip_topics_and_user_data(metadata))[0]
    except (struct.error, ValueError, UnicodeDecodeError):
        return None


def assigned_partitions(assignment: bytes) -> TopicPartitions | None:
    """The partitions of a ConsumerProtocolAssignment (empty bytes: none), or None when it is not one."""
    if not assignment:
        return frozenset()
    try:
        return _partitions(assignment, _I16.size)[0]
    except (struct.error, ValueError, UnicodeDecodeError):
        return None


def encode_assignment(partitions: TopicPartitions) -> bytes:
    """A ConsumerProtocolAssignment v0 (no user data), which every consumer reads."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    out = bytearray(_I16.pack(0) + _I32.pack(len(by_topic)))
    for topic, numbers in by_topic.items():
        name = topic.encode()
        out += _I16.pack(len(name)) + name + _I32.pack(len(numbers))
        out += b"".join(_I32.pack(n) for n in numbers)
    return bytes(out + _I32.pack(-1))
