"""Single message transforms: Kafka's options and behaviours, with and without schemas, and their errors."""

from __future__ import annotations

import decimal
from typing import Any

import pytest

from moldau.connect.api import Header, SinkRecord, SourceRecord, Transformation
from moldau.connect.data import (
    DATE_NAME,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    TIMESTAMP_NAME,
    Schema,
    SchemaBuilder,
    Struct,
    Type,
)
from moldau.connect.errors import ConfigException, DataException
from moldau.connect.transforms.cast import CastKey, CastValue
from moldau.connect.transforms.fields import ExtractFieldKey, ExtractFieldValue, HoistFieldValue, ValueToKey
from moldau.connect.transforms.flatten import FlattenValue
from moldau.connect.transforms.insert_field import InsertFieldValue
from moldau.connect.transforms.mask_field import MaskFieldValue
from moldau.connect.transforms.replace_field import ReplaceFieldValue
from moldau.connect.transforms.routers import RegexRouter, TimestampRouter
from moldau.connect.transforms.timestamp_converter import TimestampConverterValue

PERSON = (SchemaBuilder.struct().name("person").field("id", INT32_SCHEMA).field("name", OPTIONAL_STRING_SCHEMA)
          .field("age", INT64_SCHEMA).build())


def make(cls: type[Transformation[Any]], **configs: str) -> Transformation[Any]:
    t = cls()
    t.configure(configs)
    return t


def person(id_: int = 1, name: str | None = "ada", age: int = 36) -> Struct:
    return Struct(PERSON, {"id": id_, "name": name, "age": age})


def source(value: Any, schema: Schema | None = None, **kw: Any) -> SourceRecord:
    return SourceRecord(topic=kw.pop("topic", "people"), kafka_partition=2, value_schema=schema, value=value,
                        timestamp=kw.pop("timestamp", 1_700_000_000_123), **kw)


def test_insert_field_with_schema_and_without() -> None:
    t = make(InsertFieldValue, **{"topic.field": "t!", "partition.field": "p", "timestamp.field": "ts",
                                  "static.field": "origin", "static.value": "db1"})
    out = t.apply(source(person(), PERSON))
    assert out is not None and out.value_schema is not None
    assert out.value.to_dict() == {"id": 1, "name": "ada", "age": 36, "t": "people", "p": 2,
                                   "ts": 1_700_000_000_123, "origin": "db1"}
    t_field = out.value_schema.field("t")
    ts_field = out.value_schema.field("ts")
    assert t_field is not None and not t_field.schema.optional
    assert ts_field is not None and ts_field.schema.name == TIMESTAMP_NAME and ts_field.schema.optional
    assert out.value_schema.name == "person"
    plain = t.apply(source({"a": 1}))
    assert plain is not None and plain.value == {"a": 1, "t": "people", "p": 2, "ts": 1_700_000_000_123,
                                                 "origin": "db1"}
    assert t.apply(source(None)) == source(None)


def test_insert_field_offset_needs_sink_records_and_static_value() -> None:
    t = make(InsertFieldValue, **{"offset.field": "off"})
    sink = SinkRecord(topic="t", kafka_partition=0, value={"a": 1}, kafka_offset=42)
    out = t.apply(sink)
    assert out is not None and out.value == {"a": 1, "off": 42} and isinstance(out, SinkRecord)
    with pytest.raises(DataException, match="Only SinkRecord supported"):
        t.apply(source({"a": 1}))
    with pytest.raises(ConfigException, match=r"static\.value"):
        make(InsertFieldValue, **{"static.field": "s"})
    with pytest.raises(DataException, match=r"Only Map objects supported in absence of schema for \[field insertion\]"):
        t.apply(SinkRecord(topic="t", value="text"))


def test_replace_field() -> None:
    t = make(ReplaceFieldValue, exclude="age", renames="name:full_name,id:key")
    out = t.apply(source(person(), PERSON))
    assert out is not None and out.value_schema is not None
    assert out.value_schema.field_names() == ["key", "full_name"]
    assert out.value.to_dict() == {"key": 1, "full_name": "ada"}
    only = make(ReplaceFieldValue, include="id,age").apply(source({"id": 1, "name": "x", "age": 2}))
    assert only is not None and only.value == {"id": 1, "age": 2}
    with pytest.raises(ConfigException, match=r"renames.*Invalid rename mapping: name"):
        make(ReplaceFieldValue, renames="name")


def test_mask_field() -> None:
    out = make(MaskFieldValue, fields="name,age").apply(source(person(), PERSON))
    assert out is not None and out.value.to_dict() == {"id": 1, "name": "", "age": 0}
    out = make(MaskFieldValue, fields="age", replacement="99").apply(source({"age": 5, "b": [1]}))
    assert out is not None and out.value == {"age": 99, "b": [1]}
    out = make(MaskFieldValue, fields="b,d").apply(source({"b": [1], "d": decimal.Decimal("2.5")}))
    assert out is not None and out.value == {"b": [], "d": decimal.Decimal(0)}
    with pytest.raises(DataException, match="Unable to convert abc"):
        make(MaskFieldValue, fields="age", replacement="abc").apply(source({"age": 5}))
    with pytest.raises(DataException, match="Cannot mask value of type list with custom replacement"):
        make(MaskFieldValue, fields="b", replacement="x").apply(source({"b": [1]}))
    with pytest.raises(ConfigException, match="fields"):
        make(MaskFieldValue)


def test_value_to_key_then_extract_field() -> None:
    rec = make(ValueToKey, fields="id").apply(source(person(7), PERSON))
    assert rec is not None and rec.key_schema is not None and rec.key.to_dict() == {"id": 7}
    rec = make(ExtractFieldKey, field="id").apply(rec)
    assert rec is not None and rec.key == 7 and rec.key_schema == INT32_SCHEMA
    plain = make(ValueToKey, fields="a,b").apply(source({"a": 1, "b": 2, "c": 3}))
    assert plain is not None and plain.key == {"a": 1, "b": 2}
    with pytest.raises(DataException, match="Field does not exist: nope"):
        make(ValueToKey, fields="nope").apply(source(person(), PERSON))
    with pytest.raises(DataException, match="Unknown field: nope"):
        make(ExtractFieldValue, field="nope").apply(source(person(), PERSON))
    missing = make(ExtractFieldValue, field="nope").apply(source({"a": 1}))
    assert missing is not None and missing.value is None


def test_hoist_field() -> None:
    out = make(HoistFieldValue, field="line").apply(source("hello", STRING_SCHEMA))
    assert out is not None and out.value_schema is not None
    assert out.value.to_dict() == {"line": "hello"} and out.value_schema.field_names() == ["line"]
    plain = make(HoistFieldValue, field="line").apply(source("hello"))
    assert plain is not None and plain.value == {"line": "hello"}


def test_cast() -> None:
    out = make(CastValue, spec="id:string,age:int8").apply(source(person(age=300), PERSON))
    assert out is not None and out.value_schema is not None
    assert out.value.to_dict() == {"id": "1", "name": "ada", "age": 44}  # Java's narrowing keeps the low bits
    id_field = out.value_schema.field("id")
    assert id_field is not None and id_field.schema.type is Type.STRING
    whole = make(CastKey, spec="int64").apply(source(None).new_record(key_schema=STRING_SCHEMA, key="12"))
    assert whole is not None and whole.key == 12 and whole.key_schema == INT64_SCHEMA
    plain = make(CastValue, spec="a:float64,b:boolean,c:string").apply(source({"a": "1.5", "b": 0, "c": True}))
    assert plain is not None and plain.value == {"a": 1.5, "b": False, "c": "true"}
    with pytest.raises(ConfigException, match=r"spec.*Invalid type found in casting: int128"):
        make(CastValue, spec="a:int128")
    with pytest.raises(DataException, match="not a number"):
        make(CastValue, spec="a:int32").apply(source({"a": "x"}))
    nested = SchemaBuilder.struct().field("s", PERSON).build()
    with pytest.raises(DataException, match="does not support casting from STRUCT"):
        make(CastValue, spec="s:string").apply(source(Struct(nested, {"s": person()}), nested))


def test_timestamp_converter() -> None:
    schema = SchemaBuilder.struct().field("at", INT64_SCHEMA).build()
    to_string = make(TimestampConverterValue, field="at", **{"target.type": "string",
                                                             "format": "yyyy-MM-dd'T'HH:mm:ss.SSS"})
    out = to_string.apply(source(Struct(schema, {"at": 1_700_000_000_123}), schema))
    assert out is not None and out.value.get("at") == "2023-11-14T22:13:20.123"
    to_date = make(TimestampConverterValue, **{"target.type": "Date", "format": "yyyy-MM-dd"})
    out = to_date.apply(source("2023-11-14"))
    assert out is not None and out.value == 19675
    whole = to_date.apply(source("2023-11-14", STRING_SCHEMA))
    assert whole is not None and whole.value_schema is not None and whole.value_schema.name == DATE_NAME
    seconds = make(TimestampConverterValue, field="at", **{"target.type": "Timestamp", "unix.precision": "seconds"})
    out = seconds.apply(source({"at": 1_700_000_000}))  # unix input is read in unix.precision too
    assert out is not None and out.value == {"at": 1_700_000_000_000}
    micros = make(TimestampConverterValue, **{"target.type": "unix", "unix.precision": "microseconds"})
    out = micros.apply(source(5, Schema(Type.INT64, name=TIMESTAMP_NAME, version=1)))
    assert out is not None and out.value == 5000 and out.value_schema == INT64_SCHEMA
    with pytest.raises(ConfigException, match="format"):
        make(TimestampConverterValue, **{"target.type": "string"})
    with pytest.raises(ConfigException, match="Unknown timestamp type in TimestampConverter: decade"):
        make(TimestampConverterValue, **{"target.type": "decade"})
    with pytest.raises(DataException, match="Could not parse timestamp"):
        to_date.apply(source("14/11/2023"))


def test_regex_router() -> None:
    t = make(RegexRouter, regex=r"db\.(\w+)\.(\w+)", replacement="$2_from_$1")
    out = t.apply(source({}, topic="db.public.users"))
    assert out is not None and out.topic == "users_from_public"
    untouched = t.apply(source({}, topic="other"))
    assert untouched is not None and untouched.topic == "other"
    with pytest.raises(ConfigException, match="regex"):
        make(RegexRouter, regex="(", replacement="x")
    with pytest.raises(ConfigException, match="replacement"):
        make(RegexRouter, regex="a")


def test_timestamp_router() -> None:
    out = make(TimestampRouter).apply(source({}))
    assert out is not None and out.topic == "people-20231114"
    custom = make(TimestampRouter, **{"topic.format": "${timestamp}/${topic}", "timestamp.format": "yyyy-MM"})
    out = custom.apply(source({}))
    assert out is not None and out.topic == "2023-11/people"
    with pytest.raises(DataException, match="Timestamp missing on record"):
        make(TimestampRouter).apply(SourceRecord(topic="t", value={}))


def test_flatten() -> None:
    inner = SchemaBuilder.struct().field("city", STRING_SCHEMA).optional().build()
    outer = SchemaBuilder.struct().name("o").field("id", INT32_SCHEMA).field("addr", inner).build()
    out = make(FlattenValue, delimiter="_").apply(
        source(Struct(outer, {"id": 1, "addr": Struct(inner, {"city": "Prague"})}), outer))
    assert out is not None and out.value_schema is not None
    assert out.value.to_dict() == {"id": 1, "addr_city": "Prague"}
    city = out.value_schema.field("addr_city")
    assert city is not None and city.schema.optional  # under an optional struct
    absent = make(FlattenValue).apply(source(Struct(outer, {"id": 2, "addr": None}), outer))
    assert absent is not None and absent.value.to_dict() == {"id": 2, "addr.city": None}
    plain = make(FlattenValue).apply(source({"a": {"b": {"c": 1}, "d": [1]}, "e": 2}))
    assert plain is not None and plain.value == {"a.b.c": 1, "a.d": [1], "e": 2}


def test_headers_survive_and_records_keep_their_class() -> None:
    rec = source({"a": 1}, headers=(Header("h", "v"),))
    out = make(HoistFieldValue, field="x").apply(rec)
    assert isinstance(out, SourceRecord) and out.headers == (Header("h", "v"),)
