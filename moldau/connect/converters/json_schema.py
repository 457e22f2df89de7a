"""Confluent's JsonSchemaConverter (`io.confluent.connect.json.JsonSchemaConverter`): Connect data as JSON in
Confluent's wire format, validated against a JSON Schema registered in the schema registry."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from confluent_kafka.schema_registry import Schema as RegistrySchema
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import SerializationContext

from moldau.connect.converters import json_schema_data
from moldau.connect.converters.registry_base import SchemaReadingConverter
from moldau.connect.data import Schema


class JsonSchemaConverter(SchemaReadingConverter):
    aliases = ("io.confluent.connect.json.JsonSchemaConverter",)
    format_name = "JSON Schema"

    def writer_schema(self, schema: Schema) -> str:
        return json.dumps(json_schema_data.to_json_schema(schema), separators=(",", ":"))

    def writer_value(self, schema: Schema, value: Any) -> Any:
        return json_schema_data.to_json_value(schema, value)

    def make_serializer(self, client: SchemaRegistryClient,
                        writer: str) -> Callable[[Any, SerializationContext], bytes | None]:
        schema = None if self.serializer_conf["use.latest.version"] else writer
        serializer: Callable[[Any, SerializationContext], bytes | None] = JSONSerializer(
            schema, client, conf=dict(self.serializer_conf))
        return serializer

    def make_deserializer(self, client: SchemaRegistryClient) -> Callable[[bytes, SerializationContext], Any]:
        deserializer: Callable[[bytes, SerializationContext], Any] = JSONDeserializer(
            None, schema_registry_client=client)
        return deserializer

    def connect_schema(self, registered: RegistrySchema) -> Schema:
        return json_schema_data.to_connect_schema(json.loads(registered.schema_str or "null"))

    def connect_value(self, schema: Schema, decoded: Any) -> Any:
        return json_schema_data.to_connect_value(schema, decoded)
