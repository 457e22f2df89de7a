"""`--key-format` / `--value-format` of `moldau produce` and `moldau consume`: records in Confluent's wire format
(magic byte, schema id, payload) through the schema registry, written and shown as JSON text.

Producing goes through confluent-kafka's own serializers (`AvroSerializer`, `JSONSerializer`,
`ProtobufSerializer`), so what the tools write is exactly what applications write: with `--value-schema FILE` the
schema is registered under the topic's subject (`<topic>-value`, Confluent's TopicNameStrategy) if it is new;
with `--value-schema-id ID` that schema is used; with neither, the subject's latest version. Each input line is a
JSON document (for Protobuf, the message in Protobuf's JSON mapping).

Consuming reads the schema id of each record, fetches that schema once, and prints the record as JSON: Avro and
JSON Schema through confluent-kafka's deserializers, Protobuf by compiling the writer's schema (and the schemas it
imports) with the registry's own Protobuf format and parsing the message the record's message indexes name.

The options themselves are parsed by `format_options.py`, which every run of these commands imports; this module's
serializers (confluent-kafka's registry client, Protobuf) load only when a format is asked for.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import SerializationContext
from google.protobuf import json_format  # type: ignore[import-untyped]

from moldau.cli.common import CliError
from moldau.cli.format_options import Deserialize, FieldFormat, Serialize
from moldau.registry.formats.base import InvalidPayload, InvalidSchema
from moldau.registry.formats.protobuf import ProtobufFormat, ProtobufSchema
from moldau.registry.rest_client import (
    RegistryAccess,
    RegistryClient,
    RegistryError,
    resolve_references,
    subject_path,
)
from moldau.registry.validation import WireFormatError, read_message_indexes


def serializer(spec: FieldFormat, registry: RegistryAccess, topic: str) -> Serialize:
    """A function turning a JSON input line into a record's key or value for `topic`, in the wire format. Raises
    CliError."""
    client = SchemaRegistryClient(registry.confluent_conf())
    schema_text = _read_schema(spec.schema_file) if spec.schema_file else None
    conf: dict[str, Any] = {"auto.register.schemas": schema_text is not None,
                            "use.latest.version": schema_text is None and spec.schema_id is None}
    if spec.schema_id is not None:
        conf["use.schema.id"] = spec.schema_id
    if spec.fmt == "avro":
        encode: Any = AvroSerializer(client, schema_text, conf=conf)
        to_object: Callable[[bytes], Any] = _json_document
    elif spec.fmt == "json":
        encode = JSONSerializer(schema_text, client, conf=conf)
        to_object = _json_document
    else:
        message_class = _protobuf_class(schema_text, spec, registry, f"{topic}-{spec.side}")
        encode = ProtobufSerializer(message_class, client, conf={**conf, "use.deprecated.format": False})

        def to_object(line: bytes) -> Any:
            try:
                return json_format.Parse(line, message_class())
            except json_format.ParseError as exc:
                raise ValueError(str(exc)) from None

    context = SerializationContext(topic, spec.field)

    def serialize(line: bytes) -> bytes:
        try:
            data: bytes = encode(to_object(line), context)
        except ValueError as exc:
            raise CliError(f"cannot write this {spec.side} as {spec.fmt}: {exc}") from None
        except Exception as exc:  # the serializers' own errors: registry refusals, schema mismatches
            raise CliError(f"cannot serialize {spec.side} as {spec.fmt}: {exc}") from None
        return data
    return serialize


def deserializer(spec: FieldFormat, registry: RegistryAccess) -> Deserialize:
    """A function turning a record's key or value in the wire format into JSON text."""
    if spec.fmt == "protobuf":
        return ProtobufReader(registry.client(), spec.side).read
    client = SchemaRegistryClient(registry.confluent_conf())
    decode: Any = (AvroDeserializer(client) if spec.fmt == "avro"
                   else JSONDeserializer(None, schema_registry_client=client))

    def deserialize(data: bytes, topic: str) -> bytes:
        try:
            value = decode(data, SerializationContext(topic, spec.field))
        except Exception as exc:
            raise CliError(f"cannot read a {spec.side} as {spec.fmt}: {exc}") from None
        return json.dumps(value, default=_json_default, separators=(",", ":")).encode()
    return deserialize


@dataclass
class ProtobufReader:
    """Protobuf records to JSON: the writer's schema by id (with its imports), compiled once per id."""

    registry: RegistryClient
    side: str
    schemas: dict[int, ProtobufSchema] = field(default_factory=dict)

    def read(self, data: bytes, topic: str) -> bytes:
        del topic
        if len(data) < 6 or data[0] != 0:
            raise CliError(f"a {self.side} of {len(data)} bytes is not in the schema registry's wire format")
        schema_id = struct.unpack_from(">I", data, 1)[0]
        indexes, offset = message_indexes(data, 5)
        schema = self._schema(schema_id)
        try:
            message = schema.message_class(indexes).FromString(data[offset:])
        except (InvalidPayload, Exception) as exc:
            raise CliError(f"cannot read a {self.side} as Protobuf (schema {schema_id}): {exc}") from None
        return str(json_format.MessageToJson(message, indent=None)).encode()

    def _schema(self, schema_id: int) -> ProtobufSchema:
        if schema_id not in self.schemas:
            try:
                answer = self.registry.get(f"/schemas/ids/{schema_id}")
                references = resolve_references(self.registry, answer.get("references") or [])
                self.schemas[schema_id] = ProtobufFormat().parse(answer["schema"], references)
            except (RegistryError, InvalidSchema) as exc:
                raise CliError(f"cannot get Protobuf schema {schema_id}: {exc}") from None
        return self.schemas[schema_id]


def message_indexes(data: bytes, offset: int) -> tuple[list[int], int]:
    """Confluent's Protobuf message indexes after the schema id, and where the message starts."""
    try:
        return read_message_indexes(data, offset)
    except WireFormatError as exc:
        raise CliError(f"bad Protobuf message indexes in a record: {exc}") from None


def _protobuf_class(schema_text: str | None, spec: FieldFormat, access: RegistryAccess, subject: str) -> Any:
    """The message class records are written with: the first message of the given .proto, else of the schema
    the id or the subject's latest version names."""
    registry = access.client()
    try:
        if schema_text is not None:
            return ProtobufFormat().parse(schema_text, {}).message_class((0,))
        path = (f"/schemas/ids/{spec.schema_id}" if spec.schema_id is not None
                else subject_path(subject, "versions", "latest"))
        answer = registry.get(path)
        references = resolve_references(registry, answer.get("references") or [])
        return ProtobufFormat().parse(answer["schema"], references).message_class((0,))
    except (RegistryError, InvalidSchema) as exc:
        raise CliError(f"cannot load the Protobuf schema: {exc}") from None


def _read_schema(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None


def _json_document(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError as exc:
        raise ValueError(f"not a JSON document ({exc})") from None


def _json_default(value: Any) -> Any:
    """Avro's bytes, fixed, decimals, dates and UUIDs as JSON: bytes as text (latin-1, as Avro's JSON encoding
    does), everything else as its string form."""
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return str(value)
