"""What the broker reads of the "consumer" embedded protocol: the topics a member subscribes to.

Group members send opaque protocol metadata; for protocol type "consumer" it is Kafka's
ConsumerProtocolSubscription: version int16, topics [string] (int32 count, int16-length strings), then
fields the broker never needs (user data, owned partitions, generation, rack). The broker reads the topics to
know which committed offsets a group still uses (OffsetDelete, offset expiry) and whether a restarted static
member changed its subscription.
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
