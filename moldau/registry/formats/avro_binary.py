"""A checking walk over Avro binary data that builds nothing: used for schemas where decoding could be made to
run for ever by a few bytes.

An array block announces its item count up front. When the items may take no bytes at all (`null`, an empty
record, a zero-size fixed), a seven-byte payload can announce 2**40 of them, and a decoder that materializes them
(as fastavro does) loops and fills memory. This walk skips such items without counting them one by one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from moldau.registry.formats.base import InvalidPayload

FIXED_WIDTH = {"null": 0, "float": 4, "double": 8}


def zero_width(schema: Any, named: Mapping[str, Any], seen: frozenset[str] = frozenset()) -> bool:
    """Whether values of `schema` (in full-name form) always encode as no bytes at all."""
    if isinstance(schema, str) and schema in named:
        if schema in seen:
            return False
        return zero_width(named[schema], named, seen | {schema})
    if isinstance(schema, str):
        return schema == "null"
    if isinstance(schema, list):
        return False  # a union writes its branch index
    kind = schema.get("type")
    if kind in ("record", "error"):
        return all(zero_width(field["type"], named, seen) for field in schema["fields"])
    if kind == "fixed":
        return bool(schema["size"] == 0)
    if isinstance(kind, str) and kind not in ("array", "map", "enum"):
        return zero_width(kind, named, seen)
    return False


def has_zero_width_items(schema: Any, named: Mapping[str, Any], seen: frozenset[str] = frozenset()) -> bool:
    """Whether some array in `schema` has items that may take no bytes."""
    if isinstance(schema, str):
        if schema in named and schema not in seen:
            return has_zero_width_items(named[schema], named, seen | {schema})
        return False
    if isinstance(schema, list):
        return any(has_zero_width_items(branch, named, seen) for branch in schema)
    kind = schema.get("type")
    if kind == "array":
        return zero_width(schema["items"], named) or has_zero_width_items(schema["items"], named, seen)
    if kind == "map":
        return has_zero_width_items(schema["values"], named, seen)
    if kind in ("record", "error"):
        return any(has_zero_width_items(field["type"], named, seen) for field in schema["fields"])
    return False


class Walk:
    """Checks that `data` holds exactly one value of a schema (in full-name form)."""

    def __init__(self, data: bytes, named: Mapping[str, Any]) -> None:
        self.data = data
        self.pos = 0
        self.named = named

    def take(self, count: int) -> bytes:
        if count < 0 or self.pos + count > len(self.data):
            raise InvalidPayload(f"Avro data ends early at byte {self.pos} (needs {count} more)")
        chunk = self.data[self.pos:self.pos + count]
        self.pos += count
        return chunk

    def long(self) -> int:
        result = shift = 0
        while True:
            byte = self.take(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return (result >> 1) ^ -(result & 1)
            shift += 7
            if shift > 63:
                raise InvalidPayload(f"Avro varint too long at byte {self.pos}")

    def value(self, schema: Any) -> None:
        if isinstance(schema, str) and schema in self.named:
            schema = self.named[schema]
        if isinstance(schema, list):
            index = self.long()
            if not 0 <= index < len(schema):
                raise InvalidPayload(f"Avro union branch {index} out of range at byte {self.pos}")
            self.value(schema[index])
            return
        kind = schema if isinstance(schema, str) else schema.get("type")
        if not isinstance(kind, str):
            self.value(kind)
        elif kind in FIXED_WIDTH:
            self.take(FIXED_WIDTH[kind])
        elif kind == "boolean":
            self.take(1)  # any byte, as Avro's Java decoder and fastavro read it
        elif kind in ("int", "long"):
            self.long()
        elif kind in ("bytes", "string"):
            self.text(kind == "string")
        else:
            self.complex(schema, kind)

    def text(self, is_string: bool) -> None:
        raw = self.take(self.long())
        if is_string:
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InvalidPayload(f"Avro string is not UTF-8: {exc}") from exc

    def complex(self, schema: dict[str, Any], kind: str) -> None:
        if kind == "fixed":
            self.take(schema["size"])
        elif kind == "enum":
            index = self.long()
            if not 0 <= index < len(schema["symbols"]):
                raise InvalidPayload(f"Avro enum index {index} out of range at byte {self.pos}")
        elif kind in ("record", "error"):
            for field in schema["fields"]:
                self.value(field["type"])
        elif kind in ("array", "map"):
            self.blocks(schema["items"] if kind == "array" else schema["values"], kind == "map")
        else:
            self.value(kind)

    def blocks(self, items: Any, is_map: bool) -> None:
        skip_items = not is_map and zero_width(items, self.named)
        while count := self.long():
            if count < 0:
                count = -count
                self.long()  # the block's size in bytes, which the walk does not need
            if skip_items:
                continue  # nothing to read, however many
            for _ in range(count):
                if is_map:
                    self.text(True)
                self.value(items)


def check_binary(data: bytes, schema: Any, named: Mapping[str, Any]) -> None:
    walk = Walk(data, named)
    try:
        walk.value(schema)
    except RecursionError as exc:
        raise InvalidPayload("Avro data nested too deeply") from exc
    if walk.pos != len(data):
        raise InvalidPayload(f"{len(data) - walk.pos} bytes left over after the Avro datum")
