"""Confluent's ProtobufConverter (`io.confluent.connect.protobuf.ProtobufConverter`): Connect structs as
Protobuf messages in Confluent's wire format (schema id, message indexes, payload), the schema registered in
the schema registry by confluent-kafka's ProtobufSerializer. Reading compiles the writer's registered schema
(with the registry's own Protobuf support) and decodes with confluent-kafka's ProtobufDeserializer."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import SerializationContext
from google.protobuf import descriptor_pool, message_factory  # type: ignore[import-untyped]

from moldau.connect.converters import protobuf_data
from moldau.connect.converters.registry_base import RegistryConverter
from moldau.connect.data import Schema, SchemaAndValue
from moldau.connect.errors import DataException
from moldau.registry.formats.protobuf import ProtobufFormat
from moldau.registry.validation import WireFormatError, read_message_indexes

_DESERIALIZER_CONF = {"use.deprecated.format": False}


class ProtobufConverter(RegistryConverter):
    aliases = ("io.confluent.connect.protobuf.ProtobufConverter",)
    format_name = "Protobuf"

    def __init__(self) -> None:
        super().__init__()
        self._classes: dict[str, Any] = {}
        self._readers: dict[tuple[int, tuple[int, ...]], tuple[Schema, Any]] = {}

    def _message_class(self, schema: Schema) -> tuple[str, Any]:
        file, full_name = protobuf_data.to_file_descriptor(schema)
        key = base64.b64encode(file.SerializeToString()).decode("ascii")
        if key not in self._classes:
            pool = descriptor_pool.DescriptorPool()
            pool.Add(file)
            self._classes[key] = message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))
        return key, self._classes[key]

    def writer_schema(self, schema: Schema) -> str:
        return self._message_class(schema)[0]

    def writer_value(self, schema: Schema, value: Any) -> Any:
        message = self._message_class(schema)[1]()
        return protobuf_data.fill_message(message, schema, value)

    def make_serializer(self, client: SchemaRegistryClient,
                        writer: str) -> Callable[[Any, SerializationContext], bytes | None]:
        conf = {**self.serializer_conf, "use.deprecated.format": False}
        serializer: Callable[[Any, SerializationContext], bytes | None] = ProtobufSerializer(
            self._classes[writer], client, conf=conf)
        return serializer

    def decode(self, topic: str, schema_id: int, data: bytes) -> SchemaAndValue:
        # The deserializer parses into one message class, so each writer message gets its own reader.
        indexes = message_indexes(data[5:])
        try:
            schema, message_class = self._reader(schema_id, indexes)
            message = ProtobufDeserializer(message_class, dict(_DESERIALIZER_CONF), self._client())(
                data, self.context(topic))
        except DataException:
            raise
        except Exception as e:
            raise DataException(f"Failed to deserialize data for topic {topic} to Protobuf: {e}") from e
        return SchemaAndValue(schema, protobuf_data.to_connect_value(schema, message))

    def _reader(self, schema_id: int, indexes: tuple[int, ...]) -> tuple[Schema, Any]:
        key = (schema_id, indexes)
        if key not in self._readers:
            client = self._client()
            registered = client.get_schema(schema_id)
            references = {str(ref.name): client.get_version(str(ref.subject), ref.version or "latest").schema.schema_str
                          or "" for ref in registered.references or []}
            parsed = ProtobufFormat().parse(registered.schema_str or "", references)
            message_class = parsed.message_class(indexes)
            self._readers[key] = (protobuf_data.to_connect_schema(message_class.DESCRIPTOR), message_class)
        return self._readers[key]


def message_indexes(payload: bytes) -> tuple[int, ...]:
    """Confluent's message index array at the start of `payload` (the registry's wire-format reader)."""
    try:
        return tuple(read_message_indexes(payload, 0)[0])
    except WireFormatError as e:
        raise DataException(f"Bad Protobuf message indexes: {e}") from None
