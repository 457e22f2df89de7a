"""The records of the `_schemas` topic, in Confluent Schema Registry's layout, so the topic reads the same.

Every key is a JSON object naming its `keytype` (SCHEMA, CONFIG, MODE, DELETE_SUBJECT, CLEAR_SUBJECT, NOOP), the
subject it is about (null for the global config and mode), the version for a SCHEMA key, and `magic` (1 for
SCHEMA keys, 0 for the others). Values are JSON objects too; a null value (tombstone) removes what the key holds:
a permanently deleted schema version, a subject's config or mode reverting to the global one. The topic is
compacted, so the latest value of each key is its state.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CLEAR_SUBJECT",
    "CONFIG",
    "DELETE_SUBJECT",
    "MODE",
    "NOOP",
    "SCHEMA",
    "RecordKey",
    "Reference",
    "SchemaValue",
    "decode_key",
    "decode_value",
    "encode",
    "schema_key",
]

SCHEMA = "SCHEMA"
CONFIG = "CONFIG"
MODE = "MODE"
DELETE_SUBJECT = "DELETE_SUBJECT"
CLEAR_SUBJECT = "CLEAR_SUBJECT"
NOOP = "NOOP"
KEY_TYPES = (SCHEMA, CONFIG, MODE, DELETE_SUBJECT, CLEAR_SUBJECT, NOOP)


class BadRecord(ValueError):
    """A key or value that is not one of the registry's records (skipped on replay, with a warning)."""


@dataclass(frozen=True, slots=True)
class RecordKey:
    keytype: str
    subject: str | None = None
    version: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"keytype": self.keytype}
        if self.keytype != NOOP:
            out["subject"] = self.subject
        if self.keytype == SCHEMA:
            out["version"] = self.version
        out["magic"] = 1 if self.keytype == SCHEMA else 0
        return out


def schema_key(subject: str, version: int) -> RecordKey:
    return RecordKey(SCHEMA, subject, version)


@dataclass(frozen=True, slots=True)
class Reference:
    """A schema's reference to another subject's version, under the name the schema's text uses for it."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True, slots=True)
class SchemaValue:
    """One version of a subject. `schema_type` is "AVRO" when the record carries no `schemaType`."""

    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = ()
    deleted: bool = False
    metadata: dict[str, Any] | None = field(default=None, compare=False)
    rule_set: dict[str, Any] | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"subject": self.subject, "version": self.version, "id": self.id,
                               "schema": self.schema}
        if self.schema_type != "AVRO":
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = [r.to_json() for r in self.references]
        if self.metadata is not None:
            out["metadata"] = self.metadata
        if self.rule_set is not None:
            out["ruleSet"] = self.rule_set
        out["deleted"] = self.deleted
        return out


def encode(obj: RecordKey | SchemaValue | dict[str, Any] | None) -> bytes | None:
    """A key or value as the topic stores it: compact JSON (None stays a tombstone)."""
    if obj is None:
        return None
    data = obj if isinstance(obj, dict) else obj.to_json()
    return json.dumps(data, separators=(",", ":")).encode()


def decode_key(raw: bytes) -> RecordKey:
    obj = _json_object(raw)
    keytype = obj.get("keytype")
    if keytype not in KEY_TYPES:
        raise BadRecord(f"unknown keytype {keytype!r}")
    subject = obj.get("subject")
    if subject is not None and not isinstance(subject, str):
        raise BadRecord("subject is not a string")
    version = obj.get("version")
    if keytype == SCHEMA and (not isinstance(version, int) or not isinstance(subject, str)):
        raise BadRecord("a SCHEMA key needs a subject and an integer version")
    return RecordKey(keytype, subject, version if keytype == SCHEMA else None)


def decode_value(key: RecordKey, raw: bytes | None) -> SchemaValue | dict[str, Any] | None:
    """A SCHEMA key's value as a SchemaValue; other values as their JSON object; None for a tombstone."""
    if raw is None:
        return None
    obj = _json_object(raw)
    if key.keytype != SCHEMA:
        return obj
    try:
        refs = tuple(Reference(str(r["name"]), str(r["subject"]), int(r["version"]))
                     for r in obj.get("references") or ())
        return SchemaValue(subject=str(obj["subject"]), version=int(obj["version"]), id=int(obj["id"]),
                           schema=str(obj["schema"]), schema_type=str(obj.get("schemaType") or "AVRO"),
                           references=refs, deleted=bool(obj.get("deleted", False)),
                           metadata=obj.get("metadata"), rule_set=obj.get("ruleSet"))
    except (KeyError, TypeError, ValueError) as exc:
        raise BadRecord(f"bad SCHEMA value: {exc}") from exc


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRecord(f"not JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise BadRecord("not a JSON object")
    return obj
