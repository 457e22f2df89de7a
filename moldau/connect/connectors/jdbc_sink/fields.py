"""Which columns a record maps to, as `pk.mode` and `pk.fields` say (Confluent's rules):

- `none`: no key; every value field is a column.
- `kafka`: the record's topic, partition and offset are the key (`__connect_topic`, `__connect_partition`,
  `__connect_offset` unless `pk.fields` names three others); every value field is a column.
- `record_key`: a primitive key is one key column, named by the single `pk.fields` entry; a struct key gives
  its fields (all of them, or those `pk.fields` names). Value fields of the same name are not written twice.
- `record_value`: the value fields `pk.fields` names (all of them when empty) are the key.

`fields.whitelist`, when set, limits the non-key value columns. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from moldau.connect.api import SinkRecord
from moldau.connect.connectors.jdbc_sink.config import JdbcSinkConfig, PkMode
from moldau.connect.connectors.jdbc_sink.dialect import Column
from moldau.connect.data import INT32_SCHEMA, INT64_SCHEMA, STRING_SCHEMA, Schema, Type
from moldau.connect.errors import ConnectException, DataException

__all__ = ["FieldsMetadata", "fields_metadata", "require_value_schema"]

KAFKA_PK_SCHEMAS = (STRING_SCHEMA, INT32_SCHEMA, INT64_SCHEMA)


@dataclass(frozen=True)
class FieldsMetadata:
    """The key columns and the other columns of a record's table, in table order."""

    keys: tuple[Column, ...]
    values: tuple[Column, ...]

    @property
    def columns(self) -> tuple[Column, ...]:
        return self.keys + self.values

    @property
    def key_names(self) -> list[str]:
        return [c.name for c in self.keys]

    @property
    def value_names(self) -> list[str]:
        return [c.name for c in self.values]


def require_value_schema(record: SinkRecord) -> Schema:
    """The record's value schema, which must be a struct's: the sink maps struct fields to columns."""
    schema = record.value_schema
    if schema is None:
        raise DataException(
            f"The JDBC sink needs records with a schema, but the value at (topic='{record.topic}', partition="
            f"{record.kafka_partition}, offset={record.kafka_offset}) has none (a schemaless "
            f"{type(record.value).__name__}): use a converter that gives a schema (JsonConverter with "
            "schemas.enable=true, AvroConverter, JsonSchemaConverter or ProtobufConverter)")
    if schema.type is not Type.STRUCT:
        raise DataException(
            f"The JDBC sink writes struct values, but the value at (topic='{record.topic}', partition="
            f"{record.kafka_partition}, offset={record.kafka_offset}) has a {schema.type.value} schema")
    return schema


def fields_metadata(config: JdbcSinkConfig, record: SinkRecord, value_schema: Schema | None) -> FieldsMetadata:
    """The columns of `record` (`value_schema` None: a tombstone, which has key columns only)."""
    keys = _key_columns(config, record, value_schema)
    key_names = {c.name for c in keys}
    values: list[Column] = []
    if value_schema is not None:
        for field in value_schema.fields:
            if field.name in key_names:
                continue
            if config.fields_whitelist and field.name not in config.fields_whitelist:
                continue
            values.append(Column(field.name, field.schema))
    return FieldsMetadata(tuple(keys), tuple(values))


def _key_columns(config: JdbcSinkConfig, record: SinkRecord, value_schema: Schema | None) -> list[Column]:
    if config.pk_mode is PkMode.NONE:
        return []
    if config.pk_mode is PkMode.KAFKA:
        return [Column(name, schema, True) for name, schema in zip(config.pk_fields, KAFKA_PK_SCHEMAS, strict=True)]
    if config.pk_mode is PkMode.RECORD_KEY:
        return _record_key_columns(config, record)
    if value_schema is None:
        raise ConnectException("pk.mode=record_value needs a record value, and this record has none")
    return _struct_key_columns(config, value_schema, "value")


def _record_key_columns(config: JdbcSinkConfig, record: SinkRecord) -> list[Column]:
    schema = record.key_schema
    if schema is None:
        raise ConnectException(
            f"pk.mode=record_key needs records with a key schema, but the record at (topic='{record.topic}', "
            f"partition={record.kafka_partition}, offset={record.kafka_offset}) has none")
    if schema.type.is_primitive:
        if len(config.pk_fields) != 1:
            raise ConnectException(
                "Need exactly one PK column defined since the key schema for records is a primitive type, "
                f"defined columns are: {list(config.pk_fields)}")
        return [Column(config.pk_fields[0], schema, True)]
    if schema.type is not Type.STRUCT:
        raise ConnectException(f"Key schema must be primitive type or Struct, was {schema.type.value}")
    return _struct_key_columns(config, schema, "key")


def _struct_key_columns(config: JdbcSinkConfig, schema: Schema, where: str) -> list[Column]:
    if schema.type is not Type.STRUCT:
        raise ConnectException(f"pk.mode=record_{where} needs a struct {where}, not {schema.type.value}")
    if not config.pk_fields:
        return [Column(f.name, f.schema, True) for f in schema.fields]
    columns = []
    for name in config.pk_fields:
        field = schema.field(name)
        if field is None:
            raise ConnectException(f"PK field not present in record {where} schema: {name} (fields: "
                                   f"{schema.field_names()})")
        columns.append(Column(name, field.schema, True))
    return columns
