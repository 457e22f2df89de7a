"""Avro schemas: parsing (with named types from references), canonical texts, resolution-rule compatibility and
binary payload checks.

Parsing and decoding use fastavro. Compatibility is checked here, over a "full-name" form of the schema in which
every named type's definition carries its full name and every use of it is that full name, so that the rules of
Avro's schema resolution (the specification's "Schema Resolution" section) can be applied by plain recursion.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

from fastavro import schemaless_reader
from fastavro.schema import SchemaParseException, UnknownType, parse_schema

from moldau.registry.formats.avro_binary import check_binary, has_zero_width_items
from moldau.registry.formats.base import InvalidPayload, InvalidSchema, ParsedSchema

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
NAMED_KINDS = frozenset({"record", "error", "enum", "fixed"})

# Writer type -> reader types that can read it (Avro's promotions).
PROMOTIONS: dict[str, frozenset[str]] = {
    "int": frozenset({"long", "float", "double"}),
    "long": frozenset({"float", "double"}),
    "float": frozenset({"double"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}

# Keys written first, in this order, by the canonical and normalized forms; any other key follows, sorted.
KEY_ORDER = ("type", "name", "namespace", "doc", "fields", "symbols", "items", "values", "size", "default", "order",
             "aliases", "logicalType", "precision", "scale")


def ordered(node: Any, field: bool = False) -> Any:
    """`node` with every object's keys in a fixed order (a field's name first, else KEY_ORDER), then the rest
    sorted: the same schema gives the same text whatever order its keys were written in."""
    if isinstance(node, list):
        return [ordered(item, field) for item in node]
    if not isinstance(node, dict):
        return node
    order = ("name", *KEY_ORDER) if field else KEY_ORDER
    known = [key for key in order if key in node]
    rest = sorted(key for key in node if key not in order)
    # Defaults are data: kept as given. Only "fields" holds field objects.
    return {key: node[key] if key == "default" else ordered(node[key], key == "fields") for key in known + rest}


def compact(node: Any) -> str:
    return json.dumps(node, separators=(",", ":"), ensure_ascii=False, sort_keys=False)


def full_name(name: str, namespace: str | None) -> str:
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


class FullNames:
    """Rewrites a schema into its full-name form, collecting each named type's definition by full name."""

    def __init__(self, known: dict[str, dict[str, Any]]) -> None:
        self.named = known

    def expand(self, node: Any, namespace: str | None) -> Any:
        if isinstance(node, str):
            return self.reference(node, namespace)
        if isinstance(node, list):
            return [self.expand(branch, namespace) for branch in node]
        if not isinstance(node, dict):
            return node
        kind = node.get("type")
        if kind in NAMED_KINDS:
            return self.named_type(node, namespace)
        if kind == "array":
            return {**node, "items": self.expand(node.get("items"), namespace)}
        if kind == "map":
            return {**node, "values": self.expand(node.get("values"), namespace)}
        if isinstance(kind, str) and kind in PRIMITIVES and len(node) == 1:
            return kind
        if isinstance(kind, (dict, list)) or (isinstance(kind, str) and kind not in PRIMITIVES):
            return self.expand(kind, namespace)
        return dict(node)

    def reference(self, name: str, namespace: str | None) -> str:
        if name in PRIMITIVES:
            return name
        qualified = full_name(name, namespace)
        # A name without a dot may also denote a type defined in the null namespace.
        return qualified if qualified in self.named or name not in self.named else name

    def named_type(self, node: dict[str, Any], namespace: str | None) -> dict[str, Any]:
        name = full_name(str(node["name"]), node.get("namespace", namespace))
        inner = name.rpartition(".")[0] or None
        out = {key: value for key, value in node.items() if key != "namespace"}
        out["name"] = name
        if "aliases" in node:
            out["aliases"] = sorted(full_name(str(alias), inner) for alias in node["aliases"])
        self.named[name] = out  # before the fields, so recursive uses resolve
        check_named(node, name)
        if node["type"] in ("record", "error"):
            out["fields"] = [{**field, "type": self.expand(field.get("type"), inner)} for field in node["fields"]]
        return out


def check_named(node: dict[str, Any], name: str) -> None:
    """What the Avro specification requires of named types and fastavro lets pass."""
    kind = node["type"]
    if kind in ("record", "error"):
        fields = node.get("fields")
        if not isinstance(fields, list) or not all(isinstance(f, dict) and "name" in f for f in fields):
            raise InvalidSchema(f"record '{name}' needs a 'fields' list of objects with a 'name'")
        field_names = [field["name"] for field in fields]
        if len(set(field_names)) != len(field_names):
            raise InvalidSchema(f"record '{name}' has duplicate field names")
    elif kind == "enum":
        symbols = node.get("symbols")
        if not isinstance(symbols, list) or len(set(symbols)) != len(symbols):
            raise InvalidSchema(f"enum '{name}' needs a 'symbols' list without duplicates")
    elif not isinstance(node.get("size"), int) or isinstance(node.get("size"), bool):
        raise InvalidSchema(f"fixed '{name}' needs an integer 'size'")


def kind_of(node: Any) -> str:
    if isinstance(node, list):
        return "union"
    if isinstance(node, dict):
        kind = node.get("type")
        return "record" if kind == "error" else str(kind)
    return str(node)


class Resolution:
    """One reader/writer comparison: Avro's schema resolution rules, one message per problem."""

    def __init__(self, reader_named: Mapping[str, Any], writer_named: Mapping[str, Any]) -> None:
        self.reader_named = reader_named
        self.writer_named = writer_named
        self.records: dict[tuple[str, str], list[str]] = {}  # record pairs compared so far
        self.in_progress: set[tuple[str, str]] = set()

    def errors(self, reader: Any, writer: Any) -> list[str]:
        """The whole comparison; a record pair met again reports its problems again, so keep each message once."""
        return list(dict.fromkeys(self.check(reader, writer, "")))

    def check(self, reader: Any, writer: Any, path: str) -> list[str]:
        reader = self.resolve(reader, self.reader_named)
        writer = self.resolve(writer, self.writer_named)
        if isinstance(writer, list):
            errors: list[str] = []
            for branch in writer:  # every branch the writer may have used must be readable
                errors += self.check(reader, branch, path)
            return errors
        if isinstance(reader, list):
            return self.union_reader(reader, writer, path)
        return self.same_kind(reader, writer, path)

    @staticmethod
    def resolve(node: Any, named: Mapping[str, Any]) -> Any:
        return named.get(node, node) if isinstance(node, str) and node not in PRIMITIVES else node

    def union_reader(self, reader: list[Any], writer: Any, path: str) -> list[str]:
        for branch in reader:
            if not self.check(branch, writer, path):
                return []
        return [f"MISSING_UNION_BRANCH: reader union at {path or '/'} has no branch that can read the writer's "
                f"{describe(writer)}"]

    def same_kind(self, reader: Any, writer: Any, path: str) -> list[str]:
        r_kind, w_kind = kind_of(reader), kind_of(writer)
        if r_kind != w_kind:
            if r_kind in PROMOTIONS.get(w_kind, frozenset()):
                return []
            return [f"TYPE_MISMATCH: reader type {describe(reader)} at {path or '/'} cannot read writer type "
                    f"{describe(writer)}"]
        if r_kind == "record":
            return self.record(reader, writer, path)
        # Named types: a name mismatch is reported together with any other problem, as Avro's own checker does.
        errors = [] if r_kind not in ("enum", "fixed") or names_match(reader, writer) else [
            name_mismatch(reader, writer, path)]
        if r_kind == "enum":
            return errors + enum_errors(reader, writer, path)
        if r_kind == "fixed" and reader.get("size") != writer.get("size"):
            errors.append(f"FIXED_SIZE_MISMATCH: fixed '{reader['name']}' at {path or '/'} has size "
                          f"{reader.get('size')} but the writer's has size {writer.get('size')}")
        if errors or r_kind == "fixed":
            return errors
        if r_kind == "array":
            return self.check(reader.get("items"), writer.get("items"), f"{path}/items")
        if r_kind == "map":
            return self.check(reader.get("values"), writer.get("values"), f"{path}/values")
        return []

    def record(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
        mismatch = [] if names_match(reader, writer) else [name_mismatch(reader, writer, path)]
        pair = (reader["name"], writer["name"])
        if pair in self.in_progress:
            return []  # recursive use: readable unless something else, reported where it is, is not
        if pair in self.records:
            return self.records[pair]
        self.in_progress.add(pair)
        errors = mismatch + self.fields(reader, writer, path)
        self.in_progress.discard(pair)
        self.records[pair] = errors
        return errors

    def fields(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
        errors: list[str] = []
        writer_fields = {field["name"]: field for field in writer.get("fields", [])}
        for index, field in enumerate(reader.get("fields", [])):
            field_path = f"{path}/fields/{index}"
            found = next((writer_fields[name] for name in [field["name"], *field.get("aliases", [])]
                          if name in writer_fields), None)
            if found is not None:
                errors += self.check(field.get("type"), found.get("type"), f"{field_path}/type")
            elif "default" not in field:
                errors.append(f"READER_FIELD_MISSING_DEFAULT_VALUE: field '{field['name']}' at {field_path} of "
                              f"record '{reader['name']}' has no default and is missing from the writer's record")
        return errors


def names_match(reader: dict[str, Any], writer: dict[str, Any]) -> bool:
    """Avro's (Java) checker, which Confluent's registry uses: equal unqualified names, or the writer's full name
    among the reader's aliases. A namespace change alone therefore keeps data readable."""
    same_name = str(reader["name"]).rpartition(".")[2] == str(writer["name"]).rpartition(".")[2]
    return same_name or writer["name"] in reader.get("aliases", [])


def name_mismatch(reader: dict[str, Any], writer: dict[str, Any], path: str) -> str:
    return (f"NAME_MISMATCH: reader {kind_of(reader)} '{reader['name']}' at {path or '/'} does not match the "
            f"writer's '{writer['name']}' (by name or alias)")


def enum_errors(reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
    missing = [symbol for symbol in writer.get("symbols", []) if symbol not in reader.get("symbols", [])]
    if not missing or "default" in reader:
        return []
    return [f"MISSING_ENUM_SYMBOLS: enum '{reader['name']}' at {path or '/'} lacks the writer's symbols "
            f"{missing} and has no default"]


def describe(node: Any) -> str:
    if isinstance(node, list):
        return "union"
    if isinstance(node, dict):
        kind = kind_of(node)
        return f"{kind} '{node['name']}'" if "name" in node and kind in NAMED_KINDS else kind
    return str(node)


class AvroSchema:
    """A parsed Avro schema: the given JSON, its full-name form and fastavro's parsed form (for decoding)."""

    schema_type = "AVRO"

    def __init__(self, raw: Any, expanded: Any, named: dict[str, Any], parsed: Any) -> None:
        self.raw = raw
        self.expanded = expanded
        self.named = named
        self.parsed = parsed
        # Arrays of items that take no bytes could make the decoder loop for ever: those schemas are walked instead.
        self.walk_payloads = has_zero_width_items(expanded, named)

    def canonical(self) -> str:
        return compact(ordered(self.raw))

    def normalized(self) -> str:
        return compact(ordered(self.expanded))

    def read_errors(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, AvroSchema):
            return [f"TYPE_MISMATCH: an AVRO schema cannot read data written with a {writer.schema_type} schema"]
        return Resolution(self.named, writer.named).errors(self.expanded, writer.expanded)

    def record_name(self, message_indexes: Sequence[int] = ()) -> str | None:
        if isinstance(self.expanded, dict) and kind_of(self.expanded) == "record":
            return str(self.expanded["name"])
        return None

    def check_payload(self, payload: bytes, message_indexes: Sequence[int] = ()) -> None:
        if self.walk_payloads:
            check_binary(payload, self.expanded, self.named)
            return
        stream = io.BytesIO(payload)
        try:
            schemaless_reader(stream, self.parsed, None)
        except Exception as exc:  # fastavro reports bad bytes with many exception types
            raise InvalidPayload(f"not Avro binary for this schema: {type(exc).__name__}: {exc}") from exc
        if stream.tell() != len(payload):
            raise InvalidPayload(f"{len(payload) - stream.tell()} bytes left over after the Avro datum")


def load_json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidSchema(f"{what} is not valid JSON: {exc}") from exc


def fastavro_parse(raw: Any, named: dict[str, Any], what: str) -> Any:
    try:
        return parse_schema(raw, named_schemas=named)
    except UnknownType as exc:
        raise InvalidSchema(f"invalid Avro {what}: unknown type '{exc}' (not defined here nor in a reference)") from exc
    except (SchemaParseException, ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        raise InvalidSchema(f"invalid Avro {what}: {exc}") from exc


def parse_references(references: Mapping[str, str], parsed_named: dict[str, Any],
                     names: FullNames) -> None:
    """Parse the referenced schemas in an order where each one's named types are known before use."""
    pending = {name: load_json(text, f"reference '{name}'") for name, text in references.items()}
    while pending:
        progress = False
        for name, raw in list(pending.items()):
            try:
                parse_schema(raw, named_schemas=dict(parsed_named))
            except UnknownType:
                continue
            except (SchemaParseException, ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
                raise InvalidSchema(f"invalid Avro reference '{name}': {exc}") from exc
            fastavro_parse(raw, parsed_named, f"reference '{name}'")
            names.expand(raw, None)
            del pending[name]
            progress = True
        if not progress:
            missing = ", ".join(sorted(pending))
            raise InvalidSchema(f"Avro references use named types that no reference defines: {missing}")


class AvroFormat:
    name = "AVRO"

    def parse(self, text: str, references: Mapping[str, str]) -> AvroSchema:
        try:
            return self.parse_nested(text, references)
        except RecursionError as exc:
            raise InvalidSchema("Avro schema nested too deeply") from exc

    def parse_nested(self, text: str, references: Mapping[str, str]) -> AvroSchema:
        parsed_named: dict[str, Any] = {}
        names = FullNames({})
        parse_references(references, parsed_named, names)
        raw = load_json(text, "schema")
        parsed = fastavro_parse(raw, parsed_named, "schema")
        expanded = names.expand(raw, None)
        return AvroSchema(raw, expanded, names.named, parsed)
