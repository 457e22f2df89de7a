"""Parsed schemas for the registry and the broker: reference resolution, a cache of parsed schemas, and lookups.

`SchemaTools` is what the registry needs of the schema formats (parse a text with its references, list the
types, judge compatibility); `FormatTools` is the real one over `moldau.registry.formats` and
`moldau.registry.compatibility`. `ParsedSchemas` resolves a schema's references (transitively) from the state and
caches parsed schemas by id, so a broker validating records asks `schema_by_id` and `subject_has_id` per record
without parsing again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Protocol

from moldau.registry.compatibility import CompatibilityLevel, compatibility_errors
from moldau.registry.errors import RegistryError
from moldau.registry.formats import FORMATS, parse_schema
from moldau.registry.formats.base import InvalidSchema, ParsedSchema
from moldau.registry.records import Reference
from moldau.registry.serialized import proto_text
from moldau.registry.state import RegistryState, SchemaContent

__all__ = ["FormatTools", "ParsedSchemas", "SchemaTools"]

_CACHE_ENTRIES = 10_000
# Texts clients send (register, look up, check) parsed lately: serializers look their schema up once per client
# start, and a Protobuf parse runs protoc (tenths of a second, on the broker's event loop).
_TEXT_CACHE_ENTRIES = 1_000


class SchemaTools(Protocol):
    def types(self) -> list[str]:
        """The schema types this registry accepts, as Confluent names them."""
        ...

    def parse(self, schema_type: str, text: str, references: Mapping[str, str]) -> ParsedSchema:
        """Raises InvalidSchema (also for an unknown type)."""
        ...

    def compatibility_errors(self, level: str, new: ParsedSchema, previous: Sequence[ParsedSchema]) -> list[str]:
        """Why `new` breaks `level` against `previous` (oldest first); empty when compatible."""
        ...


class FormatTools:
    """SchemaTools over the formats package (Avro, JSON Schema, Protobuf) and its compatibility rules."""

    def types(self) -> list[str]:
        return list(FORMATS)

    def parse(self, schema_type: str, text: str, references: Mapping[str, str]) -> ParsedSchema:
        return parse_schema(schema_type, text, references)

    def compatibility_errors(self, level: str, new: ParsedSchema, previous: Sequence[ParsedSchema]) -> list[str]:
        return compatibility_errors(CompatibilityLevel(level), new, list(previous))


class ParsedSchemas:
    """Parsing with references resolved from the registry's state, and parsed schemas cached by id."""

    def __init__(self, state: RegistryState, tools: SchemaTools) -> None:
        self.state = state
        self.tools = tools
        self._by_id: dict[int, tuple[SchemaContent, ParsedSchema]] = {}
        self._by_text: OrderedDict[tuple[str, str, tuple[tuple[str, str], ...]], ParsedSchema] = OrderedDict()

    def resolve(self, references: Sequence[Reference]) -> dict[str, str]:
        """The texts of every referenced schema, transitively, by reference name. Raises 42201 when a reference
        names a version that does not exist."""
        resolved: dict[str, str] = {}
        pending = list(references)
        seen: set[tuple[str, int]] = set()
        while pending:
            ref = pending.pop()
            held = self.state.latest(ref.subject) if ref.version == -1 else self.state.version(ref.subject,
                                                                                             ref.version)
            if held is None:
                raise RegistryError.invalid_schema(
                    f"reference {ref.name!r} names subject {ref.subject!r} version {ref.version}, which does not "
                    "exist")
            if (held.subject, held.version) in seen:
                continue
            seen.add((held.subject, held.version))
            resolved.setdefault(ref.name, held.schema)
            pending.extend(held.references)
        return resolved

    def parse(self, schema_type: str, text: str, references: Sequence[Reference]) -> ParsedSchema:
        """Parse a schema sent by a client (a Protobuf one may come as a serialized descriptor). Raises
        RegistryError 42201."""
        texts = self.resolve(references)
        key = (schema_type, text, tuple(sorted(texts.items())))
        cached = self._by_text.get(key)
        if cached is not None:
            self._by_text.move_to_end(key)
            return cached
        if schema_type == "PROTOBUF":
            text = proto_text(text) or text
        try:
            parsed = self.tools.parse(schema_type, text, texts)
        except InvalidSchema as exc:
            raise RegistryError.invalid_schema(str(exc)) from exc
        self._by_text[key] = parsed
        if len(self._by_text) > _TEXT_CACHE_ENTRIES:
            self._by_text.popitem(last=False)
        return parsed

    def parse_content(self, content: SchemaContent) -> ParsedSchema:
        return self.parse(content.schema_type, content.schema, content.references)

    def schema_by_id(self, schema_id: int) -> ParsedSchema | None:
        """The parsed schema registered with the id, or None (unknown id, or it no longer parses)."""
        content = self.state.content(schema_id)
        if content is None:
            return None
        cached = self._by_id.get(schema_id)
        if cached is not None and cached[0] == content:
            return cached[1]
        try:
            parsed = self.parse_content(content)
        except RegistryError:
            return None
        if len(self._by_id) >= _CACHE_ENTRIES:
            self._by_id.pop(next(iter(self._by_id)))
        self._by_id[schema_id] = (content, parsed)
        return parsed

    def subject_has_id(self, subject: str, schema_id: int) -> bool:
        """Whether a live (not soft-deleted) version of the subject is registered with the id."""
        return any(s == subject for s, _ in self.state.holders(schema_id))
