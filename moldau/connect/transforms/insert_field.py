"""InsertField: add the record's topic, partition, offset (sink records), timestamp and/or a static string to
a Struct or map key/value. A field name ending in `!` is required in the new schema, `?` (the default) optional.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from moldau.connect.api import ConnectRecord, SinkRecord
from moldau.connect.config import ConfigDef, ConfigType, Importance
from moldau.connect.data import TIMESTAMP_NAME, Schema, Struct, Type
from moldau.connect.errors import ConfigException, DataException
from moldau.connect.transforms.parts import (
    KAFKA,
    Key,
    PartTransform,
    Value,
    fields_of,
    require_map,
    require_struct,
    struct_like,
)

PURPOSE = "field insertion"

CONFIG_DEF = (
    ConfigDef()
    .define("topic.field", ConfigType.STRING, None, Importance.MEDIUM,
            "Field name for Kafka topic. Suffix with ! to make this a required field, or ? to keep it optional.")
    .define("partition.field", ConfigType.STRING, None, Importance.MEDIUM,
            "Field name for Kafka partition. Suffix with ! or ? as for topic.field.")
    .define("offset.field", ConfigType.STRING, None, Importance.MEDIUM,
            "Field name for Kafka offset - only applicable to sink connectors. Suffix with ! or ?.")
    .define("timestamp.field", ConfigType.STRING, None, Importance.MEDIUM,
            "Field name for record timestamp. Suffix with ! or ?.")
    .define("static.field", ConfigType.STRING, None, Importance.MEDIUM,
            "Field name for static data field. Suffix with ! or ?.")
    .define("static.value", ConfigType.STRING, None, Importance.MEDIUM, "Static field value, if field name configured.")
)


@dataclass(frozen=True)
class InsertionSpec:
    name: str
    optional: bool

    @classmethod
    def parse(cls, spec: str | None) -> InsertionSpec | None:
        if not spec:
            return None
        if spec.endswith("!"):
            return cls(spec[:-1], False)
        return cls(spec.removesuffix("?"), True)


class InsertField(PartTransform):
    """Kafka's InsertField; use the `$Key`/`$Value` classes."""

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def setup(self, parsed: Mapping[str, Any]) -> None:
        self.topic = InsertionSpec.parse(parsed["topic.field"])
        self.partition = InsertionSpec.parse(parsed["partition.field"])
        self.offset = InsertionSpec.parse(parsed["offset.field"])
        self.timestamp = InsertionSpec.parse(parsed["timestamp.field"])
        self.static = InsertionSpec.parse(parsed["static.field"])
        self.static_value = parsed["static.value"]
        if self.static is not None and self.static_value is None:
            raise ConfigException("static.value", None, "No value specified for static field: " + self.static.name)

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        if value is None:  # a tombstone stays one
            return record
        schema = self.operating_schema(record)
        additions = self._additions(record)
        if schema is None:
            updated = require_map(value, PURPOSE)
            updated.update({name: v for name, _, v in additions})
            return self.new_record(record, None, updated)
        struct = require_struct(value, PURPOSE)
        new_schema = struct_like(schema, fields_of(schema) + [(name, s) for name, s, _ in additions])
        out = Struct(new_schema, struct.to_dict())
        for name, _, v in additions:
            out.put(name, v)
        return self.new_record(record, new_schema, out)

    def _additions(self, record: ConnectRecord) -> list[tuple[str, Schema, Any]]:
        out: list[tuple[str, Schema, Any]] = []
        if self.topic:
            out.append((self.topic.name, Schema(Type.STRING, optional=self.topic.optional), record.topic))
        if self.partition:
            out.append((self.partition.name, Schema(Type.INT32, optional=self.partition.optional),
                        record.kafka_partition))
        if self.offset:
            if not isinstance(record, SinkRecord):
                raise DataException("Only SinkRecord supported for [field insertion], found: "
                                    + type(record).__name__)
            out.append((self.offset.name, Schema(Type.INT64, optional=self.offset.optional), record.kafka_offset))
        if self.timestamp:
            out.append((self.timestamp.name, Schema(Type.INT64, optional=self.timestamp.optional,
                                                    name=TIMESTAMP_NAME, version=1), record.timestamp))
        if self.static:
            out.append((self.static.name, Schema(Type.STRING, optional=self.static.optional), self.static_value))
        return out


class InsertFieldKey(Key, InsertField):
    aliases = (KAFKA + "InsertField$Key", "InsertField$Key")


class InsertFieldValue(Value, InsertField):
    aliases = (KAFKA + "InsertField$Value", "InsertField$Value")
