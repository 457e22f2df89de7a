"""A schema lookup over real parsed schemas, and Confluent wire-format encoding, for the validation tests."""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Iterable
from typing import Any

from fastavro import parse_schema as fastavro_parse
from fastavro import schemaless_writer

from moldau.registry.formats import ParsedSchema, parse_schema

ORDER = {"type": "record", "name": "Order", "namespace": "com.example",
         "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}]}
CUSTOMER = {"type": "record", "name": "Customer", "namespace": "com.example",
            "fields": [{"name": "name", "type": "string"}]}


class RegistryLookup:
    """Schemas by id and the subjects holding them, as the registry's lookup answers; counts the questions."""

    def __init__(self) -> None:
        self.schemas: dict[int, ParsedSchema] = {}
        self.subjects: dict[str, set[int]] = {}
        self.questions = 0

    def register(self, subject: str, schema_id: int, schema: Any, schema_type: str = "AVRO") -> None:
        if schema_id not in self.schemas:
            text = schema if schema_type == "PROTOBUF" else json.dumps(schema)
            self.schemas[schema_id] = parse_schema(schema_type, text, {})
        self.subjects.setdefault(subject, set()).add(schema_id)

    def schema_by_id(self, schema_id: int) -> ParsedSchema | None:
        self.questions += 1
        return self.schemas.get(schema_id)

    def subject_has_id(self, subject: str, schema_id: int) -> bool:
        self.questions += 1
        return schema_id in self.subjects.get(subject, set())


def avro(schema_id: int, schema: Any, datum: Any) -> bytes:
    """A datum as Confluent's Avro serializer writes it: magic byte, schema id, Avro binary."""
    out = io.BytesIO()
    out.write(struct.pack(">bI", 0, schema_id))
    schemaless_writer(out, fastavro_parse(schema), datum)
    return out.getvalue()


def json_record(schema_id: int, document: Any) -> bytes:
    """A document as Confluent's JSON Schema serializer writes it: magic byte, schema id, UTF-8 JSON."""
    return struct.pack(">bI", 0, schema_id) + json.dumps(document).encode()


def orders(schema_id: int, ids: Iterable[int]) -> list[bytes]:
    return [avro(schema_id, ORDER, {"id": i, "item": f"item {i}"}) for i in ids]
