"""Connect struct schemas and values <-> Protobuf (proto3) messages, mapped as Confluent's ProtobufConverter
maps them with `optional.for.nullables`: a struct is a message (named after the Connect schema; the part before
the last dot is the package; unnamed: `ConnectDefault1`, ...), field numbers are positions + 1, INT8/INT16/INT32
are `int32`, INT64 `int64`, FLOAT32 `float`, FLOAT64 `double`, BOOLEAN `bool`, STRING `string`, BYTES `bytes`,
arrays `repeated`, maps `map<K, V>` (keys of an integer, boolean or string type), nested structs nested
messages, and optional primitives proto3 `optional` fields. Read back, every field is optional (proto3 has no
required fields), as Confluent reads it. Logical types are written as their physical types; Decimal is not
supported. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2  # type: ignore[import-untyped]

from moldau.connect.data import DECIMAL_NAME, Field, Schema, Struct, Type
from moldau.connect.errors import DataException

FDP = descriptor_pb2.FieldDescriptorProto
DEFAULT_NAME = "ConnectDefault"
_SCALARS = {Type.INT8: FDP.TYPE_INT32, Type.INT16: FDP.TYPE_INT32, Type.INT32: FDP.TYPE_INT32,
            Type.INT64: FDP.TYPE_INT64, Type.FLOAT32: FDP.TYPE_FLOAT, Type.FLOAT64: FDP.TYPE_DOUBLE,
            Type.BOOLEAN: FDP.TYPE_BOOL, Type.STRING: FDP.TYPE_STRING, Type.BYTES: FDP.TYPE_BYTES}
_MAP_KEYS = (Type.INT8, Type.INT16, Type.INT32, Type.INT64, Type.BOOLEAN, Type.STRING)


class _Names:
    def __init__(self) -> None:
        self.count = 0

    def next(self) -> str:
        self.count += 1
        return f"{DEFAULT_NAME}{self.count}"


def to_file_descriptor(schema: Schema, file_name: str = "connect.proto") -> tuple[Any, str]:
    """A proto3 FileDescriptorProto for a struct schema, and the full name of its message."""
    if schema.type is not Type.STRUCT:
        raise DataException(f"ProtobufConverter writes struct schemas only, not {schema.type.value}")
    names = _Names()
    package, _, name = (schema.name or "").rpartition(".")
    file = descriptor_pb2.FileDescriptorProto(name=file_name, syntax="proto3", package=package)
    file.message_type.append(_message(schema, name or names.next(), names))
    return file, f"{package}.{file.message_type[0].name}" if package else file.message_type[0].name


def _message(schema: Schema, name: str, names: _Names) -> Any:
    message = descriptor_pb2.DescriptorProto(name=name)
    for field in schema.fields:
        _add_field(message, field, names)
    return message


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def _add_field(message: Any, field: Field, names: _Names) -> None:
    s = field.schema
    proto = message.field.add(name=field.name, number=field.index + 1, label=FDP.LABEL_OPTIONAL)
    if s.name == DECIMAL_NAME:
        raise DataException(f"field {field.name}: Decimal is not supported by the ProtobufConverter")
    if s.type is Type.ARRAY:
        assert s.value_schema is not None
        proto.label = FDP.LABEL_REPEATED
        _set_type(message, proto, s.value_schema, field.name, names)
    elif s.type is Type.MAP:
        assert s.key_schema is not None and s.value_schema is not None
        if s.key_schema.type not in _MAP_KEYS:
            raise DataException(f"field {field.name}: Protobuf map keys cannot be {s.key_schema.type.value}")
        entry = descriptor_pb2.DescriptorProto(name=_camel(field.name) + "Entry")
        entry.options.map_entry = True
        entry.field.add(name="key", number=1, label=FDP.LABEL_OPTIONAL, type=_SCALARS[s.key_schema.type])
        value = entry.field.add(name="value", number=2, label=FDP.LABEL_OPTIONAL)
        _set_type(entry, value, s.value_schema, "value", names, nested_in=message)
        message.nested_type.append(entry)
        proto.label = FDP.LABEL_REPEATED
        proto.type = FDP.TYPE_MESSAGE
        proto.type_name = entry.name
    else:
        _set_type(message, proto, s, field.name, names)
        if s.optional and s.type is not Type.STRUCT:
            # proto3 `optional`: presence is tracked, so null reads back as null rather than as 0 or "".
            proto.proto3_optional = True
            proto.oneof_index = len(message.oneof_decl)
            message.oneof_decl.add(name=f"_{field.name}")


def _set_type(message: Any, proto: Any, schema: Schema, field_name: str, names: _Names,
              nested_in: Any = None) -> None:
    if schema.type in _SCALARS:
        proto.type = _SCALARS[schema.type]
        return
    if schema.type is not Type.STRUCT:
        raise DataException(f"field {field_name}: Protobuf cannot hold a {schema.type.value} inside an array or map")
    owner = nested_in if nested_in is not None else message
    nested_name = (schema.name or "").rpartition(".")[2] or names.next()
    if all(n.name != nested_name for n in owner.nested_type):
        owner.nested_type.append(_message(schema, nested_name, names))
    proto.type = FDP.TYPE_MESSAGE
    proto.type_name = nested_name


def fill_message(message: Any, schema: Schema, struct: Struct) -> Any:
    """Set the fields of a (dynamic) message from a Struct of `schema`."""
    for field in schema.fields:
        value = struct.get(field.name)
        if value is None:
            continue
        s = field.schema
        if s.type is Type.STRUCT:
            fill_message(getattr(message, field.name), s, value)
        elif s.type is Type.ARRAY:
            _fill_repeated(getattr(message, field.name), s, value, field.name)
        elif s.type is Type.MAP:
            assert s.value_schema is not None
            target = getattr(message, field.name)
            for k, v in value.items():
                if v is None:
                    raise DataException(f"field {field.name}: Protobuf maps cannot hold null values")
                if s.value_schema.type is Type.STRUCT:
                    fill_message(target[k], s.value_schema, v)
                else:
                    target[k] = v
        else:
            setattr(message, field.name, bytes(value) if s.type is Type.BYTES else value)
    return message


def _fill_repeated(target: Any, schema: Schema, items: list[Any], name: str) -> None:
    assert schema.value_schema is not None
    for item in items:
        if item is None:
            raise DataException(f"field {name}: Protobuf repeated fields cannot hold null items")
        if schema.value_schema.type is Type.STRUCT:
            fill_message(target.add(), schema.value_schema, item)
        else:
            target.append(item)


# Protobuf -> Connect

_FROM_PROTO = {FDP.TYPE_INT32: Type.INT32, FDP.TYPE_SINT32: Type.INT32, FDP.TYPE_SFIXED32: Type.INT32,
               FDP.TYPE_UINT32: Type.INT64, FDP.TYPE_FIXED32: Type.INT64, FDP.TYPE_INT64: Type.INT64,
               FDP.TYPE_SINT64: Type.INT64, FDP.TYPE_SFIXED64: Type.INT64, FDP.TYPE_UINT64: Type.INT64,
               FDP.TYPE_FIXED64: Type.INT64, FDP.TYPE_FLOAT: Type.FLOAT32, FDP.TYPE_DOUBLE: Type.FLOAT64,
               FDP.TYPE_BOOL: Type.BOOLEAN, FDP.TYPE_STRING: Type.STRING, FDP.TYPE_BYTES: Type.BYTES,
               FDP.TYPE_ENUM: Type.STRING}


def to_connect_schema(descriptor: Any, optional: bool = False) -> Schema:
    """The Connect struct schema of a message descriptor (every field optional, as Confluent reads proto3)."""
    fields = tuple(Field(f.name, i, _field_schema(f)) for i, f in enumerate(descriptor.fields))
    return Schema(Type.STRUCT, optional=optional, name=descriptor.full_name, fields=fields)


def _field_schema(field: Any) -> Schema:
    if _is_map(field):
        key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
        return Schema(Type.MAP, optional=True, key_schema=_single(key, optional=False),
                      value_schema=_single(value, optional=value.message_type is not None))
    if _is_repeated(field):
        return Schema(Type.ARRAY, optional=True, value_schema=_single(field, optional=False))
    return _single(field, optional=True)


def _single(field: Any, optional: bool) -> Schema:
    if field.type == FDP.TYPE_MESSAGE:
        return to_connect_schema(field.message_type, optional=optional)
    if field.type not in _FROM_PROTO:
        raise DataException(f"field {field.name}: Protobuf type {field.type} is not supported")
    return Schema(_FROM_PROTO[field.type], optional=optional)


def _is_repeated(field: Any) -> bool:
    return bool(field.is_repeated)


def _is_map(field: Any) -> bool:
    return _is_repeated(field) and field.message_type is not None and field.message_type.GetOptions().map_entry


def to_connect_value(schema: Schema, message: Any) -> Struct:
    """The Struct of a decoded message (unset fields with presence are null)."""
    values: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        s = schema.field(field.name)
        assert s is not None
        raw = getattr(message, field.name)
        if _is_map(field):
            assert s.schema.value_schema is not None
            values[field.name] = {k: _single_value(s.schema.value_schema, field.message_type.fields_by_name["value"],
                                                   v) for k, v in raw.items()}
        elif _is_repeated(field):
            assert s.schema.value_schema is not None
            values[field.name] = [_single_value(s.schema.value_schema, field, v) for v in raw]
        elif field.has_presence and not message.HasField(field.name):
            values[field.name] = None
        else:
            values[field.name] = _single_value(s.schema, field, raw)
    return Struct(schema, values)


def _single_value(schema: Schema, field: Any, raw: Any) -> Any:
    if field.type == FDP.TYPE_MESSAGE:
        return to_connect_value(schema, raw)
    if field.type == FDP.TYPE_ENUM:
        return field.enum_type.values_by_number[raw].name if raw in field.enum_type.values_by_number else str(raw)
    return raw
