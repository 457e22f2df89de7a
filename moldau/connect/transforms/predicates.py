"""Kafka's predicates, for applying a transform only to some records (`transforms.X.predicate`), and the
Filter transform that drops every record it is applied to (so, with a predicate, the matching ones)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from moldau.connect.api import ConnectRecord, Predicate, Transformation
from moldau.connect.config import ConfigDef, ConfigType, Importance
from moldau.connect.errors import ConfigException
from moldau.connect.transforms.parts import KAFKA

PREDICATES = KAFKA + "predicates."


def _regex(name: str, value: Any) -> None:
    try:
        re.compile(str(value))
    except re.error as e:
        raise ConfigException(name, value, f"Invalid regex: {e}") from None


TOPIC_DEF = ConfigDef().define(
    "pattern", ConfigType.STRING, importance=Importance.MEDIUM,
    documentation="A Java regular expression for matching against the name of a record's topic.",
    validator=_regex)


class TopicNameMatches(Predicate[ConnectRecord]):
    """True for records whose topic matches `pattern` entirely."""

    aliases = (PREDICATES + "TopicNameMatches",)

    def config_def(self) -> ConfigDef:
        return TOPIC_DEF

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.pattern = re.compile(TOPIC_DEF.parse(configs)["pattern"])

    def test(self, record: ConnectRecord) -> bool:
        return record.topic is not None and self.pattern.fullmatch(record.topic) is not None


HEADER_DEF = ConfigDef().define("name", ConfigType.STRING, importance=Importance.MEDIUM,
                                documentation="The header name.")


class HasHeaderKey(Predicate[ConnectRecord]):
    """True for records with at least one header called `name`."""

    aliases = (PREDICATES + "HasHeaderKey",)

    def config_def(self) -> ConfigDef:
        return HEADER_DEF

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.name: str = HEADER_DEF.parse(configs)["name"]

    def test(self, record: ConnectRecord) -> bool:
        return record.header(self.name) is not None


class RecordIsTombstone(Predicate[ConnectRecord]):
    """True for tombstones: records whose value is null."""

    aliases = (PREDICATES + "RecordIsTombstone",)

    def config_def(self) -> ConfigDef:
        return ConfigDef()

    def configure(self, configs: Mapping[str, Any]) -> None:
        pass

    def test(self, record: ConnectRecord) -> bool:
        return record.value is None


class Filter(Transformation[ConnectRecord]):
    """Drops every record; configure it with a predicate to drop only the records that match."""

    aliases = (KAFKA + "Filter",)

    def config_def(self) -> ConfigDef:
        return ConfigDef()

    def configure(self, configs: Mapping[str, Any]) -> None:
        pass

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        return None
