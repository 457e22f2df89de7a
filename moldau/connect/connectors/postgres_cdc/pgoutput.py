"""A decoder of PostgreSQL's `pgoutput` logical replication messages (protocol version 1). Pure: bytes in,
dataclasses out.

Column values arrive in text format; a tuple column is either text, null (`n`) or an unchanged TOASTed value
(`u`) that the server did not send because an update left it alone.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

__all__ = [
    "PG_EPOCH",
    "UNCHANGED_TOAST",
    "Begin",
    "Column",
    "Commit",
    "DecodeError",
    "Delete",
    "Insert",
    "Message",
    "Origin",
    "Relation",
    "Truncate",
    "TupleValue",
    "TypeInfo",
    "Update",
    "decode",
    "pg_timestamp",
]

PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)  # pgoutput's timestamps count microseconds from here


class _Unchanged:
    def __repr__(self) -> str:
        return "UNCHANGED_TOAST"


UNCHANGED_TOAST = _Unchanged()  # a TOASTed column an update did not change: its value was not sent
TupleValue = str | None | _Unchanged


class DecodeError(ValueError):
    """A message that is not valid pgoutput."""


@dataclass(frozen=True)
class Begin:
    final_lsn: int  # the LSN of the transaction's commit record
    commit_time_us: int  # microseconds since 2000-01-01 UTC
    xid: int


@dataclass(frozen=True)
class Commit:
    flags: int
    commit_lsn: int
    end_lsn: int  # the LSN just after the commit record: confirming it means the transaction is done
    commit_time_us: int


@dataclass(frozen=True)
class Origin:
    lsn: int
    name: str


@dataclass(frozen=True)
class Column:
    name: str
    type_oid: int
    type_modifier: int
    is_key: bool  # part of the replica identity (every column with REPLICA IDENTITY FULL)


@dataclass(frozen=True)
class Relation:
    oid: int
    namespace: str
    name: str
    replica_identity: str  # d(efault), n(othing), f(ull), i(ndex)
    columns: tuple[Column, ...]


@dataclass(frozen=True)
class TypeInfo:
    oid: int
    namespace: str
    name: str


@dataclass(frozen=True)
class Insert:
    relation_oid: int
    new: tuple[TupleValue, ...]


@dataclass(frozen=True)
class Update:
    relation_oid: int
    old: tuple[TupleValue, ...] | None  # the old tuple ('O', REPLICA IDENTITY FULL) or old key ('K'), if sent
    new: tuple[TupleValue, ...]
    old_is_key_only: bool


@dataclass(frozen=True)
class Delete:
    relation_oid: int
    old: tuple[TupleValue, ...]
    old_is_key_only: bool


@dataclass(frozen=True)
class Truncate:
    options: int  # bit 1: CASCADE, bit 2: RESTART IDENTITY
    relation_oids: tuple[int, ...]


Message = Begin | Commit | Origin | Relation | TypeInfo | Insert | Update | Delete | Truncate | None


def pg_timestamp(micros: int) -> datetime:
    return PG_EPOCH + timedelta(microseconds=micros)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, size: int) -> bytes:
        if self.pos + size > len(self.data):
            raise DecodeError(f"message truncated at byte {self.pos} (needed {size} more)")
        chunk = self.data[self.pos:self.pos + size]
        self.pos += size
        return chunk

    def int8(self) -> int:
        return int(self.take(1)[0])

    def int16(self) -> int:
        return int(struct.unpack("!h", self.take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack("!i", self.take(4))[0])

    def uint32(self) -> int:
        return int(struct.unpack("!I", self.take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack("!q", self.take(8))[0])

    def uint64(self) -> int:
        return int(struct.unpack("!Q", self.take(8))[0])

    def string(self) -> str:
        end = self.data.find(b"\0", self.pos)
        if end < 0:
            raise DecodeError(f"unterminated string at byte {self.pos}")
        text = self.data[self.pos:end].decode("utf-8")
        self.pos = end + 1
        return text

    def tuple_data(self) -> tuple[TupleValue, ...]:
        values: list[TupleValue] = []
        for _ in range(self.int16()):
            kind = self.take(1)
            if kind == b"n":
                values.append(None)
            elif kind == b"u":
                values.append(UNCHANGED_TOAST)
            elif kind == b"t":
                values.append(self.take(self.int32()).decode("utf-8"))
            elif kind == b"b":
                raise DecodeError("binary tuple values are not requested and not supported")
            else:
                raise DecodeError(f"unknown tuple value kind {kind!r}")
        return tuple(values)


def decode(data: bytes) -> Message:
    """One pgoutput message; None for kinds this connector ignores (logical decoding messages)."""
    if not data:
        raise DecodeError("empty message")
    reader = _Reader(data)
    kind = reader.take(1)
    decoder = _DECODERS.get(kind)
    if decoder is None:
        if kind == b"M":
            return None
        raise DecodeError(f"unknown pgoutput message kind {kind!r}")
    return decoder(reader)


def _begin(r: _Reader) -> Begin:
    return Begin(r.uint64(), r.int64(), r.uint32())


def _commit(r: _Reader) -> Commit:
    return Commit(r.int8(), r.uint64(), r.uint64(), r.int64())


def _origin(r: _Reader) -> Origin:
    return Origin(r.uint64(), r.string())


def _relation(r: _Reader) -> Relation:
    oid, namespace, name, identity = r.uint32(), r.string(), r.string(), chr(r.int8())
    columns = []
    for _ in range(r.int16()):
        flags = r.int8()
        columns.append(Column(r.string(), r.uint32(), r.int32(), bool(flags & 1)))
    return Relation(oid, namespace or "pg_catalog", name, identity, tuple(columns))


def _type(r: _Reader) -> TypeInfo:
    return TypeInfo(r.uint32(), r.string(), r.string())


def _insert(r: _Reader) -> Insert:
    oid = r.uint32()
    if r.take(1) != b"N":
        raise DecodeError("insert without a new tuple")
    return Insert(oid, r.tuple_data())


def _update(r: _Reader) -> Update:
    oid = r.uint32()
    marker = r.take(1)
    old = None
    key_only = False
    if marker in (b"K", b"O"):
        key_only = marker == b"K"
        old = r.tuple_data()
        marker = r.take(1)
    if marker != b"N":
        raise DecodeError("update without a new tuple")
    return Update(oid, old, r.tuple_data(), key_only)


def _delete(r: _Reader) -> Delete:
    oid = r.uint32()
    marker = r.take(1)
    if marker not in (b"K", b"O"):
        raise DecodeError("delete without an old tuple or key")
    return Delete(oid, r.tuple_data(), marker == b"K")


def _truncate(r: _Reader) -> Truncate:
    count = r.int32()
    options = r.int8()
    return Truncate(options, tuple(r.uint32() for _ in range(count)))


_DECODERS: dict[bytes, Callable[[_Reader], Message]] = {
    b"B": _begin, b"C": _commit, b"O": _origin, b"R": _relation, b"Y": _type, b"I": _insert,
    b"U": _update, b"D": _delete, b"T": _truncate}
