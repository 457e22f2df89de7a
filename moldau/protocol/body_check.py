"""A bounds check of request bodies, generated from kio's schemas, run before kio decodes them.

kio's readers are native code that trust declared sizes: a compact array or string whose length says
"4 billion" makes them reserve memory for that many elements before reading one, and a failed allocation
aborts the process (SIGABRT, which Python cannot catch). A 25-byte frame could stop the broker.

So every body is walked here first, by the same schema kio decodes it with, and refused (`BodyCheckError`)
when:
- a string, bytes or array length runs past the end of the frame; for arrays, the declared count times the
  smallest wire size an element can have must fit in the bytes left, so a count cannot promise more
  elements than the frame could hold;
- a string, array or struct is null where the schema does not allow null (Kafka's generated readers refuse
  these too; letting them through hands handlers a None they never expect);
- a varint is longer than five bytes, or a tagged field's size runs past the frame.

Unknown tagged fields are skipped by their size, as the protocol requires, so a check never refuses a valid
newer client. Trailing bytes after the body are ignored, as kio and Kafka do.

The walk is compiled once per entity type into a small Python function (source generated from the schema,
fixed-width runs folded into one addition), because it runs on every request, Fetch included: a Fetch
request for 100 partitions is checked in well under the time kio takes to decode it.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import Field, fields
from functools import cache
from types import NoneType, UnionType
from typing import Any, get_args, get_origin

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

__all__ = ["BodyCheckError", "body_checker", "check_body"]

# Wire sizes of the fixed-width kafka types.
FIXED_SIZES: dict[str, int] = {
    "int8": 1, "uint8": 1, "bool": 1,
    "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uuid": 16,
}
_VARIABLE_TYPES = ("string", "bytes", "records")
_MAX_UVARINT_BYTES = 5

# (buffer, position, end) -> position after the value
Checker = Callable[[Any, int, int], int]


class BodyCheckError(ValueError):
    """The body does not follow its schema's sizes or nullability; the message says where."""


def check_body(entity_type: Any, buf: bytes | memoryview, pos: int) -> int:
    """Check the body of `entity_type` at `pos`; return where it ends. Raises BodyCheckError."""
    return body_checker(entity_type)(buf, pos, len(buf))


@cache
def body_checker(entity_type: Any) -> Checker:
    """The compiled check for one entity type (cached: compiled once per type for the process)."""
    return _Compiler().compile(entity_type)


# -- runtime helpers the generated code calls -------------------------------------------------------------------

_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from
_I8 = struct.Struct(">b").unpack_from


def _uvarint(buf: Any, pos: int, end: int) -> tuple[int, int]:
    value = 0
    for shift in range(0, 7 * _MAX_UVARINT_BYTES, 7):
        if pos >= end:
            raise BodyCheckError(f"truncated varint at byte {pos}")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
    raise BodyCheckError(f"varint longer than {_MAX_UVARINT_BYTES} bytes at byte {pos}")


def _fixed(buf: Any, pos: int, end: int, unpack: Any, size: int, where: str) -> tuple[int, int]:
    if pos + size > end:
        raise BodyCheckError(f"{where}: truncated at byte {pos}")
    return int(unpack(buf, pos)[0]), pos + size


def _past_end(where: str, declared: int, pos: int, end: int) -> BodyCheckError:
    return BodyCheckError(f"{where}: length {declared} at byte {pos} runs past the end of the frame "
                          f"({end - pos} bytes left)")


def _null(where: str) -> BodyCheckError:
    return BodyCheckError(f"{where}: null where the schema requires a value")


def _skip_tags(buf: Any, pos: int, end: int, known: dict[int, Checker], where: str) -> int:
    """A tagged-field section: known tags are checked within their declared size, unknown ones skipped."""
    count, pos = _uvarint(buf, pos, end)
    # Each tagged field takes at least two bytes (tag and size).
    if count * 2 > end - pos:
        raise _past_end(f"{where} tagged fields", count, pos, end)
    for _ in range(count):
        tag, pos = _uvarint(buf, pos, end)
        size, pos = _uvarint(buf, pos, end)
        value_end = pos + size
        if value_end > end:
            raise _past_end(f"{where} tag {tag}", size, pos, end)
        check = known.get(tag)
        if check is not None and check(buf, pos, value_end) != value_end:
            raise BodyCheckError(f"{where} tag {tag}: value does not fill its declared {size} bytes")
        pos = value_end
    return pos


_RUNTIME: dict[str, Any] = {
    "_uvarint": _uvarint, "_fixed": _fixed, "_past_end": _past_end, "_null": _null, "_skip_tags": _skip_tags,
    "_I8": _I8, "_I16": _I16, "_I32": _I32, "BodyCheckError": BodyCheckError,
}


# -- the compiler --------------------------------------------------------------------------------------------------

def nullable_array(field: Field[Any]) -> bool:
    # kio writes a nullable array as `tuple[X, ...] | None`.
    return get_origin(field.type) is UnionType and NoneType in get_args(field.type)


class _Compiler:
    """Generates one function per entity type; nested types get their own (shared through body_checker)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names: dict[str, Any] = dict(_RUNTIME)
        self.pending_fixed = 0
        self.counter = 0

    def compile(self, entity_type: Any) -> Checker:
        flexible = bool(entity_type.__flexible__)
        name = entity_type.__name__
        self.lines = ["def check(buf, pos, end):"]
        tagged: dict[int, Checker] = {}
        for field in fields(entity_type):
            tag = get_field_tag(field)
            if tag is not None:
                tagged[int(tag)] = _tagged_value_checker(field)
                continue
            self._field(field, flexible, f"{name}.{field.name}")
        self._flush_fixed(name)
        if flexible:
            self.names["_known_tags"] = tagged
            # Fast path: almost every struct has an empty tagged section, a single zero byte.
            self._emit("if pos < end and buf[pos] == 0: pos += 1")
            self._emit(f"else: pos = _skip_tags(buf, pos, end, _known_tags, {name!r})")
        self.lines.append("    return pos")
        return self._build()

    def compile_field(self, field: Field[Any]) -> Checker:
        """A check of one tagged field's value, which is always in the flexible encoding."""
        self.lines = ["def check(buf, pos, end):"]
        self._field(field, True, field.name, is_tag=True)
        self._flush_fixed(field.name)
        self.lines.append("    return pos")
        return self._build()

    def _build(self) -> Checker:
        namespace = dict(self.names)
        exec("\n".join(self.lines), namespace)  # source generated from kio's schema above
        check: Checker = namespace["check"]
        return check

    def _emit(self, line: str, indent: int = 1) -> None:
        self.lines.append("    " * indent + line)

    def _uvarint(self, var: str, indent: int = 1) -> None:
        # Lengths below 128 are one byte: read them inline, leave the rest to _uvarint.
        self._emit(f"if pos < end and buf[pos] < 0x80: {var} = buf[pos]; pos += 1", indent)
        self._emit(f"else: {var}, pos = _uvarint(buf, pos, end)", indent)

    def _flush_fixed(self, where: str) -> None:
        if self.pending_fixed:
            self._emit(f"pos += {self.pending_fixed}")
            self._emit(f"if pos > end: raise BodyCheckError({where + ': truncated'!r})")
            self.pending_fixed = 0

    def _bind(self, value: Any) -> str:
        self.counter += 1
        name = f"_n{self.counter}"
        self.names[name] = value
        return name

    def _field(self, field: Field[Any], flexible: bool, where: str, is_tag: bool = False) -> None:
        match classify_field(field):
            case PrimitiveField():
                kafka_type = get_schema_field_type(field)
                size = FIXED_SIZES.get(kafka_type)
                if size is not None:
                    self.pending_fixed += size
                    return
                self._flush_fixed(where)
                self._variable(kafka_type, flexible, is_optional(field), where, indent=1)
            case PrimitiveTupleField():
                self._flush_fixed(where)
                kafka_type = get_schema_field_type(field)
                element_size = FIXED_SIZES.get(kafka_type)
                if element_size is not None:
                    self._array(flexible, nullable_array(field), element_size, None, where)
                else:
                    self._array(flexible, nullable_array(field), _min_variable_size(flexible), kafka_type, where)
            case EntityField(nested):
                self._flush_fixed(where)
                check = self._bind(body_checker(nested))
                if is_optional(field) and not is_tag:
                    # A nullable struct carries an int8 marker (KIP-893); a negative marker means null.
                    self._emit(f"marker, pos = _fixed(buf, pos, end, _I8, 1, {where!r})")
                    self._emit("if marker >= 0:")
                    self._emit(f"pos = {check}(buf, pos, end)", 2)
                else:
                    self._emit(f"pos = {check}(buf, pos, end)")
            case EntityTupleField(nested):
                self._flush_fixed(where)
                self._array(flexible, nullable_array(field), min_wire_size(nested), nested, where)

    def _variable(self, kafka_type: str, flexible: bool, nullable: bool, where: str, indent: int) -> None:
        """A string, bytes or records value: length prefix, null check, bounds check, skip."""
        if kafka_type not in _VARIABLE_TYPES:
            raise TypeError(f"{where}: kafka type {kafka_type!r} has no wire rule")
        if flexible:
            self._uvarint("n", indent)
            self._emit("n -= 1", indent)
        else:
            unpack, size = ("_I16", 2) if kafka_type == "string" else ("_I32", 4)
            self._emit(f"n, pos = _fixed(buf, pos, end, {unpack}, {size}, {where!r})", indent)
            self._emit(f"if n < -1: raise BodyCheckError({where + ': negative length'!r})", indent)
        self._emit("if n < 0:" if nullable else f"if n < 0: raise _null({where!r})", indent)
        if nullable:
            self._emit("pass", indent + 1)
        self._emit(f"elif n > end - pos: raise _past_end({where!r}, n, pos, end)", indent)
        self._emit("else: pos += n", indent)

    def _array(self, flexible: bool, nullable: bool, element_size: int, element: Any, where: str) -> None:
        """An array: count prefix, null check, count * smallest element must fit, then each element."""
        if flexible:
            self._uvarint("count")
            self._emit("count -= 1")
        else:
            self._emit(f"count, pos = _fixed(buf, pos, end, _I32, 4, {where!r})")
            self._emit(f"if count < -1: raise BodyCheckError({where + ': negative array length'!r})")
        self._emit("if count < 0:" if nullable else f"if count < 0: raise _null({where!r})")
        if nullable:
            self._emit("pass", 2)
        self._emit(f"elif count * {max(element_size, 1)} > end - pos: raise _past_end({where!r}, count, pos, end)")
        if element is None:  # fixed-width elements: skip them all at once
            self._emit(f"else: pos += count * {element_size}")
        elif isinstance(element, str):  # strings or bytes
            self._emit("else:")
            self._emit("for _ in range(count):", 2)
            self._variable(element, flexible, False, where + "[]", indent=3)
        else:
            check = self._bind(body_checker(element))
            self._emit("else:")
            self._emit("for _ in range(count):", 2)
            self._emit(f"pos = {check}(buf, pos, end)", 3)


def _min_variable_size(flexible: bool) -> int:
    # A compact length is at least one byte; legacy strings take two and bytes four, arrays four.
    return 1 if flexible else 2


@cache
def min_wire_size(entity_type: Any) -> int:
    """The fewest bytes one encoded instance can take (used to bound array counts)."""
    flexible = bool(entity_type.__flexible__)
    total = 1 if flexible else 0  # the tagged-field count
    for field in fields(entity_type):
        if get_field_tag(field) is not None:
            continue
        match classify_field(field):
            case PrimitiveField():
                total += FIXED_SIZES.get(get_schema_field_type(field), _min_variable_size(flexible))
            case PrimitiveTupleField() | EntityTupleField():
                total += 1 if flexible else 4
            case EntityField(nested):
                total += 1 if is_optional(field) else min_wire_size(nested)
    return total


def _tagged_value_checker(field: Field[Any]) -> Checker:
    """A check for a known tagged field's value (flexible encoding; no nullable-struct marker)."""
    return _Compiler().compile_field(field)
