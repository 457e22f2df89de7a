"""A fast accept in front of the Avro format's `check_payload`, for broker-side schema validation.

Decoding a 1 KB Avro record with fastavro builds a dict of Python objects and costs about 2 µs, as much as the
rest of appending it. Validation only needs to know that the bytes decode, so a small C walk
(`moldau._avrocheck`) checks them against the schema compiled into an array of integers, building nothing.
It is a fast *accept* only: whatever it refuses is decoded in full by `check_payload`, which decides and words the
error, so a record is never refused that the format accepts. For the converse, the walk accepts only what fastavro
decodes too: well-formed UTF-8 in strings and map keys, booleans 0 or 1, union and enum indexes in range, array
and map blocks, fixed sizes, no bytes left over. Schemas it cannot vouch for are not compiled and keep the full
decode: logical types (fastavro converts them, and a conversion can fail), and names defined by a schema reference
(the schema's text alone does not define them).
"""

from __future__ import annotations

import json
import weakref
from array import array
from collections.abc import Callable
from typing import Any

from moldau.registry.formats.base import ParsedSchema

__all__ = ["compile_schema", "payload_check", "program", "schema_ids", "unchecked"]

Section = bytes | memoryview
try:
    from moldau import _avrocheck  # type: ignore[attr-defined]

    _valid: Callable[[bytes, bytes, int], bool] | None = _avrocheck.valid
    # A whole records section in one call: the schema ids of its keys (field 0) or values (field 1), and the
    # indexes of the records whose key or value the walk does not vouch for, given programs by schema id.
    schema_ids: Callable[[Section, int], set[int]] | None = _avrocheck.schema_ids
    unchecked: Callable[[Section, int, dict[int, bytes]], list[int]] | None = _avrocheck.unchecked
except ImportError:  # built without a C compiler: every record is decoded in full
    _valid = schema_ids = unchecked = None

PRIMITIVES = {"null": 0, "boolean": 1, "int": 2, "long": 3, "float": 4, "double": 5, "bytes": 6, "string": 7}
FIXED, ENUM, ARRAY, MAP, UNION, RECORD = 8, 9, 10, 11, 12, 13

# Compiled programs by parsed schema: the registry keeps one parsed schema per id, so this is per id too.
_programs: weakref.WeakKeyDictionary[ParsedSchema, bytes | None] = weakref.WeakKeyDictionary()


class _Unsupported(Exception):
    pass


def payload_check(schema: ParsedSchema) -> Callable[[bytes, int], None]:
    """`schema.check_payload` of `data[start:]` for records without message indexes, as a function of (data,
    start), with the fast accept in front where it applies."""
    full = schema.check_payload
    program = _program(schema) if _valid is not None and schema.schema_type == "AVRO" else None
    if program is None:
        return lambda data, start: full(data[start:])
    valid = _valid
    assert valid is not None

    def check(data: bytes, start: int) -> None:
        if not valid(program, data, start):
            full(data[start:])

    return check


def program(schema: ParsedSchema) -> bytes | None:
    """The schema's compiled program for the fast walk, or None where it does not apply."""
    return _program(schema) if _valid is not None and schema.schema_type == "AVRO" else None


def _program(schema: ParsedSchema) -> bytes | None:
    try:
        return _programs[schema]
    except KeyError:
        program = _programs[schema] = compile_schema(schema.canonical())
        return program
    except TypeError:  # a schema object that cannot be weakly referenced: compiled per batch
        return compile_schema(schema.canonical())


def compile_schema(text: str) -> bytes | None:
    """The Avro schema's program for `moldau._avrocheck` (node 0 the root), or None when the fast walk cannot
    vouch for it."""
    try:
        raw = json.loads(text)
        if _has_logical_type(raw):
            return None
        compiler = _Compiler()
        compiler.node(raw, "")
        program = compiler.finish()
    except (_Unsupported, ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None
    return array("i", program).tobytes()


def _has_logical_type(node: Any) -> bool:
    if isinstance(node, dict):
        return "logicalType" in node or any(_has_logical_type(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_logical_type(v) for v in node)
    return False


class _Compiler:
    """Schema JSON to a flat list of nodes: [kind, ...]; children are offsets into the same list."""

    def __init__(self) -> None:
        self.program: list[int] = []
        self.named: dict[str, int] = {}
        self.arrays: list[int] = []  # array and map nodes, whose items' width is marked once all are compiled

    def finish(self) -> list[int]:
        """The program, each array node marked when its items take no bytes (null, empty fixed, records of such):
        the walk then reads the block counts without counting items, however many a block claims."""
        for at in self.arrays:
            if self.program[at] == ARRAY and self._zero_width(self.program[at + 1], frozenset()):
                self.program[at + 2] = 1
        return self.program

    def _zero_width(self, at: int, seen: frozenset[int]) -> bool:
        kind = self.program[at]
        if kind == PRIMITIVES["null"]:
            return True
        if kind == FIXED:
            return self.program[at + 1] == 0
        if kind == RECORD and at not in seen:
            fields = self.program[at + 2 : at + 2 + self.program[at + 1]]
            return all(self._zero_width(f, seen | {at}) for f in fields)
        return False

    def node(self, schema: Any, namespace: str) -> int:
        if isinstance(schema, str):
            return self._named_or_primitive(schema, namespace)
        if isinstance(schema, list):
            return self._union(schema, namespace)
        if not isinstance(schema, dict):
            raise _Unsupported(schema)
        kind = schema["type"]
        if kind in ("record", "error"):
            return self._record(schema, namespace)
        if kind == "enum":
            return self._define(schema, namespace, [ENUM, len(schema["symbols"])])
        if kind == "fixed":
            return self._define(schema, namespace, [FIXED, int(schema["size"])])
        if kind in ("array", "map"):
            at = self._emit([ARRAY if kind == "array" else MAP, -1, 0])
            self.program[at + 1] = self.node(schema["items" if kind == "array" else "values"], namespace)
            self.arrays.append(at)
            return at
        return self.node(kind, namespace)  # {"type": "string"}, or a type given in full under "type"

    def _named_or_primitive(self, name: str, namespace: str) -> int:
        if name in PRIMITIVES:
            return self._emit([PRIMITIVES[name]])
        # A short name means the one in the enclosing namespace; where decoders might differ on falling back to
        # the null namespace, the schema is left to the full decode.
        found = {self.named[c] for c in (f"{namespace}.{name}" if namespace else name, name) if c in self.named}
        if len(found) != 1:
            raise _Unsupported(name)  # defined by a reference, or ambiguous
        return found.pop()

    def _union(self, branches: list[Any], namespace: str) -> int:
        at = self._emit([UNION, len(branches), *([-1] * len(branches))])
        for i, branch in enumerate(branches):
            self.program[at + 2 + i] = self.node(branch, namespace)
        return at

    def _record(self, schema: dict[str, Any], namespace: str) -> int:
        fields = schema["fields"]
        at = self._define(schema, namespace, [RECORD, len(fields), *([-1] * len(fields))])
        inner = _full_name(schema, namespace).rpartition(".")[0]
        for i, field in enumerate(fields):
            self.program[at + 2 + i] = self.node(field["type"], inner)
        return at

    def _define(self, schema: dict[str, Any], namespace: str, node: list[int]) -> int:
        at = self._emit(node)
        self.named[_full_name(schema, namespace)] = at  # before the fields: a record may refer to itself
        return at

    def _emit(self, node: list[int]) -> int:
        at = len(self.program)
        self.program += node
        return at


def _full_name(schema: dict[str, Any], namespace: str) -> str:
    name = str(schema["name"])
    if "." in name:
        return name
    space = schema.get("namespace", namespace)
    return f"{space}.{name}" if space else name
