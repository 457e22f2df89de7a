"""Deletes, compatibility levels and modes: the registry's other writes, planned against the state (pure).

Soft deletes rewrite the versions' SCHEMA records with `deleted: true` (a subject delete also appends Confluent's
DELETE_SUBJECT record); permanent deletes, allowed only on what was soft-deleted first, append tombstones (and
CLEAR_SUBJECT for a whole subject), which compaction then drops. A version another schema references cannot be
deleted (42206).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from moldau.registry.errors import RegistryError
from moldau.registry.operations import COMPATIBILITY_LEVELS, Plan, Record
from moldau.registry.records import CLEAR_SUBJECT, CONFIG, DELETE_SUBJECT, MODE, RecordKey, SchemaValue, schema_key
from moldau.registry.requests import LATEST
from moldau.registry.state import MODES, RegistryState

__all__ = ["Admin"]

_READ_ONLY = ("READONLY", "READONLY_OVERRIDE")


class Admin:
    def __init__(self, state: RegistryState) -> None:
        self.state = state

    # -- deletes ------------------------------------------------------------------------------------------------

    def delete_subject(self, subject: str, permanent: bool) -> Plan:
        """DELETE /subjects/{s}: the versions deleted."""
        self._writable(subject)
        every = self.state.versions(subject, deleted=True)
        if not every:
            raise RegistryError.subject_not_found(subject)
        live = [v for v in every if not v.deleted]
        if permanent:
            if live:
                raise RegistryError.subject_not_soft_deleted(subject)
            records: list[Record] = [(schema_key(subject, v.version), None) for v in every]
            records.append((RecordKey(CLEAR_SUBJECT, subject), {"subject": subject}))
            return Plan([v.version for v in every], records)
        if not live:
            raise RegistryError.subject_soft_deleted(subject)
        for v in live:
            self._not_referenced(v)
        records = [(schema_key(subject, v.version), dataclasses.replace(v, deleted=True)) for v in live]
        records.append((RecordKey(DELETE_SUBJECT, subject), {"subject": subject, "version": live[-1].version}))
        return Plan([v.version for v in live], records)

    def delete_version(self, subject: str, version: int, permanent: bool) -> Plan:
        """DELETE /subjects/{s}/versions/{v}: the version deleted."""
        self._writable(subject)
        if not self.state.has_subject(subject, deleted=True):
            raise RegistryError.subject_not_found(subject)
        held = self.state.latest(subject, deleted=permanent) if version == LATEST \
            else self.state.version(subject, version)
        if held is None:
            raise RegistryError.version_not_found("latest" if version == LATEST else version)
        if permanent:
            if not held.deleted:
                raise RegistryError.version_not_soft_deleted(subject, held.version)
            self._not_referenced(held)
            return Plan(held.version, [(schema_key(subject, held.version), None)])
        if held.deleted:
            raise RegistryError.version_soft_deleted(subject, held.version)
        self._not_referenced(held)
        return Plan(held.version, [(schema_key(subject, held.version), dataclasses.replace(held, deleted=True))])

    def _not_referenced(self, held: SchemaValue) -> None:
        users = self.state.referenced_by(held.subject, held.version)
        if users:
            raise RegistryError.reference_exists(
                f"Subject '{held.subject}' version {held.version} is referenced by schemas {users}; delete "
                "them first")

    def _writable(self, subject: str) -> None:
        if self.state.effective_mode(subject) in _READ_ONLY:
            raise RegistryError.not_permitted(f"Subject {subject} is in read-only mode")

    # -- compatibility levels -------------------------------------------------------------------------------------

    def get_config(self, subject: str | None, default_to_global: bool) -> dict[str, Any]:
        level = self.state.compatibility(subject)
        if level is None:
            if subject is not None and not default_to_global:
                raise RegistryError.compatibility_not_configured(subject)
            level = self.state.effective_compatibility(None)
        return {"compatibilityLevel": level}

    def set_config(self, subject: str | None, body: object) -> Plan:
        """PUT /config[/{s}] with `{"compatibility": level}`; answers `{"compatibility": level}`."""
        raw = body.get("compatibility", body.get("compatibilityLevel")) if isinstance(body, dict) else None
        level = raw.upper() if isinstance(raw, str) else raw
        if level not in COMPATIBILITY_LEVELS:
            raise RegistryError.invalid_compatibility(raw)
        return Plan({"compatibility": level}, [(RecordKey(CONFIG, subject), {"compatibilityLevel": level})])

    def delete_config(self, subject: str | None) -> Plan:
        """DELETE /config[/{s}]: the level in force before, and the setting removed (the global one reverts to
        the default)."""
        level = self.state.compatibility(subject)
        if subject is not None and level is None and not self.state.has_subject(subject, deleted=True):
            raise RegistryError.subject_not_found(subject)
        before = {"compatibilityLevel": level or self.state.effective_compatibility(subject)}
        return Plan(before, [(RecordKey(CONFIG, subject), None)] if level is not None else [])

    # -- modes ----------------------------------------------------------------------------------------------------

    def get_mode(self, subject: str | None, default_to_global: bool) -> dict[str, Any]:
        mode = self.state.mode(subject)
        if mode is None:
            if subject is not None and not default_to_global:
                raise RegistryError.mode_not_configured(subject)
            mode = self.state.effective_mode(None)
        return {"mode": mode}

    def set_mode(self, subject: str | None, body: object, force: bool) -> Plan:
        """PUT /mode[/{s}] with `{"mode": mode}`. IMPORT needs an empty registry (or subject) unless `force`."""
        raw = body.get("mode") if isinstance(body, dict) else None
        mode = raw.upper() if isinstance(raw, str) else raw
        if mode not in MODES:
            raise RegistryError.invalid_mode(raw)
        if mode == "IMPORT" and not force and self.state.effective_mode(subject) != "IMPORT":
            has_schemas = self.state.has_subject(subject) if subject is not None else bool(self.state.subjects())
            if has_schemas:
                raise RegistryError.not_permitted("Cannot import since found existing subjects")
        return Plan({"mode": mode}, [(RecordKey(MODE, subject), {"mode": mode})])

    def delete_mode(self, subject: str) -> Plan:
        mode = self.state.mode(subject)
        if mode is None and not self.state.has_subject(subject, deleted=True):
            raise RegistryError.subject_not_found(subject)
        before = {"mode": mode or self.state.effective_mode(subject)}
        return Plan(before, [(RecordKey(MODE, subject), None)] if mode is not None else [])
