"""Removal of unknown tagged fields from flexible-version Kafka messages.

KIP-482 lets a sender add tagged fields that older receivers do not know; the protocol requires receivers
to skip them. kio's readers instead raise ``KeyError('Unknown tagged field tag: N')``. This module walks an
encoded message by the schema of a kio entity, drops every tagged field the schema does not declare and
returns bytes kio can read.

It is a fallback for the rare message kio rejects, so it favours plain code over speed. The walk mirrors
kio's own writer (``kio.serial._serialize``): the same field classification, the same legacy encoding of
``RequestHeader.client_id`` and the same rule that tagged values never carry a nullable-struct marker.
"""

from __future__ import annotations

import struct
from dataclasses import Field, fields
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.static.protocol import Entity

from moldau.protocol.body_check import FIXED_SIZES

__all__ = ["MalformedMessageError", "encode_uvarint", "strip_unknown_tagged_fields"]


# Unsigned varints in the protocol encode 32-bit values, so they never need more than five bytes.
_MAX_UVARINT_BYTES = 5


class MalformedMessageError(ValueError):
    """The buffer does not hold a well-formed message of the expected entity type."""


class _Cursor:
    """A read position in a byte buffer; every read checks bounds so bad input cannot overrun."""

    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf = buf
        self.pos = pos

    def remaining(self) -> int:
        return len(self.buf) - self.pos

    def take(self, n: int) -> bytes:
        """Return the next ``n`` bytes and advance; raise if fewer are left."""
        if n < 0 or n > self.remaining():
            raise MalformedMessageError(
                f"truncated at byte {self.pos}: needs {n} bytes, {self.remaining()} left"
            )
        chunk = self.buf[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def since(self, start: int) -> bytes:
        """The bytes read since position ``start``."""
        return self.buf[start : self.pos]

    def read_uvarint(self) -> int:
        """Read an unsigned varint (7 bits per byte, least significant group first)."""
        value = 0
        for index in range(_MAX_UVARINT_BYTES):
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << (7 * index)
            if not byte & 0x80:
                return value
        raise MalformedMessageError(
            f"unsigned varint longer than {_MAX_UVARINT_BYTES} bytes at byte {self.pos}"
        )

    def read_signed(self, fmt: str) -> int:
        """Read a big-endian signed integer in ``struct`` format ``fmt`` (``>b``, ``>h`` or ``>i``)."""
        value: int = struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]
        return value


def encode_uvarint(value: int) -> bytes:
    """Encode a non-negative int as an unsigned varint."""
    if value < 0:
        raise ValueError(f"unsigned varint cannot hold {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def strip_unknown_tagged_fields(
    entity_type: type[Entity], buf: bytes | bytearray | memoryview, offset: int = 0
) -> bytes:
    """Re-encode the entity at ``offset`` of ``buf`` without the tagged fields ``entity_type`` does not know.

    The result holds the rewritten entity followed by the bytes after it in ``buf``; bytes before ``offset``
    are not included, so ``entity_reader(entity_type)(result, 0)`` decodes the entity. The entity is walked
    recursively: unknown tags inside nested structs, arrays of structs and known tagged struct values are
    removed too, while known tags are kept in their original order. A non-flexible entity has no tagged
    fields and comes back unchanged.

    Raises ``MalformedMessageError`` (a ``ValueError``) if the bytes do not follow the schema, for
    example when the buffer ends inside a field or a tagged value is longer than its declared size.
    """
    data = bytes(buf)
    if not 0 <= offset <= len(data):
        raise MalformedMessageError(f"offset {offset} is outside the buffer of {len(data)} bytes")
    if not entity_type.__flexible__:
        return data[offset:]
    cursor = _Cursor(data, offset)
    out = bytearray()
    _copy_entity(entity_type, cursor, out)
    out += data[cursor.pos :]
    return bytes(out)


def _copy_entity(entity_type: type[Entity], cursor: _Cursor, out: bytearray) -> None:
    """Copy one struct: its fields in declaration order, then (flexible only) its tagged section."""
    tagged: dict[int, Field[Any]] = {}
    for field in fields(entity_type):
        tag = get_field_tag(field)
        if tag is not None:
            tagged[int(tag)] = field
            continue
        try:
            _copy_field(entity_type, field, cursor, out, is_tag=False)
        except MalformedMessageError as error:
            raise MalformedMessageError(f"{entity_type.__name__}.{field.name}: {error}") from None
    if entity_type.__flexible__:
        _copy_tagged_section(entity_type, tagged, cursor, out)


def _copy_field(
    entity_type: type[Entity], field: Field[Any], cursor: _Cursor, out: bytearray, *, is_tag: bool
) -> None:
    """Copy the value of one field of ``entity_type``."""
    flexible = entity_type.__flexible__
    # Kafka keeps the header's client id a legacy string even in flexible headers, so that every
    # broker can read it (see the comment in RequestHeader.json); kio matches on the class name too.
    if entity_type.__name__ == "RequestHeader" and field.name == "client_id":
        _copy_primitive("string", False, cursor, out)
        return
    match classify_field(field):
        case PrimitiveField():
            _copy_primitive(get_schema_field_type(field), flexible, cursor, out)
        case PrimitiveTupleField():
            kafka_type = get_schema_field_type(field)
            for _ in range(_copy_array_length(flexible, cursor, out)):
                _copy_primitive(kafka_type, flexible, cursor, out)
        case EntityField(nested_type):
            # Tagged values are optional through their presence, so they carry no null marker.
            if is_tag or not is_optional(field) or _copy_null_marker(cursor, out):
                _copy_entity(nested_type, cursor, out)
        case EntityTupleField(nested_type):
            for _ in range(_copy_array_length(flexible, cursor, out)):
                _copy_entity(nested_type, cursor, out)


def _copy_null_marker(cursor: _Cursor, out: bytearray) -> bool:
    """Copy a nullable struct's int8 marker (KIP-893); return whether a struct follows."""
    start = cursor.pos
    marker = cursor.read_signed(">b")
    out += cursor.since(start)
    # Kafka's generated readers treat any negative marker as null.
    return marker >= 0


def _copy_array_length(flexible: bool, cursor: _Cursor, out: bytearray) -> int:
    """Copy an array length prefix and return the element count (0 for a null array)."""
    start = cursor.pos
    if flexible:
        # Compact arrays store count + 1; zero means null.
        count = max(cursor.read_uvarint() - 1, 0)
    else:
        count = cursor.read_signed(">i")
        if count < -1:
            raise MalformedMessageError(f"invalid array length {count} at byte {start}")
        count = max(count, 0)
    # Every element takes at least one byte; this bounds the loop on corrupt lengths.
    if count > cursor.remaining():
        raise MalformedMessageError(f"array of {count} elements at byte {start} exceeds the buffer")
    out += cursor.since(start)
    return count


def _copy_primitive(kafka_type: str, flexible: bool, cursor: _Cursor, out: bytearray) -> None:
    """Copy one primitive value, fixed-width or length-prefixed."""
    start = cursor.pos
    size = FIXED_SIZES.get(kafka_type)
    if size is None:
        size = _variable_length(kafka_type, flexible, cursor)
    cursor.take(size)
    out += cursor.since(start)


def _variable_length(kafka_type: str, flexible: bool, cursor: _Cursor) -> int:
    """Read the length prefix of a string or bytes value and return the payload length (0 for null)."""
    if kafka_type not in ("string", "bytes", "records"):
        raise MalformedMessageError(f"unsupported kafka type {kafka_type!r}")
    if flexible:
        # Compact strings and bytes store length + 1; zero means null.
        return max(cursor.read_uvarint() - 1, 0)
    length = cursor.read_signed(">h" if kafka_type == "string" else ">i")
    if length < -1:
        raise MalformedMessageError(f"invalid length {length} before byte {cursor.pos}")
    return max(length, 0)


def _copy_tagged_section(
    entity_type: type[Entity], known: dict[int, Field[Any]], cursor: _Cursor, out: bytearray
) -> None:
    """Rewrite a tagged-field section, keeping only the tags in ``known``."""
    count = cursor.read_uvarint()
    # A tagged field takes at least two bytes (tag and size); this bounds the loop on corrupt counts.
    if count > cursor.remaining() // 2:
        raise MalformedMessageError(
            f"{entity_type.__name__}: {count} tagged fields at byte {cursor.pos} exceed the buffer"
        )
    kept: list[tuple[int, bytes]] = []
    for _ in range(count):
        tag = cursor.read_uvarint()
        value = cursor.take(cursor.read_uvarint())
        field = known.get(tag)
        if field is not None:
            kept.append((tag, _strip_tagged_value(entity_type, field, tag, value)))
    out += encode_uvarint(len(kept))
    for tag, value in kept:
        out += encode_uvarint(tag) + encode_uvarint(len(value)) + value


def _strip_tagged_value(entity_type: type[Entity], field: Field[Any], tag: int, value: bytes) -> bytes:
    """Strip unknown tags inside a known tagged value, which may itself be a struct."""
    cursor = _Cursor(value, 0)
    out = bytearray()
    where = f"{entity_type.__name__}.{field.name} (tag {tag})"
    try:
        _copy_field(entity_type, field, cursor, out, is_tag=True)
    except MalformedMessageError as error:
        raise MalformedMessageError(f"{where}: {error}") from None
    if cursor.remaining():
        raise MalformedMessageError(f"{where}: {cursor.remaining()} bytes left after the value")
    return bytes(out)
