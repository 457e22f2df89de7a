"""JsonConverter: Kafka's envelope and schema JSON, schemaless JSON, logical types, tombstones, errors."""

from __future__ import annotations

import decimal
import json
from typing import Any

import pytest

from moldau.connect.converters.json import JsonConverter
from moldau.connect.converters.logical import decimal_schema
from moldau.connect.data import (
    DATE_NAME,
    TIME_NAME,
    TIMESTAMP_NAME,
    Schema,
    SchemaAndValue,
    SchemaBuilder,
    Struct,
    Type,
)
from moldau.connect.errors import ConfigException as ConfigError
from moldau.connect.errors import DataException as DataError


def pair(sv: SchemaAndValue) -> tuple[Schema | None, Any]:
    return sv.schema, sv.value


def primitive(t: Type, optional: bool = False, **kw: object) -> Schema:
    return Schema(t, optional=optional, **kw)  # type: ignore[arg-type]


def array(items: Schema) -> Schema:
    return SchemaBuilder.array(items).build()


def map_of(keys: Schema, values: Schema) -> Schema:
    return SchemaBuilder.map(keys, values).build()


def struct(fields: list[tuple[str, Schema]], name: str | None = None, version: int | None = None) -> Schema:
    builder = SchemaBuilder.struct()
    for n, s in fields:
        builder.field(n, s)
    if name:
        builder.name(name)
    if version:
        builder.version(version)
    return builder.build()


def date_schema() -> Schema:
    return Schema(Type.INT32, name=DATE_NAME, version=1)


def time_schema() -> Schema:
    return Schema(Type.INT32, name=TIME_NAME, version=1)


def timestamp_schema() -> Schema:
    return Schema(Type.INT64, name=TIMESTAMP_NAME, version=1)


def conv(**configs: str) -> JsonConverter:
    c = JsonConverter()
    c.configure(configs, False)
    return c


PERSON = struct([("id", primitive(Type.INT32)), ("name", primitive(Type.STRING, optional=True))], name="person",
                version=2)


def test_struct_envelope_is_written_as_kafka_does() -> None:
    data = conv().from_connect_data("t", PERSON, Struct(PERSON, {"id": 7, "name": "ada"}))
    assert data == (
        b'{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},'
        b'{"type":"string","optional":true,"field":"name"}],"optional":false,"name":"person","version":2},'
        b'"payload":{"id":7,"name":"ada"}}'
    )
    schema, value = pair(conv().to_connect_data("t", data))
    assert schema == PERSON
    assert value == Struct(PERSON, {"id": 7, "name": "ada"})


def test_reads_what_kafka_writes_for_arrays_maps_and_bytes() -> None:
    text = (b'{"schema":{"type":"struct","optional":false,"fields":['
            b'{"type":"array","items":{"type":"int64","optional":false},"optional":false,"field":"a"},'
            b'{"type":"map","keys":{"type":"int32","optional":false},"values":{"type":"string","optional":false},'
            b'"optional":false,"field":"m"},{"type":"bytes","optional":false,"field":"b"}]},'
            b'"payload":{"a":[1,2],"m":[[1,"x"]],"b":"AAE="}}')
    schema, value = pair(conv().to_connect_data("t", text))
    assert schema is not None and value.get("a") == [1, 2]
    assert value.get("m") == {1: "x"}
    assert value.get("b") == b"\x00\x01"
    assert conv().from_connect_data("t", schema, value) == text.replace(b'"optional":false,"fields"', b'"fields"') \
        .replace(b'}]},"payload"', b'}],"optional":false},"payload"')


def test_logical_types() -> None:
    s = struct([("d", decimal_schema(2)), ("day", date_schema()), ("t", time_schema()), ("ts", timestamp_schema())])
    v = Struct(s, {"d": decimal.Decimal("-1.25"), "day": 2, "t": 1005, "ts": 2000})
    data = conv().from_connect_data("t", s, v)
    assert data is not None
    payload = json.loads(data)["payload"]
    assert payload == {"d": "gw==", "day": 2, "t": 1005, "ts": 2000}
    fields = json.loads(data)["schema"]["fields"]
    assert fields[0]["name"] == "org.apache.kafka.connect.data.Decimal"
    assert fields[0]["parameters"] == {"scale": "2"}
    assert conv().to_connect_data("t", data) == SchemaAndValue(s, v)


def test_numeric_decimals_keep_their_digits() -> None:
    s = decimal_schema(3)
    c = conv(**{"decimal.format": "NUMERIC"})
    data = c.from_connect_data("t", s, decimal.Decimal("12345678901234567.891"))
    assert data is not None and data.endswith(b'"payload":12345678901234567.891}')
    assert c.to_connect_data("t", data) == SchemaAndValue(s, decimal.Decimal("12345678901234567.891"))


def test_schemaless_plain_json() -> None:
    c = conv(**{"schemas.enable": "false"})
    assert c.from_connect_data("t", None, {"a": [1, 2.5, None], "b": True}) == b'{"a":[1,2.5,null],"b":true}'
    expected = SchemaAndValue(None, {"a": [1, 2.5, None], "b": True})
    assert c.to_connect_data("t", b'{"a":[1,2.5,null],"b":true}') == expected


def test_schemaless_value_in_envelope() -> None:
    data = conv().from_connect_data("t", None, {"k": "v"})
    assert data == b'{"schema":null,"payload":{"k":"v"}}'
    assert conv().to_connect_data("t", data) == SchemaAndValue(None, {"k": "v"})


def test_tombstones_stay_null() -> None:
    assert conv().from_connect_data("t", None, None) is None
    assert conv().to_connect_data("t", None) == SchemaAndValue(None, None)
    assert conv().to_connect_data("t", b'{"schema":null,"payload":null}') == SchemaAndValue(None, None)
    optional = primitive(Type.STRING, optional=True)
    assert conv().from_connect_data("t", optional, None) == b'{"schema":{"type":"string","optional":true},' \
        b'"payload":null}'


def test_defaults_replace_nulls() -> None:
    s = primitive(Type.INT32, default=5)
    assert conv().to_connect_data("t", b'{"schema":{"type":"int32","optional":false,"default":5},"payload":null}') \
        == SchemaAndValue(s, 5)


def test_errors_name_the_problem() -> None:
    with pytest.raises(DataError, match="requires \"schema\" and \"payload\""):
        conv().to_connect_data("t", b'{"a":1}')
    with pytest.raises(DataError, match="serialization error"):
        conv().to_connect_data("t", b"{nope")
    with pytest.raises(DataError, match="Unknown schema type: int128"):
        conv().to_connect_data("t", b'{"schema":{"type":"int128"},"payload":1}')
    with pytest.raises(DataError, match="Invalid null value for required INT32 field"):
        conv().to_connect_data("t", b'{"schema":{"type":"int32"},"payload":null}')
    with pytest.raises(DataError, match="out of range for INT8"):
        conv().to_connect_data("t", b'{"schema":{"type":"int8"},"payload":300}')
    with pytest.raises(DataError, match="Array schema did not specify the items type"):
        conv().to_connect_data("t", b'{"schema":{"type":"array"},"payload":[]}')
    with pytest.raises(DataError, match="failed due to serialization error of topic t"):
        conv().from_connect_data("t", primitive(Type.INT32), "x")
    with pytest.raises(ConfigError, match=r"schemas\.enable"):
        conv(**{"schemas.enable": "maybe"})
    with pytest.raises(ConfigError, match=r"decimal\.format"):
        conv(**{"decimal.format": "HEX"})


def test_maps_with_string_keys_are_objects() -> None:
    s = map_of(primitive(Type.STRING), array(primitive(Type.FLOAT64)))
    data = conv().from_connect_data("t", s, {"x": [1.5]})
    assert data is not None and data.endswith(b'"payload":{"x":[1.5]}}')
    assert conv().to_connect_data("t", data) == SchemaAndValue(s, {"x": [1.5]})
