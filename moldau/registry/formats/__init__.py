"""Schema formats (Avro, JSON Schema, Protobuf): parsing, canonical forms, compatibility and payload checks.

Every format implements `SchemaFormat` from `base`; `FORMATS` maps Confluent's `schemaType` names to them.
"""

from __future__ import annotations

from collections.abc import Mapping

from moldau.registry.formats.avro import AvroFormat
from moldau.registry.formats.base import InvalidPayload, InvalidSchema, ParsedSchema, SchemaFormat
from moldau.registry.formats.json_schema import JsonSchemaFormat
from moldau.registry.formats.protobuf import ProtobufFormat

FORMATS: dict[str, SchemaFormat] = {
    "AVRO": AvroFormat(),
    "JSON": JsonSchemaFormat(),
    "PROTOBUF": ProtobufFormat(),
}

__all__ = ["FORMATS", "InvalidPayload", "InvalidSchema", "ParsedSchema", "SchemaFormat", "parse_schema"]


def parse_schema(schema_type: str, text: str, references: Mapping[str, str]) -> ParsedSchema:
    """Parse `text` as a schema of Confluent's `schema_type` ("AVRO", "JSON", "PROTOBUF"); raise InvalidSchema."""
    schema_format = FORMATS.get(schema_type)
    if schema_format is None:
        known = ", ".join(FORMATS)
        raise InvalidSchema(f"unknown schema type '{schema_type}' (known: {known})")
    return schema_format.parse(text, references)
