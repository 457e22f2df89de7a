"""The registry's state, rebuilt by replaying the `_schemas` topic: a pure state machine over its records.

`RegistryState.apply` takes one record (key and value bytes, and its offset) and updates subjects, their
versions (soft-deleted ones included, flagged), the schema ids, and the global and per-subject compatibility
levels and modes. Everything the REST API reads comes from here; nothing here does I/O or reads a clock, so
every broker that replays the same records holds the same state.

Ids: a schema (its text, type and references) has one id however many subjects register it, as in Confluent's
registry; an id stays while any version (soft-deleted ones too) holds it, and ids are never handed out twice
while the records that used them remain in the topic.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from moldau.registry.records import (
    CLEAR_SUBJECT,
    CONFIG,
    DELETE_SUBJECT,
    MODE,
    SCHEMA,
    BadRecord,
    RecordKey,
    Reference,
    SchemaValue,
    decode_key,
    decode_value,
)

__all__ = ["DEFAULT_COMPATIBILITY", "DEFAULT_MODE", "MODES", "RegistryState", "SchemaContent"]

log = logging.getLogger(__name__)

DEFAULT_COMPATIBILITY = "BACKWARD"
DEFAULT_MODE = "READWRITE"
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")


@dataclass(frozen=True, slots=True)
class SchemaContent:
    """What an id names: the schema's text, its type and its references."""

    schema: str
    schema_type: str
    references: tuple[Reference, ...]

    @classmethod
    def of(cls, value: SchemaValue) -> SchemaContent:
        return cls(value.schema, value.schema_type, value.references)


class RegistryState:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget everything (the topic was deleted and made again: its records are replayed anew)."""
        self.end_offset = 0  # the offset after the last record applied
        self.max_id = 0
        self._versions: dict[str, dict[int, SchemaValue]] = {}
        self._id_holders: dict[int, set[tuple[str, int]]] = {}
        self._ids_by_content: dict[SchemaContent, int] = {}
        self._content_by_id: dict[int, SchemaContent] = {}
        self._config: dict[str | None, str] = {}
        self._mode: dict[str | None, str] = {}

    # -- replay -------------------------------------------------------------------------------------------------

    def apply(self, key: bytes, value: bytes | None, offset: int) -> None:
        """Apply the record at `offset`; records that are not the registry's are skipped with a warning."""
        self.end_offset = max(self.end_offset, offset + 1)
        try:
            record_key = decode_key(key)
            decoded = decode_value(record_key, value)
        except BadRecord as exc:
            log.warning("skipping record %d of _schemas: %s", offset, exc)
            return
        self.apply_decoded(record_key, decoded)

    def apply_decoded(self, key: RecordKey, value: SchemaValue | dict[str, Any] | None) -> None:
        if key.keytype == SCHEMA:
            assert key.subject is not None and key.version is not None
            self._apply_schema(key.subject, key.version, value if isinstance(value, SchemaValue) else None)
        elif key.keytype == CONFIG:
            self._apply_setting(self._config, key.subject, value, "compatibilityLevel")
        elif key.keytype == MODE:
            self._apply_setting(self._mode, key.subject, value, "mode")
        elif key.keytype == DELETE_SUBJECT and key.subject is not None and isinstance(value, dict):
            up_to = value.get("version")
            for version, held in self._versions.get(key.subject, {}).items():
                if not held.deleted and (not isinstance(up_to, int) or version <= up_to):
                    self._apply_schema(key.subject, version, _with_deleted(held))
        elif key.keytype == CLEAR_SUBJECT and key.subject is not None:
            for version, held in list(self._versions.get(key.subject, {}).items()):
                if held.deleted:
                    self._apply_schema(key.subject, version, None)

    def _apply_schema(self, subject: str, version: int, value: SchemaValue | None) -> None:
        versions = self._versions.setdefault(subject, {})
        old = versions.pop(version, None)
        if old is not None:
            self._release_id(old.id, subject, version)
        if value is not None:
            versions[version] = value
            content = SchemaContent.of(value)
            self._id_holders.setdefault(value.id, set()).add((subject, version))
            self._content_by_id.setdefault(value.id, content)
            self._ids_by_content.setdefault(content, value.id)
            self.max_id = max(self.max_id, value.id)
        if not versions:
            del self._versions[subject]

    def _release_id(self, schema_id: int, subject: str, version: int) -> None:
        holders = self._id_holders.get(schema_id)
        if holders is None:
            return
        holders.discard((subject, version))
        if not holders:
            del self._id_holders[schema_id]
            content = self._content_by_id.pop(schema_id, None)
            if content is not None and self._ids_by_content.get(content) == schema_id:
                del self._ids_by_content[content]

    @staticmethod
    def _apply_setting(table: dict[str | None, str], subject: str | None, value: object, field: str) -> None:
        setting = value.get(field) if isinstance(value, dict) else None
        if isinstance(setting, str):
            table[subject] = setting
        else:
            table.pop(subject, None)

    # -- subjects and versions ----------------------------------------------------------------------------------

    def subjects(self, deleted: bool = False, prefix: str = "") -> list[str]:
        """Subjects with a live version (or any version, with `deleted`), sorted."""
        return sorted(s for s, versions in self._versions.items()
                      if s.startswith(prefix) and (deleted or any(not v.deleted for v in versions.values())))

    def has_subject(self, subject: str, deleted: bool = False) -> bool:
        versions = self._versions.get(subject, {})
        return any(deleted or not v.deleted for v in versions.values())

    def versions(self, subject: str, deleted: bool = False) -> list[SchemaValue]:
        """The subject's versions, oldest first; soft-deleted ones only with `deleted`."""
        held = self._versions.get(subject, {})
        return [held[v] for v in sorted(held) if deleted or not held[v].deleted]

    def version(self, subject: str, version: int) -> SchemaValue | None:
        """The version as stored, soft-deleted or not."""
        return self._versions.get(subject, {}).get(version)

    def latest(self, subject: str, deleted: bool = False) -> SchemaValue | None:
        found = self.versions(subject, deleted)
        return found[-1] if found else None

    def next_version(self, subject: str) -> int:
        """Versions keep counting past soft-deleted ones, as Confluent's registry does."""
        held = self._versions.get(subject, {})
        return max(held, default=0) + 1

    def all_versions(self) -> Iterator[SchemaValue]:
        for subject in sorted(self._versions):
            yield from self.versions(subject, deleted=True)

    # -- ids ------------------------------------------------------------------------------------------------------

    def content(self, schema_id: int) -> SchemaContent | None:
        return self._content_by_id.get(schema_id)

    def id_for(self, content: SchemaContent) -> int | None:
        return self._ids_by_content.get(content)

    def holders(self, schema_id: int, deleted: bool = False) -> list[tuple[str, int]]:
        """The (subject, version) pairs registered with the id, sorted; soft-deleted ones only with `deleted`."""
        pairs = self._id_holders.get(schema_id, set())
        return sorted(p for p in pairs if deleted or not self._versions[p[0]][p[1]].deleted)

    def ids(self) -> list[int]:
        return sorted(self._content_by_id)

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of live versions whose references name this subject's version."""
        found = {v.id for v in self.all_versions() if not v.deleted
                 and any(r.subject == subject and r.version == version for r in v.references)}
        return sorted(found)

    # -- configuration --------------------------------------------------------------------------------------------

    def compatibility(self, subject: str | None) -> str | None:
        """The level set for the subject (or globally with None); None when none is set."""
        return self._config.get(subject)

    def effective_compatibility(self, subject: str | None) -> str:
        return self._config.get(subject) or self._config.get(None) or DEFAULT_COMPATIBILITY

    def mode(self, subject: str | None) -> str | None:
        return self._mode.get(subject)

    def effective_mode(self, subject: str | None) -> str:
        return self._mode.get(subject) or self._mode.get(None) or DEFAULT_MODE


def _with_deleted(value: SchemaValue) -> SchemaValue:
    return SchemaValue(value.subject, value.version, value.id, value.schema, value.schema_type, value.references,
                       True, value.metadata, value.rule_set)
