"""Reading the registry's request bodies and path parameters into checked values (pure; no state).

Confluent's clients send a schema as `{"schema": text, "schemaType": ..., "references": [...]}`, versions as
positive integers or `latest` (also `-1`), and booleans in query strings as `true`/`false` in any case.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from moldau.registry.errors import RegistryError
from moldau.registry.records import Reference

__all__ = ["LATEST", "SchemaRequest", "parse_bool", "parse_schema_request", "parse_version"]

LATEST = -1
_MAX_VERSION = 2**31 - 1


@dataclass(frozen=True, slots=True)
class SchemaRequest:
    schema: str
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = ()
    metadata: dict[str, Any] | None = None
    rule_set: dict[str, Any] | None = None
    id: int | None = None  # IMPORT mode: the id to register under
    version: int | None = None  # IMPORT mode: the version to register as


def parse_bool(value: str | None, default: bool = False) -> bool:
    if value is None or value == "":
        return default
    return value.strip().lower() == "true"


def parse_version(text: str) -> int:
    """A version path parameter: a version in [1, 2^31-1], or LATEST for `latest` and `-1`. Raises 42202."""
    if text.lower() == "latest" or text == "-1":
        return LATEST
    try:
        version = int(text)
    except ValueError:
        raise RegistryError.invalid_version(text) from None
    if not 1 <= version <= _MAX_VERSION:
        raise RegistryError.invalid_version(text)
    return version


def parse_schema_request(body: object) -> SchemaRequest:
    """A register / lookup / compatibility body. Raises RegistryError (422 for a wrong shape, 42201 without a
    schema)."""
    if not isinstance(body, dict):
        raise RegistryError.unprocessable("the request body must be a JSON object")
    schema = body.get("schema")
    if not isinstance(schema, str) or not schema.strip():
        raise RegistryError.invalid_schema("the request has no schema text")
    schema_type = body.get("schemaType") or "AVRO"
    if not isinstance(schema_type, str):
        raise RegistryError.unprocessable("schemaType must be a string")
    return SchemaRequest(schema=schema, schema_type=schema_type.upper(), references=_references(body.get("references")),
                         metadata=_object_or_none(body.get("metadata"), "metadata"),
                         rule_set=_object_or_none(body.get("ruleSet"), "ruleSet"),
                         id=_positive_or_none(body.get("id"), "id"),
                         version=_positive_or_none(body.get("version"), "version"))


def _references(raw: object) -> tuple[Reference, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise RegistryError.unprocessable("references must be a list")
    refs = []
    for item in raw:
        if not isinstance(item, dict):
            raise RegistryError.unprocessable("each reference must be an object with name, subject and version")
        name, subject, version = item.get("name"), item.get("subject"), item.get("version")
        if not isinstance(name, str) or not isinstance(subject, str) or not isinstance(version, int) \
                or isinstance(version, bool):
            raise RegistryError.invalid_schema(f"reference {item} needs a name, a subject and an integer version")
        refs.append(Reference(name, subject, version))
    return tuple(refs)


def _object_or_none(raw: object, what: str) -> dict[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise RegistryError.unprocessable(f"{what} must be an object")
    return raw


def _positive_or_none(raw: object, what: str) -> int | None:
    if raw is None or raw == -1 or raw == 0:
        return None
    if not isinstance(raw, int) or isinstance(raw, bool) or raw < 0:
        raise RegistryError.unprocessable(f"{what} must be a positive integer")
    return raw
