"""A direct reader of the Fetch responses a follower gets from its leader (v13-v17), records left in the frame.

kio's generic reader decodes a partition's `records` into a new bytes object, a copy of every replicated byte,
and builds a Python object per field through its type-driven walk. This reader returns each partition's records
as a memoryview slice of the received frame, which `split_batches` and the segment write take as they are, so
replicated data goes from the socket buffer to the segment file with no copy in between. The frame may be a
pooled receive buffer (`moldau.protocol.framing.FrameBufferPool`): the pool reuses a buffer only when no view of
it is alive, so the views are safe for as long as the response is kept (one fetch round trip).

The objects carry kio's attribute names (`error_code`, `session_id`, `responses[].topic_id`,
`.partitions[].partition_index`, `.records`, `.diverging_epoch.epoch`, ...), so the follower reads either; error
codes are plain ints, the throttle time is `throttle_time_ms`. Anything this reader does not read the way kio
would returns None, and the caller decodes the frame with kio (which checks bounds and strips unknown tags
itself): a length or count past the end of the frame, a null where the schema allows none, an error code kio does
not know, a varint longer than five bytes, tagged fields out of order, a known tagged value whose size does not
match its contents. Unknown tagged fields are skipped by their size, as the protocol requires. Every length is
checked against the frame before it is used, and nothing is allocated by a declared size: a hostile or broken
peer gets the answer the generic path gives it. `tests/unit/protocol/test_fetch_response_reader.py` checks it
against kio's decoder.

Layout (Kafka's FetchResponse schema, flexible): throttle_time_ms, error_code, session_id, then per topic its
id and per partition: index, error code, high watermark, last stable offset, log start offset, aborted
transactions (nullable: producer id, first offset), preferred read replica, records (nullable), and the
partition's tagged fields: diverging_epoch (tag 0: epoch, end offset), current_leader (tag 1: leader id, leader
epoch), snapshot_id (tag 2: end offset, epoch). The response's own tagged field is node_endpoints (tag 0, v16+:
node id, host, port, rack).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from kio.schema.errors import ErrorCode

from moldau.protocol.framing import Frame

FIRST_VERSION = 13  # topic ids instead of names
LAST_VERSION = 17
FIRST_NODE_ENDPOINTS_VERSION = 16
_HEAD = struct.Struct(">ihi")  # throttle time, error code, session id
_PARTITION = struct.Struct(">ihqqq")  # index, error code, high watermark, last stable offset, log start offset
# The same, then the first byte of the aborted transactions (0: null) and the preferred read replica that follows a
# null array. Any valid partition has these 35 bytes: at least a byte of records and one of tagged fields follow.
_PARTITION_HEAD = struct.Struct(">ihqqqBi")
_ABORTED = struct.Struct(">qq")  # producer id, first offset
_I32 = struct.Struct(">i")
_EPOCH_END_OFFSET = struct.Struct(">iq")
_LEADER_ID_AND_EPOCH = struct.Struct(">ii")
_SNAPSHOT_ID = struct.Struct(">qi")
_ZERO_UUID = bytes(16)
_KNOWN_ERROR_CODES = frozenset(code.value for code in ErrorCode)
# Smallest wire size of an array element, to refuse counts the rest of the frame cannot hold.
_MIN_TOPIC_BYTES = 16 + 1 + 1
_MIN_PARTITION_BYTES = _PARTITION.size + 1 + 4 + 1 + 1
_MIN_ABORTED_BYTES = _ABORTED.size + 1
_MIN_NODE_ENDPOINT_BYTES = 4 + 1 + 4 + 1 + 1
# Takes a tagged field: its tag, where its value starts and where it ends.
_TagHandler = Callable[[int, int, int], None]


class _Unread(Exception):
    """Something this reader leaves to kio."""


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    epoch: int = -1
    end_offset: int = -1


@dataclass(frozen=True, slots=True)
class LeaderIdAndEpoch:
    leader_id: int = -1
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class SnapshotId:
    end_offset: int = -1
    epoch: int = -1


@dataclass(frozen=True, slots=True)
class AbortedTransaction:
    producer_id: int
    first_offset: int


# kio's values for absent tagged fields; shared, since they are frozen.
NO_DIVERGING_EPOCH = EpochEndOffset()
NO_CURRENT_LEADER = LeaderIdAndEpoch()
NO_SNAPSHOT_ID = SnapshotId()


@dataclass(slots=True)
class PartitionData:
    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: tuple[AbortedTransaction, ...] | None
    preferred_read_replica: int
    records: memoryview | None  # a slice of the response frame
    diverging_epoch: EpochEndOffset = NO_DIVERGING_EPOCH
    current_leader: LeaderIdAndEpoch = NO_CURRENT_LEADER
    snapshot_id: SnapshotId = NO_SNAPSHOT_ID


@dataclass(slots=True)
class FetchableTopicResponse:
    topic_id: uuid.UUID | None  # None for the all-zero id, as kio reads it
    partitions: list[PartitionData]


@dataclass(frozen=True, slots=True)
class NodeEndpoint:
    node_id: int
    host: str
    port: int
    rack: str | None


@dataclass(slots=True)
class FetchResponse:
    throttle_time_ms: int
    error_code: int
    session_id: int
    responses: list[FetchableTopicResponse]
    node_endpoints: tuple[NodeEndpoint, ...] = ()


def read_fetch_response(frame: Frame, pos: int, version: int) -> FetchResponse | None:
    """The Fetch response body starting at `pos` (after the response header), or None when this reader leaves it
    to kio (a version it does not read, or anything listed in the module docstring). Never raises."""
    if not FIRST_VERSION <= version <= LAST_VERSION:
        return None
    try:
        return _response(memoryview(frame), pos, version)
    except (_Unread, struct.error, IndexError, ValueError):  # UnicodeDecodeError is a ValueError
        return None


def _response(view: memoryview, pos: int, version: int) -> FetchResponse:
    end = len(view)
    throttle_ms, error_code, session_id = _HEAD.unpack_from(view, pos)
    _known_error(error_code)
    count, pos = _count(view, pos + _HEAD.size, end, _MIN_TOPIC_BYTES)
    topics = []
    for _ in range(count):
        raw_id = bytes(view[pos : pos + 16])
        if len(raw_id) != 16:
            raise _Unread("topic id past the end")
        partition_count, pos = _count(view, pos + 16, end, _MIN_PARTITION_BYTES)
        partitions, pos = _partitions(view, pos, end, partition_count)
        pos = _skip_tags(view, pos, end)
        topics.append(FetchableTopicResponse(None if raw_id == _ZERO_UUID else uuid.UUID(bytes=raw_id), partitions))
    response = FetchResponse(throttle_ms, error_code, session_id, topics)
    if view[pos] == 0:
        return response  # no tagged fields: nearly every response
    if version >= FIRST_NODE_ENDPOINTS_VERSION:
        _read_tags(view, pos, end, partial(_response_tag, response, view))
    else:
        _skip_tags(view, pos, end)
    return response


def _partitions(view: memoryview, pos: int, end: int, count: int) -> tuple[list[PartitionData], int]:
    """A topic's partitions. One loop, no call per partition in the common case (no aborted transactions, no
    tagged fields): a fetch answers every partition the follower copies from this leader."""
    partitions = []
    unpack_head = _PARTITION_HEAD.unpack_from
    for _ in range(count):
        index, error_code, high_watermark, last_stable, log_start, aborted_marker, preferred = unpack_head(view, pos)
        if error_code and error_code not in _KNOWN_ERROR_CODES:
            raise _Unread(f"error code {error_code} unknown to kio")  # kio refuses the whole response
        aborted = None
        if aborted_marker == 0:  # a null array: no aborted transactions asked for (a follower reads uncommitted)
            pos += _PARTITION_HEAD.size
        else:
            aborted, pos = _aborted(view, pos + _PARTITION.size, end)
            (preferred,) = _I32.unpack_from(view, pos)
            pos += 4
        size = view[pos]
        if size < 0x80:
            pos += 1
        else:
            size, pos = _uvarint(view, pos)
        records = None
        if size:
            stop = pos + size - 1
            if stop > end:
                raise _Unread("records past the end")
            records = view[pos:stop]
            pos = stop
        partition = PartitionData(index, error_code, high_watermark, last_stable, log_start, aborted, preferred,
                                  records)
        if view[pos] == 0:
            pos += 1
        else:
            pos = _read_tags(view, pos, end, partial(_partition_tag, partition, view))
        partitions.append(partition)
    return partitions, pos


def _aborted(view: memoryview, pos: int, end: int) -> tuple[tuple[AbortedTransaction, ...], int]:
    count, pos = _count(view, pos, end, _MIN_ABORTED_BYTES)
    entries = []
    for _ in range(count):
        producer_id, first_offset = _ABORTED.unpack_from(view, pos)
        pos = _skip_tags(view, pos + _ABORTED.size, end)
        entries.append(AbortedTransaction(producer_id, first_offset))
    return tuple(entries), pos


def _partition_tag(partition: PartitionData, view: memoryview, tag: int, start: int, stop: int) -> None:
    if tag == 0:
        epoch, end_offset = _fixed_struct(_EPOCH_END_OFFSET, view, start, stop)
        partition.diverging_epoch = EpochEndOffset(epoch, end_offset)
    elif tag == 1:
        leader_id, leader_epoch = _fixed_struct(_LEADER_ID_AND_EPOCH, view, start, stop)
        partition.current_leader = LeaderIdAndEpoch(leader_id, leader_epoch)
    elif tag == 2:
        end_offset, epoch = _fixed_struct(_SNAPSHOT_ID, view, start, stop)
        partition.snapshot_id = SnapshotId(end_offset, epoch)


def _response_tag(response: FetchResponse, view: memoryview, tag: int, start: int, stop: int) -> None:
    if tag != 0:
        return
    count, pos = _count(view, start, stop, _MIN_NODE_ENDPOINT_BYTES)
    endpoints = []
    for _ in range(count):
        (node_id,) = _I32.unpack_from(view, pos)
        host, pos = _string(view, pos + 4, stop)
        if host is None:
            raise _Unread("null host")
        (port,) = _I32.unpack_from(view, pos)
        rack, pos = _string(view, pos + 4, stop)
        pos = _skip_tags(view, pos, stop)
        endpoints.append(NodeEndpoint(node_id, host, port, rack))
    if pos != stop:
        raise _Unread("node endpoints do not fill their tagged field")
    response.node_endpoints = tuple(endpoints)


def _fixed_struct(layout: struct.Struct, view: memoryview, start: int, stop: int) -> tuple[int, ...]:
    """A tagged value holding a struct of fixed-size fields and its own (skipped) tagged fields."""
    if start + layout.size >= stop:
        raise _Unread("tagged value shorter than its struct")
    values: tuple[int, ...] = layout.unpack_from(view, start)
    if _skip_tags(view, start + layout.size, stop) != stop:
        raise _Unread("tagged value longer than its struct")
    return values


def _read_tags(view: memoryview, pos: int, end: int, known: _TagHandler) -> int:
    """Walk a tagged-field section, handing each field (tag, value start, value end) to `known`, which ignores
    tags it does not know; returns the position after the section."""
    count, pos = _uvarint(view, pos)
    if count > (end - pos) // 2:  # a tagged field takes at least two bytes
        raise _Unread("more tagged fields than bytes")
    previous = -1
    for _ in range(count):
        tag, pos = _uvarint(view, pos)
        if tag <= previous:
            raise _Unread("tagged fields out of order")
        previous = tag
        size, pos = _uvarint(view, pos)
        stop = pos + size
        if stop > end:
            raise _Unread("tagged field past the end")
        known(tag, pos, stop)
        pos = stop
    return pos


def _skip_tags(view: memoryview, pos: int, end: int) -> int:
    if view[pos] == 0:
        return pos + 1
    return _read_tags(view, pos, end, _ignore_tag)


def _ignore_tag(tag: int, start: int, stop: int) -> None:
    pass


def _count(view: memoryview, pos: int, end: int, min_element_bytes: int) -> tuple[int, int]:
    """A non-null compact array's element count, refused if the rest of the frame cannot hold that many."""
    n, pos = _uvarint(view, pos)
    if n == 0:
        raise _Unread("null array")
    if (n - 1) * min_element_bytes > end - pos:
        raise _Unread("array count past the end")
    return n - 1, pos


def _string(view: memoryview, pos: int, end: int) -> tuple[str | None, int]:
    n, pos = _uvarint(view, pos)
    if n == 0:
        return None, pos
    stop = pos + n - 1
    if stop > end:
        raise _Unread("string past the end")
    return str(view[pos:stop], "utf-8"), stop


def _uvarint(view: memoryview, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most five bytes, and the position after it."""
    byte = view[pos]
    if byte < 0x80:
        return byte, pos + 1
    value = byte & 0x7F
    for shift in (7, 14, 21, 28):
        pos += 1
        byte = view[pos]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos + 1
    raise _Unread("varint longer than five bytes")


def _known_error(code: int) -> None:
    if code not in _KNOWN_ERROR_CODES:
        raise _Unread(f"error code {code} unknown to kio")  # kio refuses the whole response
