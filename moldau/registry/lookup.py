"""What the broker's checks of produced records ask of the registry: parsed schemas by id, and whether a subject
holds an id.

`schema_by_id` and `subject_has_id` answer from the state this broker has replayed, with parsed schemas cached
by id, so they are cheap per record. An id registered through another broker a moment ago may not be replayed
yet: `fresh_schema_by_id` catches up with `_schemas` first when the id is unknown (once per unknown id, bounded).
"""

from __future__ import annotations

from moldau.registry.core import Store
from moldau.registry.errors import RegistryError
from moldau.registry.formats.base import ParsedSchema
from moldau.registry.parsed import ParsedSchemas

__all__ = ["SchemaLookup"]

CATCH_UP_S = 2.0


class SchemaLookup:
    def __init__(self, parsed: ParsedSchemas, store: Store) -> None:
        self._parsed = parsed
        self._store = store

    def schema_by_id(self, schema_id: int) -> ParsedSchema | None:
        """The parsed schema registered with the id; None when no version holds it (or it no longer parses)."""
        return self._parsed.schema_by_id(schema_id)

    def subject_has_id(self, subject: str, schema_id: int) -> bool:
        """Whether a live (not soft-deleted) version of the subject is registered with the id."""
        return self._parsed.subject_has_id(subject, schema_id)

    async def fresh_schema_by_id(self, schema_id: int, timeout_s: float = CATCH_UP_S) -> ParsedSchema | None:
        """`schema_by_id`, after catching up with `_schemas` when the id is not known here yet."""
        found = self._parsed.schema_by_id(schema_id)
        if found is not None or self._parsed.state.content(schema_id) is not None:
            return found
        try:
            await self._store.catch_up(timeout_s)
        except RegistryError:
            return None
        return self._parsed.schema_by_id(schema_id)
