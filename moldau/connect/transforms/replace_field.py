"""ReplaceField: keep only `include`d fields, drop `exclude`d ones, and rename (`renames=old:new,...`) the
fields of a Struct or map key/value."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from moldau.connect.api import ConnectRecord
from moldau.connect.config import ConfigDef, ConfigType, Importance
from moldau.connect.data import Struct
from moldau.connect.errors import ConfigException
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

PURPOSE = "field replacement"


def _renames(name: str, value: Any) -> None:
    for pair in value or []:
        parts = pair.split(":")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise ConfigException(name, value, f"Invalid rename mapping: {pair}")


CONFIG_DEF = (
    ConfigDef()
    .define("exclude", ConfigType.LIST, [], Importance.MEDIUM,
            "Fields to exclude. This takes precedence over the fields to include.")
    .define("include", ConfigType.LIST, [], Importance.MEDIUM,
            "Fields to include. If specified, only these fields will be used.")
    .define("renames", ConfigType.LIST, [], Importance.MEDIUM,
            "Field rename mappings, as a list of old:new pairs.", validator=_renames)
)


class ReplaceField(PartTransform):
    """Kafka's ReplaceField; use the `$Key`/`$Value` classes."""

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def setup(self, parsed: Mapping[str, Any]) -> None:
        self.exclude = set(parsed["exclude"])
        self.include = set(parsed["include"])
        self.renames: dict[str, str] = {old: new for old, new in (p.split(":") for p in parsed["renames"])}

    def _keeps(self, name: str) -> bool:
        return name not in self.exclude and (not self.include or name in self.include)

    def _renamed(self, name: str) -> str:
        return self.renames.get(name, name)

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        if schema is None:
            source = require_map(value, PURPOSE)
            return self.new_record(record, None, {self._renamed(k): v for k, v in source.items() if self._keeps(k)})
        struct = require_struct(value, PURPOSE)
        kept = [(name, s) for name, s in fields_of(schema) if self._keeps(name)]
        new_schema = struct_like(schema, [(self._renamed(name), s) for name, s in kept])
        out = Struct(new_schema, {self._renamed(name): struct.get(name) for name, _ in kept})
        return self.new_record(record, new_schema, out)


class ReplaceFieldKey(Key, ReplaceField):
    aliases = (KAFKA + "ReplaceField$Key", "ReplaceField$Key")


class ReplaceFieldValue(Value, ReplaceField):
    aliases = (KAFKA + "ReplaceField$Value", "ReplaceField$Value")
