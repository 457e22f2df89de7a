"""What the schema pages show, read from the node's schema registry through its REST API (Confluent's): the
subjects with their latest version, type and compatibility level, a subject's versions with their schemas
(pretty-printed) and references, and which subjects hold a schema id. The functions block (one HTTP request
after another); the pages run them in a worker thread."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from moldau.registry.rest_client import RegistryClient, RegistryError, subject_path

__all__ = ["RegistryError", "SchemaVersion", "SubjectDetail", "SubjectRow", "id_holders", "subject_detail",
           "subjects_overview"]

TIMEOUT_S = 5.0
VERSIONS_SHOWN_MAX = 50  # a subject's newest versions shown in full


@dataclass(frozen=True)
class SubjectRow:
    subject: str
    version: int
    schema_id: int
    schema_type: str
    compatibility: str


@dataclass(frozen=True)
class SchemaVersion:
    version: int
    schema_id: int
    schema_type: str
    text: str  # pretty-printed
    references: list[dict[str, Any]]


@dataclass(frozen=True)
class SubjectDetail:
    subject: str
    compatibility: str
    versions: list[SchemaVersion]  # newest first
    version_count: int


def subjects_overview(url: str) -> tuple[list[SubjectRow], str]:
    """Every subject's latest version, and the registry's global compatibility level."""
    registry = RegistryClient(url, timeout_s=TIMEOUT_S)
    global_level = registry.get("/config").get("compatibilityLevel", "")
    rows = []
    for latest in registry.get("/schemas", latestOnly=True):
        subject = latest["subject"]
        rows.append(SubjectRow(subject, latest["version"], latest["id"], latest.get("schemaType", "AVRO"),
                               _compatibility(registry, subject)))
    return sorted(rows, key=lambda row: row.subject), global_level


def subject_detail(url: str, subject: str) -> SubjectDetail:
    """A subject's versions (the newest VERSIONS_SHOWN_MAX), newest first. Raises RegistryError (40401 when the
    subject does not exist)."""
    registry = RegistryClient(url, timeout_s=TIMEOUT_S)
    numbers = registry.get(subject_path(subject, "versions"))
    versions = []
    for number in sorted(numbers, reverse=True)[:VERSIONS_SHOWN_MAX]:
        answer = registry.get(subject_path(subject, "versions", str(number)))
        schema_type = answer.get("schemaType", "AVRO")
        versions.append(SchemaVersion(number, answer["id"], schema_type, pretty(schema_type, answer["schema"]),
                                      answer.get("references") or []))
    return SubjectDetail(subject, _compatibility(registry, subject), versions, len(numbers))


def id_holders(url: str, schema_id: int) -> list[tuple[str, int]]:
    """The (subject, version) pairs that hold the schema id. Raises RegistryError (40403 for an unknown id)."""
    registry = RegistryClient(url, timeout_s=TIMEOUT_S)
    return [(held["subject"], held["version"]) for held in registry.get(f"/schemas/ids/{schema_id}/versions")]


def pretty(schema_type: str, text: str) -> str:
    """Avro and JSON Schema indented; Protobuf as written."""
    if schema_type == "PROTOBUF":
        return text
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def _compatibility(registry: RegistryClient, subject: str) -> str:
    answer = registry.get(subject_path(subject).replace("/subjects/", "/config/", 1), defaultToGlobal=True)
    return str(answer.get("compatibilityLevel", ""))
