"""DescribeShareGroupOffsets v1 responses with Moldau's in-flight count per partition, as a tagged field.

Kafka 4.2 answers per share-partition the start offset, the leader epoch and (v1, KIP-1226) the lag. How many of
the records past the start offset are in flight (acquired by a member, or released and waiting to be delivered
again) is the other number an operator asks when a share group is slow, and Kafka has no field for it. Moldau adds
it as a tagged field (KIP-482): a client that does not know the tag skips it, as the protocol requires, so
Kafka's tools and librdkafka read these responses unchanged; `moldau groups describe` reads it. The field is
left out (its default) when the count is not known.

The tag is far above the ones Kafka numbers from 0, so that a field Kafka may add to this struct cannot collide.
kio reads the field types of its entities at run time, so this module must not postpone annotations.
"""

from dataclasses import dataclass, field

import kio.schema.describe_share_group_offsets.v1.response as v1
from kio.static.primitive import i64

IN_FLIGHT_TAG = 10000
UNKNOWN = i64(-1)


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeShareGroupOffsetsResponsePartition(v1.DescribeShareGroupOffsetsResponsePartition):
    in_flight_count: i64 = field(metadata={"kafka_type": "int64", "tag": IN_FLIGHT_TAG}, default=UNKNOWN)
    """Records between the start offset and the end of the share-partition's window that are acquired, or
    available again after at least one delivery; -1 when not known."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeShareGroupOffsetsResponseTopic(v1.DescribeShareGroupOffsetsResponseTopic):
    partitions: tuple[DescribeShareGroupOffsetsResponsePartition, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeShareGroupOffsetsResponseGroup(v1.DescribeShareGroupOffsetsResponseGroup):
    topics: tuple[DescribeShareGroupOffsetsResponseTopic, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeShareGroupOffsetsResponse(v1.DescribeShareGroupOffsetsResponse):
    groups: tuple[DescribeShareGroupOffsetsResponseGroup, ...]


# The classes the handler builds v1 responses from, by the names `RequestContext.nested` knows them by.
NESTED = {cls.__name__: cls for cls in (DescribeShareGroupOffsetsResponsePartition,
                                        DescribeShareGroupOffsetsResponseTopic,
                                        DescribeShareGroupOffsetsResponseGroup)}
