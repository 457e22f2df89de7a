"""ConfigDef: parsing typed values, defaults, validators, and the `/config/validate` answer's shape."""

from __future__ import annotations

import pytest

from moldau.connect.config import ConfigDef, ConfigType, Importance, Range, ValidString, config_infos
from moldau.connect.errors import ConfigException


def _definition() -> ConfigDef:
    return (ConfigDef()
            .define("topic", ConfigType.STRING, importance=Importance.HIGH, documentation="the topic", group="Common")
            .define("batch.size", ConfigType.INT, 2000, Importance.LOW, "records per poll",
                    validator=Range.at_least(1), group="Common")
            .define("mode", ConfigType.STRING, "insert", validator=ValidString.in_("insert", "upsert"))
            .define("flag", ConfigType.BOOLEAN, False)
            .define("names", ConfigType.LIST, "a, b")
            .define("secret", ConfigType.PASSWORD, None))


def test_parse_types_and_defaults() -> None:
    parsed = _definition().parse({"topic": "t", "flag": "TRUE", "extra": "kept"})
    assert parsed["topic"] == "t" and parsed["batch.size"] == 2000 and parsed["flag"] is True
    assert parsed["names"] == ["a", "b"] and parsed["extra"] == "kept" and parsed["secret"] is None


@pytest.mark.parametrize(("props", "field"), [
    ({}, "topic"), ({"topic": "t", "batch.size": "0"}, "batch.size"), ({"topic": "t", "batch.size": "x"}, "batch.size"),
    ({"topic": "t", "mode": "merge"}, "mode"), ({"topic": "t", "flag": "yes"}, "flag"),
    ({"topic": "t", "batch.size": str(1 << 31)}, "batch.size"),
])
def test_parse_errors_name_the_field(props: dict[str, str], field: str) -> None:
    with pytest.raises(ConfigException) as raised:
        _definition().parse(props)
    assert raised.value.name == field and field in str(raised.value)


def test_validate_collects_errors_in_kafka_shape() -> None:
    definition = _definition()
    values = definition.validate({"batch.size": "-1", "secret": "hunter2"})
    infos = config_infos("Example", definition, values)
    assert infos["name"] == "Example" and infos["error_count"] == 2 and infos["groups"] == ["Common"]
    by_name = {c["definition"]["name"]: c for c in infos["configs"]}
    assert by_name["topic"]["definition"]["required"] is True
    assert by_name["topic"]["value"]["errors"] == ['Missing required configuration "topic" which has no default value.']
    assert by_name["batch.size"]["definition"]["default_value"] == "2000"
    assert by_name["batch.size"]["value"]["errors"] == ["Invalid value -1 for configuration batch.size: "
                                                        "Value must be at least 1"]
    assert by_name["secret"]["value"]["value"] == "[hidden]"
    assert by_name["flag"]["value"]["value"] == "false"
    assert set(by_name["mode"]) == {"definition", "value"}
    assert set(by_name["mode"]["value"]) == {"name", "value", "recommended_values", "errors", "visible"}


def test_merge_and_duplicates() -> None:
    merged = _definition().merge(ConfigDef().define("other", ConfigType.INT, 1))
    assert "other" in merged.keys and "topic" in merged.keys
    with pytest.raises(ConfigException):
        ConfigDef().define("a", ConfigType.INT, 1).define("a", ConfigType.INT, 2)
