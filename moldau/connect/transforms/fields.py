"""Moving fields between key and value and in and out of wrappers: ValueToKey (the key becomes the listed
fields of the value), ExtractField (a part becomes one of its fields) and HoistField (a part is wrapped in a
one-field Struct or map)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from moldau.connect.api import ConnectRecord, Transformation
from moldau.connect.config import ConfigDef, ConfigType, Importance
from moldau.connect.data import SchemaBuilder, Struct
from moldau.connect.errors import ConfigException, DataException
from moldau.connect.transforms.parts import KAFKA, Key, PartTransform, Value, require_map, require_struct


def _non_empty(name: str, value: Any) -> None:
    if not value:
        raise ConfigException(name, value, "Empty list")


VALUE_TO_KEY_DEF = ConfigDef().define(
    "fields", ConfigType.LIST, importance=Importance.HIGH,
    documentation="Field names on the record value to extract as the record key.", validator=_non_empty)


class ValueToKey(Transformation[ConnectRecord]):
    """Kafka's ValueToKey: the key becomes a Struct (or map) of the listed value fields."""

    aliases = (KAFKA + "ValueToKey",)

    def config_def(self) -> ConfigDef:
        return VALUE_TO_KEY_DEF

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.fields = list(VALUE_TO_KEY_DEF.parse(configs)["fields"])

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        purpose = "copying fields from value to key"
        if record.value_schema is None:
            value = require_map(record.value, purpose)
            return record.new_record(key_schema=None, key={name: value.get(name) for name in self.fields})
        struct = require_struct(record.value, purpose)
        builder = SchemaBuilder.struct()
        for name in self.fields:
            field = record.value_schema.field(name)
            if field is None:
                raise DataException("Field does not exist: " + name)
            builder.field(name, field.schema)
        key_schema = builder.build()
        return record.new_record(key_schema=key_schema,
                                 key=Struct(key_schema, {name: struct.get(name) for name in self.fields}))


FIELD_DEF = ConfigDef().define("field", ConfigType.STRING, importance=Importance.MEDIUM,
                               documentation="Field name.")


class ExtractField(PartTransform):
    """Kafka's ExtractField: the key/value becomes the named field of the Struct or map (null if absent from a
    map, an error if absent from the schema)."""

    def config_def(self) -> ConfigDef:
        return FIELD_DEF

    def setup(self, parsed: Mapping[str, Any]) -> None:
        self.field: str = parsed["field"]

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        schema = self.operating_schema(record)
        purpose = "field extraction"
        if schema is None:
            return self.new_record(record, None, None if value is None else require_map(value, purpose).get(self.field))
        field = schema.field(self.field)
        if field is None:
            raise DataException("Unknown field: " + self.field)
        extracted = None if value is None else require_struct(value, purpose).get(self.field)
        return self.new_record(record, field.schema, extracted)


class ExtractFieldKey(Key, ExtractField):
    aliases = (KAFKA + "ExtractField$Key", "ExtractField$Key")


class ExtractFieldValue(Value, ExtractField):
    aliases = (KAFKA + "ExtractField$Value", "ExtractField$Value")


class HoistField(PartTransform):
    """Kafka's HoistField: wrap the key/value in a Struct (with a schema) or a map (without) under `field`."""

    def config_def(self) -> ConfigDef:
        return FIELD_DEF

    def setup(self, parsed: Mapping[str, Any]) -> None:
        self.field = str(parsed["field"])

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        schema = self.operating_schema(record)
        if schema is None:
            return self.new_record(record, None, {self.field: value})
        wrapper = SchemaBuilder.struct().field(self.field, schema).build()
        return self.new_record(record, wrapper, Struct(wrapper, {self.field: value}))


class HoistFieldKey(Key, HoistField):
    aliases = (KAFKA + "HoistField$Key", "HoistField$Key")


class HoistFieldValue(Value, HoistField):
    aliases = (KAFKA + "HoistField$Value", "HoistField$Value")
