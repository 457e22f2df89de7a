"""The `connect` group protocol's bytes, laid out as Kafka's ConnectProtocol (`default`, version 0, eager) and
IncrementalCooperativeConnectProtocol (`compatible`, version 1; `sessioned`, version 2, the same layout, with
requests between workers signed) encode them, so that the metadata and
assignments a Moldau worker sends read the same as a Java worker's.

Metadata: version int16, url string, config offset int64, and from version 1 the member's current allocation
(nullable bytes: version int16 then an array of connector assignments). Assignment: version int16, error int16,
leader string, leader url string, config offset int64, assigned connectors and tasks, and from version 1 the
revoked ones and the scheduled rebalance delay (int32 ms). A connector assignment is the connector name and an
int32 array of task ids, where -1 stands for the connector itself (Kafka's CONNECTOR_TASK).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = [
    "CONNECT_PROTOCOL_TYPE", "Allocation", "Assignment", "MemberMetadata", "ProtocolError", "decode_assignment",
    "decode_metadata", "encode_assignment", "encode_metadata", "protocol_version",
]

CONNECT_PROTOCOL_TYPE = "connect"
CONNECTOR_TASK = -1
EAGER, COMPATIBLE, SESSIONED = "default", "compatible", "sessioned"
NO_ERROR, CONFIG_MISMATCH = 0, 1

TaskId = tuple[str, int]


class ProtocolError(ValueError):
    """Bytes that are not a Connect protocol message."""


def protocol_version(protocol: str) -> int:
    return {EAGER: 0, COMPATIBLE: 1, SESSIONED: 2}[protocol]


@dataclass(frozen=True)
class Allocation:
    """Connectors and tasks, as held by a member or handed to it."""

    connectors: frozenset[str] = frozenset()
    tasks: frozenset[TaskId] = frozenset()

    @staticmethod
    def of(connectors: Iterable[str] = (), tasks: Iterable[TaskId] = ()) -> Allocation:
        return Allocation(frozenset(connectors), frozenset(tasks))

    def __or__(self, other: Allocation) -> Allocation:
        return Allocation(self.connectors | other.connectors, self.tasks | other.tasks)

    def __sub__(self, other: Allocation) -> Allocation:
        return Allocation(self.connectors - other.connectors, self.tasks - other.tasks)

    def __bool__(self) -> bool:
        return bool(self.connectors or self.tasks)

    def size(self) -> int:
        return len(self.connectors) + len(self.tasks)


@dataclass(frozen=True)
class MemberMetadata:
    url: str
    config_offset: int
    allocation: Allocation = field(default_factory=Allocation)


@dataclass(frozen=True)
class Assignment:
    leader: str
    leader_url: str
    config_offset: int
    assigned: Allocation = field(default_factory=Allocation)
    revoked: Allocation = field(default_factory=Allocation)
    delay_ms: int = 0
    error: int = NO_ERROR


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def int16(self, value: int) -> None:
        self.parts.append(struct.pack(">h", value))

    def int32(self, value: int) -> None:
        self.parts.append(struct.pack(">i", value))

    def int64(self, value: int) -> None:
        self.parts.append(struct.pack(">q", value))

    def string(self, value: str) -> None:
        raw = value.encode()
        self.int16(len(raw))
        self.parts.append(raw)

    def nullable_bytes(self, value: bytes | None) -> None:
        if value is None:
            self.int32(-1)
        else:
            self.int32(len(value))
            self.parts.append(value)

    def allocation(self, allocation: Allocation) -> None:
        by_connector: dict[str, list[int]] = {name: [CONNECTOR_TASK] for name in sorted(allocation.connectors)}
        for connector, task in sorted(allocation.tasks):
            by_connector.setdefault(connector, []).append(task)
        self.int32(len(by_connector))
        for connector, tasks in sorted(by_connector.items()):
            self.string(connector)
            self.int32(len(tasks))
            for task in tasks:
                self.int32(task)

    def value(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def _take(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise ProtocolError("truncated Connect protocol message")
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return int(value)

    def int16(self) -> int:
        return self._take(">h")

    def int32(self) -> int:
        return self._take(">i")

    def int64(self) -> int:
        return self._take(">q")

    def string(self) -> str:
        size = self.int16()
        if size < 0 or self.pos + size > len(self.data):
            raise ProtocolError("bad string in Connect protocol message")
        raw = self.data[self.pos:self.pos + size]
        self.pos += size
        return raw.decode()

    def nullable_bytes(self) -> bytes | None:
        size = self.int32()
        if size < 0:
            return None
        if self.pos + size > len(self.data):
            raise ProtocolError("bad bytes in Connect protocol message")
        raw = self.data[self.pos:self.pos + size]
        self.pos += size
        return raw

    def allocation(self) -> Allocation:
        count = self.int32()
        connectors: set[str] = set()
        tasks: set[TaskId] = set()
        for _ in range(max(count, 0)):
            connector = self.string()
            for _ in range(max(self.int32(), 0)):
                task = self.int32()
                if task == CONNECTOR_TASK:
                    connectors.add(connector)
                else:
                    tasks.add((connector, task))
        return Allocation.of(connectors, tasks)


def encode_metadata(metadata: MemberMetadata, version: int) -> bytes:
    writer = _Writer()
    writer.int16(version)
    writer.string(metadata.url)
    writer.int64(metadata.config_offset)
    if version >= 1:
        allocation = _Writer()
        allocation.int16(version)
        allocation.allocation(metadata.allocation)
        writer.nullable_bytes(allocation.value())
    return writer.value()


def decode_metadata(data: bytes) -> MemberMetadata:
    reader = _Reader(data)
    version = reader.int16()
    url, offset = reader.string(), reader.int64()
    allocation = Allocation()
    if version >= 1:
        raw = reader.nullable_bytes()
        if raw:
            inner = _Reader(raw)
            inner.int16()
            allocation = inner.allocation()
    return MemberMetadata(url, offset, allocation)


def encode_assignment(assignment: Assignment, version: int) -> bytes:
    writer = _Writer()
    writer.int16(version)
    writer.int16(assignment.error)
    writer.string(assignment.leader)
    writer.string(assignment.leader_url)
    writer.int64(assignment.config_offset)
    writer.allocation(assignment.assigned)
    if version >= 1:
        writer.allocation(assignment.revoked)
        writer.int32(assignment.delay_ms)
    return writer.value()


def decode_assignment(data: bytes) -> Assignment:
    reader = _Reader(data)
    version = reader.int16()
    error = reader.int16()
    leader, leader_url, offset = reader.string(), reader.string(), reader.int64()
    assigned = reader.allocation()
    revoked, delay = (reader.allocation(), reader.int32()) if version >= 1 else (Allocation(), 0)
    return Assignment(leader, leader_url, offset, assigned, revoked, delay, error)
