"""The Connect data model: schemas and the values they describe, as Kafka Connect defines them.

A `Schema` has a `Type` (the eight primitive types, BYTES, and the containers ARRAY, MAP and STRUCT), may be
optional, may carry a default, a name and version (named schemas such as Debezium's envelopes, or the logical
types below), documentation and parameters. Values are plain Python values: ints, floats, bools, str, bytes,
lists, dicts, and `Struct` for STRUCT schemas. `SchemaBuilder` builds schemas fluently, as Kafka's does;
`validate_value` checks that a value fits a schema. Pure: no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from moldau.connect.errors import DataException

__all__ = [
    "BOOLEAN_SCHEMA", "BYTES_SCHEMA", "DATE_NAME", "DECIMAL_NAME", "FLOAT32_SCHEMA", "FLOAT64_SCHEMA",
    "INT8_SCHEMA", "INT16_SCHEMA", "INT32_SCHEMA", "INT64_SCHEMA", "OPTIONAL_BOOLEAN_SCHEMA",
    "OPTIONAL_BYTES_SCHEMA", "OPTIONAL_FLOAT32_SCHEMA", "OPTIONAL_FLOAT64_SCHEMA", "OPTIONAL_INT8_SCHEMA",
    "OPTIONAL_INT16_SCHEMA", "OPTIONAL_INT32_SCHEMA", "OPTIONAL_INT64_SCHEMA", "OPTIONAL_STRING_SCHEMA",
    "STRING_SCHEMA", "TIMESTAMP_NAME", "TIME_NAME", "Field", "Schema", "SchemaAndValue", "SchemaBuilder",
    "Struct", "Type", "java_text", "validate_value",
]


class Type(enum.Enum):
    """A schema's type; the value is the name JsonConverter's envelope uses (`"int32"`, `"struct"`, ...)."""

    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT32 = "float32"
    FLOAT64 = "float64"
    BOOLEAN = "boolean"
    STRING = "string"
    BYTES = "bytes"
    ARRAY = "array"
    MAP = "map"
    STRUCT = "struct"

    @property
    def is_primitive(self) -> bool:
        return self not in (Type.ARRAY, Type.MAP, Type.STRUCT)


# Kafka's logical types: a named schema over a primitive type.
DECIMAL_NAME = "org.apache.kafka.connect.data.Decimal"  # BYTES, parameter "scale"
DATE_NAME = "org.apache.kafka.connect.data.Date"  # INT32 days since the epoch
TIME_NAME = "org.apache.kafka.connect.data.Time"  # INT32 milliseconds since midnight
TIMESTAMP_NAME = "org.apache.kafka.connect.data.Timestamp"  # INT64 milliseconds since the epoch

_INT_RANGES = {Type.INT8: 8, Type.INT16: 16, Type.INT32: 32, Type.INT64: 64}


@dataclass(frozen=True)
class Field:
    """One field of a STRUCT schema: its name, position and schema."""

    name: str
    index: int
    schema: Schema


@dataclass(frozen=True)
class Schema:
    """A Connect schema. Immutable; build one directly or with `SchemaBuilder`."""

    type: Type
    optional: bool = False
    default: Any = None
    name: str | None = None
    version: int | None = None
    doc: str | None = None
    parameters: Mapping[str, str] | None = None
    fields: tuple[Field, ...] = ()
    key_schema: Schema | None = None  # MAP keys
    value_schema: Schema | None = None  # MAP values and ARRAY elements

    def __hash__(self) -> int:
        # Explicit, because parameters (a dict) and defaults (any value) need not be hashable; schemas are
        # used as cache keys by transforms.
        return hash((self.type, self.optional, self.name, self.version, self.fields, self.key_schema,
                     self.value_schema, tuple(sorted((self.parameters or {}).items()))))

    def field(self, name: str) -> Field | None:
        """The STRUCT field called `name`, or None."""
        if self.type is not Type.STRUCT:
            raise DataException(f"cannot look up field {name!r} in a non-struct schema ({self.type.value})")
        return next((f for f in self.fields if f.name == name), None)

    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]


def _primitive(type_: Type, optional: bool) -> Schema:
    return Schema(type_, optional=optional)


INT8_SCHEMA = _primitive(Type.INT8, False)
INT16_SCHEMA = _primitive(Type.INT16, False)
INT32_SCHEMA = _primitive(Type.INT32, False)
INT64_SCHEMA = _primitive(Type.INT64, False)
FLOAT32_SCHEMA = _primitive(Type.FLOAT32, False)
FLOAT64_SCHEMA = _primitive(Type.FLOAT64, False)
BOOLEAN_SCHEMA = _primitive(Type.BOOLEAN, False)
STRING_SCHEMA = _primitive(Type.STRING, False)
BYTES_SCHEMA = _primitive(Type.BYTES, False)
OPTIONAL_INT8_SCHEMA = _primitive(Type.INT8, True)
OPTIONAL_INT16_SCHEMA = _primitive(Type.INT16, True)
OPTIONAL_INT32_SCHEMA = _primitive(Type.INT32, True)
OPTIONAL_INT64_SCHEMA = _primitive(Type.INT64, True)
OPTIONAL_FLOAT32_SCHEMA = _primitive(Type.FLOAT32, True)
OPTIONAL_FLOAT64_SCHEMA = _primitive(Type.FLOAT64, True)
OPTIONAL_BOOLEAN_SCHEMA = _primitive(Type.BOOLEAN, True)
OPTIONAL_STRING_SCHEMA = _primitive(Type.STRING, True)
OPTIONAL_BYTES_SCHEMA = _primitive(Type.BYTES, True)


@dataclass
class SchemaBuilder:
    """Builds a `Schema` step by step: `SchemaBuilder.struct().name("x").field("id", INT32_SCHEMA).build()`."""

    type: Type
    _optional: bool = False
    _default: Any = None
    _name: str | None = None
    _version: int | None = None
    _doc: str | None = None
    _parameters: dict[str, str] = field(default_factory=dict)
    _fields: list[Field] = field(default_factory=list)
    _key_schema: Schema | None = None
    _value_schema: Schema | None = None

    @classmethod
    def of(cls, type_: Type) -> SchemaBuilder:
        return cls(type_)

    @classmethod
    def struct(cls) -> SchemaBuilder:
        return cls(Type.STRUCT)

    @classmethod
    def array(cls, element: Schema) -> SchemaBuilder:
        return cls(Type.ARRAY, _value_schema=element)

    @classmethod
    def map(cls, key: Schema, value: Schema) -> SchemaBuilder:
        return cls(Type.MAP, _key_schema=key, _value_schema=value)

    def optional(self) -> SchemaBuilder:
        self._optional = True
        return self

    def default_value(self, value: Any) -> SchemaBuilder:
        self._default = value
        return self

    def name(self, name: str) -> SchemaBuilder:
        self._name = name
        return self

    def version(self, version: int) -> SchemaBuilder:
        self._version = version
        return self

    def doc(self, doc: str) -> SchemaBuilder:
        self._doc = doc
        return self

    def parameter(self, key: str, value: str) -> SchemaBuilder:
        self._parameters[key] = value
        return self

    def field(self, name: str, schema: Schema) -> SchemaBuilder:
        if self.type is not Type.STRUCT:
            raise DataException("only struct schemas have fields")
        if any(f.name == name for f in self._fields):
            raise DataException(f"duplicate field {name!r}")
        self._fields.append(Field(name, len(self._fields), schema))
        return self

    def build(self) -> Schema:
        schema = Schema(self.type, self._optional, None, self._name, self._version, self._doc,
                        dict(self._parameters) or None, tuple(self._fields), self._key_schema, self._value_schema)
        if self._default is not None:
            validate_value(schema, self._default)
            schema = Schema(**{**schema.__dict__, "default": self._default})
        return schema


class Struct:
    """A STRUCT value: field values by name, checked against the schema on `put` and `validate`."""

    __slots__ = ("_values", "schema")

    def __init__(self, schema: Schema, values: Mapping[str, Any] | None = None) -> None:
        if schema.type is not Type.STRUCT:
            raise DataException(f"a Struct needs a struct schema, not {schema.type.value}")
        self.schema = schema
        self._values: dict[str, Any] = {}
        for name, value in (values or {}).items():
            self.put(name, value)

    def _field(self, name: str) -> Field:
        found = self.schema.field(name)
        if found is None:
            raise DataException(f"{name!r} is not a field of {self.schema.name or 'the struct'}")
        return found

    def put(self, name: str, value: Any) -> Struct:
        validate_value(self._field(name).schema, value, name)
        self._values[name] = value
        return self

    def get(self, name: str) -> Any:
        """The field's value, else its schema's default (None for an unset optional field)."""
        field_ = self._field(name)
        return self._values.get(name, field_.schema.default)

    def __getitem__(self, name: str) -> Any:
        return self.get(name)

    def validate(self) -> None:
        """Raise DataException unless every required field is set (or has a default) and fits its schema."""
        for field_ in self.schema.fields:
            validate_value(field_.schema, self.get(field_.name), field_.name)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: self.get(f.name) for f in self.schema.fields}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Struct) and other.schema == self.schema and other.to_dict() == self.to_dict()

    def __hash__(self) -> int:
        return hash((self.schema.name, tuple(sorted(self._values))))

    def __repr__(self) -> str:
        return f"Struct{{{', '.join(f'{k}={v!r}' for k, v in self.to_dict().items())}}}"

    def __str__(self) -> str:
        return java_text(self)


@dataclass(frozen=True)
class SchemaAndValue:
    """What a converter reads: the value and its schema (None when the format carries none)."""

    schema: Schema | None
    value: Any


def java_text(value: Any) -> str:
    """`value` as Kafka Connect's Java objects print themselves (`toString()`), for sinks that write values as
    text (FileStreamSink): files written by Kafka's connectors and by Moldau's then read the same.

    Struct{a=1,b=x} skips null fields; maps print as {k=v, k2=v2}, lists as [a, b], booleans and null as Java
    spells them; bytes, which Java would print as an object address, are decoded as UTF-8 instead."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Struct):
        fields = (f"{name}={java_text(v)}" for name, v in value.to_dict().items() if v is not None)
        return "Struct{" + ",".join(fields) + "}"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{java_text(k)}={java_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(java_text(v) for v in value) + "]"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)


def validate_value(schema: Schema | None, value: Any, where: str = "value") -> None:
    """Raise DataException unless `value` fits `schema` (anything fits no schema)."""
    if schema is None:
        return
    if value is None:
        if schema.optional or schema.default is not None:
            return
        raise DataException(f"{where}: a null value for a required {schema.type.value} schema")
    _CHECKS[schema.type](schema, value, where)


def _check_int(schema: Schema, value: Any, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DataException(f"{where}: {type(value).__name__} is not an {schema.type.value}")
    bits = _INT_RANGES[schema.type]
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise DataException(f"{where}: {value} is out of range for {schema.type.value}")


def _check_float(schema: Schema, value: Any, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DataException(f"{where}: {type(value).__name__} is not a {schema.type.value}")


def _check_type(expected: type | tuple[type, ...]) -> Any:
    def check(schema: Schema, value: Any, where: str) -> None:
        if not isinstance(value, expected) or (expected is not bool and isinstance(value, bool)):
            raise DataException(f"{where}: {type(value).__name__} is not a {schema.type.value}")
    return check


def _check_bytes(schema: Schema, value: Any, where: str) -> None:
    # Kafka's Decimal logical type holds a decimal.Decimal in a BYTES schema.
    if schema.name == DECIMAL_NAME:
        import decimal
        if isinstance(value, decimal.Decimal):
            return
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise DataException(f"{where}: {type(value).__name__} is not bytes")


def _check_array(schema: Schema, value: Any, where: str) -> None:
    if not isinstance(value, (list, tuple)):
        raise DataException(f"{where}: {type(value).__name__} is not an array")
    for index, item in enumerate(value):
        validate_value(schema.value_schema, item, f"{where}[{index}]")


def _check_map(schema: Schema, value: Any, where: str) -> None:
    if not isinstance(value, Mapping):
        raise DataException(f"{where}: {type(value).__name__} is not a map")
    for key, item in value.items():
        validate_value(schema.key_schema, key, f"{where} key")
        validate_value(schema.value_schema, item, f"{where}[{key!r}]")


def _check_struct(schema: Schema, value: Any, where: str) -> None:
    if not isinstance(value, Struct):
        raise DataException(f"{where}: {type(value).__name__} is not a Struct")
    if value.schema != schema:
        raise DataException(f"{where}: the struct's schema is not the field's schema")
    value.validate()


_CHECKS = {
    Type.INT8: _check_int, Type.INT16: _check_int, Type.INT32: _check_int, Type.INT64: _check_int,
    Type.FLOAT32: _check_float, Type.FLOAT64: _check_float, Type.BOOLEAN: _check_type(bool),
    Type.STRING: _check_type(str), Type.BYTES: _check_bytes, Type.ARRAY: _check_array, Type.MAP: _check_map,
    Type.STRUCT: _check_struct,
}
