"""Confluent's AvroConverter (`io.confluent.connect.avro.AvroConverter`): Connect data as Avro in Confluent's
wire format, the schema registered in (or, with `use.latest.version`, taken from) the schema registry."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from confluent_kafka.schema_registry import Schema as RegistrySchema
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import SerializationContext

from moldau.connect.converters import avro_data
from moldau.connect.converters.registry_base import SchemaReadingConverter
from moldau.connect.data import Schema


class AvroConverter(SchemaReadingConverter):
    aliases = ("io.confluent.connect.avro.AvroConverter",)
    format_name = "Avro"

    def writer_schema(self, schema: Schema) -> str:
        return json.dumps(avro_data.to_avro_schema(schema), separators=(",", ":"))

    def writer_value(self, schema: Schema, value: Any) -> Any:
        return avro_data.to_avro_value(schema, value)

    def make_serializer(self, client: SchemaRegistryClient,
                        writer: str) -> Callable[[Any, SerializationContext], bytes | None]:
        schema = None if self.serializer_conf["use.latest.version"] else writer
        serializer: Callable[[Any, SerializationContext], bytes | None] = AvroSerializer(
            client, schema, conf=dict(self.serializer_conf))
        return serializer

    def make_deserializer(self, client: SchemaRegistryClient) -> Callable[[bytes, SerializationContext], Any]:
        deserializer: Callable[[bytes, SerializationContext], Any] = AvroDeserializer(client)
        return deserializer

    def connect_schema(self, registered: RegistrySchema) -> Schema:
        return avro_data.to_connect_schema(json.loads(registered.schema_str or "null"))

    def connect_value(self, schema: Schema, decoded: Any) -> Any:
        return avro_data.to_connect_value(schema, decoded)
