"""JSON Schema: parsing (drafts 4, 6, 7, 2019-09 and 2020-12, chosen by `$schema`, draft 7 by default as in
Confluent's registry), references resolved through a `referencing.Registry`, canonical texts and payload checks.

The compatibility rules live in `json_compat`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urljoin

import referencing.jsonschema
from jsonschema import (  # type: ignore[import-untyped]  # the library ships no type information
    Draft4Validator,
    Draft6Validator,
    Draft7Validator,
    Draft201909Validator,
    Draft202012Validator,
)
from jsonschema.exceptions import SchemaError, best_match  # type: ignore[import-untyped]
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable

from moldau.registry.formats.base import InvalidPayload, InvalidSchema, ParsedSchema
from moldau.registry.formats.json_compat import Node, schema_diff

# `$schema` URIs (without a trailing "#") -> the validator of that draft.
DRAFTS: dict[str, type[Any]] = {
    "http://json-schema.org/draft-04/schema": Draft4Validator,
    "http://json-schema.org/draft-06/schema": Draft6Validator,
    "http://json-schema.org/draft-07/schema": Draft7Validator,
    "https://json-schema.org/draft/2019-09/schema": Draft201909Validator,
    "https://json-schema.org/draft/2020-12/schema": Draft202012Validator,
}
DEFAULT_DRAFT: type[Any] = Draft7Validator
# Keys whose list values are sets: sorted by the normalized form.
UNORDERED_LISTS = frozenset({"required", "type"})


def draft_of(schema: Any) -> type[Any]:
    if not isinstance(schema, dict) or "$schema" not in schema:
        return DEFAULT_DRAFT
    uri = str(schema["$schema"]).rstrip("#")
    cls: type[Any] | None = DRAFTS.get(uri) or DRAFTS.get(uri.replace("https://", "http://", 1)) or DRAFTS.get(
        uri.replace("http://", "https://", 1))
    if cls is None:
        raise InvalidSchema(f"unsupported $schema '{schema['$schema']}' (supported: drafts 4, 6, 7, 2019-09, 2020-12)")
    return cls


def load(text: str, what: str) -> Any:
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidSchema(f"{what} is not valid JSON: {exc}") from exc
    if not isinstance(document, (dict, bool)):
        raise InvalidSchema(f"{what} must be a JSON object or boolean, not {type(document).__name__}")
    cls = draft_of(document)
    try:
        cls.check_schema(document)
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.path) or "(root)"
        raise InvalidSchema(f"{what} is not a valid JSON Schema at {where}: {exc.message}") from exc
    except RecursionError as exc:
        raise InvalidSchema(f"{what} is nested too deeply") from exc
    return document


def sorted_normal(node: Any, key: str = "") -> Any:
    if isinstance(node, dict):
        return {name: sorted_normal(node[name], name) for name in sorted(node)}
    if isinstance(node, list):
        items = [sorted_normal(item) for item in node]
        if key in UNORDERED_LISTS and all(isinstance(item, str) for item in items):
            return sorted(items)
        return items
    return node


def id_of(document: Any) -> str:
    if isinstance(document, dict):
        return str(document.get("$id") or document.get("id") or "")
    return ""


def build_registry(document: Any, references: Mapping[str, str], cls: type[Any]) -> Registry[Any]:
    """The referenced documents, each under its reference name, that name resolved against the root's `$id`, and
    its own `$id`; plus the root itself, so that local `#/...` references resolve too."""
    specification = referencing.jsonschema.specification_with(cls.META_SCHEMA["$schema"])
    base = id_of(document)
    resources: list[tuple[str, Resource[Any]]] = []
    for name, text in references.items():
        referenced = load(text, f"reference '{name}'")
        resource = specification.create_resource(referenced)
        uris = {name, urljoin(base, name), id_of(referenced)} - {""}
        resources += [(uri.rstrip("#"), resource) for uri in uris]
    resources.append((base, specification.create_resource(document)))
    return Registry().with_resources(resources)


def walk_refs(node: Any, resolver: Any, specification: Any, path: str) -> None:
    """Raise InvalidSchema for a `$ref` that resolves to nothing (Confluent rejects such schemas)."""
    if isinstance(node, list):
        for index, item in enumerate(node):
            walk_refs(item, resolver, specification, f"{path}/{index}")
        return
    if not isinstance(node, dict):
        return
    if id_of(node) and path:
        resolver = resolver.in_subresource(specification.create_resource(node))
    ref = node.get("$ref")
    if isinstance(ref, str):
        try:
            resolver.lookup(ref)
        except Unresolvable as exc:
            raise InvalidSchema(f"unresolvable $ref '{ref}' at {path or '#'}: not in the schema nor its references"
                                ) from exc
    for key, value in node.items():
        if key not in ("enum", "const", "default", "examples"):
            walk_refs(value, resolver, specification, f"{path}/{key}")


class JsonSchema:
    """A parsed JSON Schema with its validator (cached for payload checks) and its reference registry."""

    schema_type = "JSON"

    def __init__(self, document: Any, validator: Any, root: Node) -> None:
        self.document = document
        self.validator = validator
        self.root = root

    def canonical(self) -> str:
        # Confluent stores the compact JSON with the keys in their given order.
        return json.dumps(self.document, separators=(",", ":"), ensure_ascii=False)

    def normalized(self) -> str:
        return json.dumps(sorted_normal(self.document), separators=(",", ":"), ensure_ascii=False)

    def read_errors(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, JsonSchema):
            return [f"TYPE_CHANGED: a JSON schema cannot read data written with a {writer.schema_type} schema"]
        return schema_diff(writer.root, self.root)

    def record_name(self, message_indexes: Sequence[int] = ()) -> str | None:
        title = self.document.get("title") if isinstance(self.document, dict) else None
        return title if isinstance(title, str) else None

    def check_payload(self, payload: bytes, message_indexes: Sequence[int] = ()) -> None:
        try:
            instance = json.loads(payload.decode("utf-8"))
            error = best_match(self.validator.iter_errors(instance))
        except (UnicodeDecodeError, ValueError) as exc:
            raise InvalidPayload(f"not a UTF-8 JSON document: {exc}") from exc
        except RecursionError as exc:
            raise InvalidPayload("JSON document nested too deeply") from exc
        if error is not None:
            where = "/".join(str(part) for part in error.absolute_path) or "(root)"
            raise InvalidPayload(f"JSON document invalid at {where}: {error.message}")


class JsonSchemaFormat:
    name = "JSON"

    def parse(self, text: str, references: Mapping[str, str]) -> JsonSchema:
        try:
            return self.parse_nested(text, references)
        except RecursionError as exc:
            raise InvalidSchema("JSON schema nested too deeply") from exc

    def parse_nested(self, text: str, references: Mapping[str, str]) -> JsonSchema:
        document = load(text, "schema")
        cls = draft_of(document)
        registry = build_registry(document, references, cls)
        specification = referencing.jsonschema.specification_with(cls.META_SCHEMA["$schema"])
        resolver = registry.resolver(base_uri=id_of(document))
        walk_refs(document, resolver, specification, "")
        validator = cls(document, registry=registry)
        return JsonSchema(document, validator, Node(document, resolver, specification))
