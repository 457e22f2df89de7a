"""What each registry request does, decided against the state: answers, and the records a write appends.

Reads return the REST answer. Writes return a `Plan`: the answer to give once the records are durable in
`_schemas` and applied, and the records themselves (none when the request changes nothing, as when a schema is
registered again). Everything here is pure: the store runs plans on the one broker allowed to write, and every
broker applies the records through `RegistryState.apply`, so the answer and the state always agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from moldau.registry.compatibility import CompatibilityLevel
from moldau.registry.errors import RegistryError
from moldau.registry.formats.base import ParsedSchema
from moldau.registry.parsed import ParsedSchemas
from moldau.registry.records import RecordKey, SchemaValue, schema_key
from moldau.registry.requests import LATEST, SchemaRequest
from moldau.registry.state import RegistryState, SchemaContent

__all__ = ["COMPATIBILITY_LEVELS", "Operations", "Plan", "schema_answer"]

COMPATIBILITY_LEVELS = tuple(level.value for level in CompatibilityLevel)
_READ_ONLY = ("READONLY", "READONLY_OVERRIDE")

Record = tuple[RecordKey, SchemaValue | dict[str, Any] | None]


@dataclass
class Plan:
    answer: Any
    records: list[Record] = field(default_factory=list)


def schema_answer(value: SchemaValue) -> dict[str, Any]:
    """A version as GET /subjects/{s}/versions/{v} answers it: schemaType only when not AVRO, references only
    when there are some, metadata and ruleSet only when registered with them."""
    out: dict[str, Any] = {"subject": value.subject, "version": value.version, "id": value.id}
    if value.schema_type != "AVRO":
        out["schemaType"] = value.schema_type
    if value.references:
        out["references"] = [r.to_json() for r in value.references]
    if value.metadata is not None:
        out["metadata"] = value.metadata
    if value.rule_set is not None:
        out["ruleSet"] = value.rule_set
    out["schema"] = value.schema
    return out


class Operations:
    def __init__(self, parsed: ParsedSchemas) -> None:
        self.parsed = parsed

    @property
    def state(self) -> RegistryState:
        return self.parsed.state

    # -- reads --------------------------------------------------------------------------------------------------

    def get_version(self, subject: str, version: int, deleted: bool = False) -> SchemaValue:
        """A version (`LATEST` for the newest live one). Raises 40401 / 40402."""
        if not self.state.has_subject(subject, deleted=True):
            raise RegistryError.subject_not_found(subject)
        if version == LATEST:
            found = self.state.latest(subject, deleted)
            if found is None:
                raise RegistryError.subject_not_found(subject) if not deleted else \
                    RegistryError.version_not_found("latest")
            return found
        held = self.state.version(subject, version)
        if held is None or (held.deleted and not deleted):
            raise RegistryError.version_not_found(version)
        return held

    def versions(self, subject: str, deleted: bool = False) -> list[int]:
        found = [v.version for v in self.state.versions(subject, deleted)]
        if not found:
            raise RegistryError.subject_not_found(subject)
        return found

    def lookup(self, subject: str, request: SchemaRequest, normalize: bool, deleted: bool) -> dict[str, Any]:
        """POST /subjects/{s}: the version of the subject holding this schema. Raises 40401 / 40403 / 42201."""
        if not self.state.has_subject(subject, deleted):
            raise RegistryError.subject_not_found(subject)
        parsed = self.parsed.parse(request.schema_type, request.schema, request.references)
        texts = {parsed.canonical(), request.schema}
        for held in reversed(self.state.versions(subject, deleted)):
            if held.schema_type == request.schema_type and held.references == request.references \
                    and (held.schema in texts or (normalize and self._same_normalized(held, parsed))):
                return schema_answer(held)
        raise RegistryError.schema_not_found()

    def _same_normalized(self, held: SchemaValue, parsed: ParsedSchema) -> bool:
        """With `normalize=true`, a version matches when both normalize to the same text (Confluent compares
        the normalized forms of the stored schemas too)."""
        stored = self.parsed.schema_by_id(held.id)
        return stored is not None and stored.normalized() == parsed.normalized()

    def check_compatibility(self, subject: str, version: int | None, request: SchemaRequest, normalize: bool,
                            verbose: bool) -> dict[str, Any]:
        """POST /compatibility/subjects/{s}/versions[/{v}]: against one version, or (None) every version the
        subject's level compares with."""
        parsed = self.parsed.parse(request.schema_type, request.schema, request.references)
        if version is None:
            previous = self.state.versions(subject)
        elif not self.state.has_subject(subject):
            if version != LATEST:
                raise RegistryError.subject_not_found(subject)
            previous = []
        else:
            previous = [self.get_version(subject, version)]
        errors = self._compatibility_errors(subject, parsed, previous)
        answer: dict[str, Any] = {"is_compatible": not errors}
        if verbose:
            answer["messages"] = errors
        return answer

    def _compatibility_errors(self, subject: str, parsed: ParsedSchema, previous: list[SchemaValue]) -> list[str]:
        level = self.state.effective_compatibility(subject)
        if level == "NONE" or not previous:
            return []
        if any(p.schema_type != parsed.schema_type for p in previous):
            return [f"the schema type {parsed.schema_type} differs from the type of an earlier version"]
        schemas = [s for s in (self.parsed.schema_by_id(p.id) for p in previous) if s is not None]
        return self.parsed.tools.compatibility_errors(level, parsed, schemas)

    # -- register -----------------------------------------------------------------------------------------------

    def register(self, subject: str, request: SchemaRequest, normalize: bool) -> Plan:
        """POST /subjects/{s}/versions. Raises 42201 / 42205 / 42207 / 40901."""
        if not subject or any(ord(c) < 32 for c in subject):
            raise RegistryError.invalid_subject(subject)
        mode = self.state.effective_mode(subject)
        if mode in _READ_ONLY:
            raise RegistryError.not_permitted(f"Subject {subject} is in read-only mode")
        importing = mode == "IMPORT"
        if not importing and (request.id is not None or request.version is not None):
            raise RegistryError.not_permitted(
                f"Subject {subject} is not in import mode: an id or version cannot be chosen")
        parsed = self.parsed.parse(request.schema_type, request.schema, request.references)
        text = parsed.normalized() if normalize else parsed.canonical()
        content = SchemaContent(text, request.schema_type, request.references)
        existing = self._registered(subject, content, request, parsed if normalize else None)
        if existing is not None:
            return Plan({"id": existing.id})
        if not importing:
            errors = self._compatibility_errors(subject, parsed, self.state.versions(subject))
            if errors:
                raise RegistryError.incompatible(subject, errors)
        schema_id = self._id_for(content, request.id)
        version = request.version or self.state.next_version(subject)
        if importing and self.state.version(subject, version) is not None:
            raise RegistryError.not_permitted(f"Subject {subject} already has a version {version}")
        value = SchemaValue(subject, version, schema_id, text, request.schema_type, request.references,
                            metadata=request.metadata, rule_set=request.rule_set)
        return Plan({"id": schema_id}, [(schema_key(subject, version), value)])

    def _registered(self, subject: str, content: SchemaContent, request: SchemaRequest,
                    normalized: ParsedSchema | None) -> SchemaValue | None:
        """A live version of the subject already holding this schema (the one asked for, when importing); with
        `normalized` (normalize=true), one whose normalized form is the same counts too."""
        for held in self.state.versions(subject):
            if request.version not in (None, held.version) or request.id not in (None, held.id):
                continue
            if SchemaContent.of(held) == content:
                return held
            if normalized is not None and held.schema_type == content.schema_type \
                    and held.references == content.references and self._same_normalized(held, normalized):
                return held
        return None

    def _id_for(self, content: SchemaContent, wanted: int | None) -> int:
        known = self.state.id_for(content)
        if wanted is None:
            return known if known is not None else self.state.max_id + 1
        holds = self.state.content(wanted)
        if holds is not None and holds != content:
            raise RegistryError.id_does_not_match(
                f"Schema id {wanted} is already registered with a different schema")
        return wanted
