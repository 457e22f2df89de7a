"""What the transforms share: operating on a record's key or its value (Kafka's `$Key` / `$Value` variants),
Kafka's checks that a value is a Struct or a map, and copying a schema's name, version, doc and parameters."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

from moldau.connect.api import ConnectRecord, Transformation
from moldau.connect.config import ConfigDef
from moldau.connect.data import Schema, SchemaBuilder, Struct, Type
from moldau.connect.errors import DataException

KAFKA = "org.apache.kafka.connect.transforms."


class PartTransform(Transformation[ConnectRecord], ABC):
    """A transform of one part of a record (key or value); the `$Key`/`$Value` mixins below choose which."""

    @abstractmethod
    def operating_schema(self, record: ConnectRecord) -> Schema | None: ...

    @abstractmethod
    def operating_value(self, record: ConnectRecord) -> Any: ...

    @abstractmethod
    def new_record(self, record: ConnectRecord, schema: Schema | None, value: Any) -> ConnectRecord: ...

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.setup(self.config_def().parse(configs))

    @abstractmethod
    def setup(self, parsed: Mapping[str, Any]) -> None:
        """Take the parsed options (ConfigDef.parse has checked and defaulted them)."""

    @abstractmethod
    def config_def(self) -> ConfigDef: ...


class Key:
    """Mixin: the transform works on the record's key."""

    def operating_schema(self, record: ConnectRecord) -> Schema | None:
        return record.key_schema

    def operating_value(self, record: ConnectRecord) -> Any:
        return record.key

    def new_record(self, record: ConnectRecord, schema: Schema | None, value: Any) -> ConnectRecord:
        return record.new_record(key_schema=schema, key=value)


class Value:
    """Mixin: the transform works on the record's value."""

    def operating_schema(self, record: ConnectRecord) -> Schema | None:
        return record.value_schema

    def operating_value(self, record: ConnectRecord) -> Any:
        return record.value

    def new_record(self, record: ConnectRecord, schema: Schema | None, value: Any) -> ConnectRecord:
        return record.new_record(value_schema=schema, value=value)


def require_struct(value: Any, purpose: str) -> Struct:
    if not isinstance(value, Struct):
        raise DataException(f"Only Struct objects supported for [{purpose}], found: {_type_name(value)}")
    return value


def require_map(value: Any, purpose: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise DataException(
            f"Only Map objects supported in absence of schema for [{purpose}], found: {_type_name(value)}")
    return dict(value)


def require_schema(schema: Schema | None, purpose: str) -> Schema:
    if schema is None:
        raise DataException(f"Schema required for [{purpose}]")
    return schema


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def struct_like(base: Schema, fields: list[tuple[str, Schema]]) -> Schema:
    """A struct schema with `base`'s name, version, doc, parameters and optionality and the given fields."""
    builder = SchemaBuilder.struct()
    for name, schema in fields:
        builder.field(name, schema)
    if base.name is not None:
        builder.name(base.name)
    if base.version is not None:
        builder.version(base.version)
    if base.doc is not None:
        builder.doc(base.doc)
    for key, value in (base.parameters or {}).items():
        builder.parameter(key, value)
    if base.optional:
        builder.optional()
    return builder.build()


def fields_of(schema: Schema) -> list[tuple[str, Schema]]:
    if schema.type is not Type.STRUCT:
        raise DataException(f"Expected a struct schema, found {schema.type.value}")
    return [(f.name, f.schema) for f in schema.fields]

