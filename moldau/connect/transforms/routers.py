"""Topic routers: RegexRouter (rename topics matching `regex` to `replacement`, Java's `$1` group syntax) and
TimestampRouter (`topic.format` with `${topic}` and `${timestamp}`, the record timestamp in `timestamp.format`,
UTC)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from moldau.connect.api import ConnectRecord, Transformation
from moldau.connect.config import ConfigDef, ConfigType, Importance
from moldau.connect.errors import ConfigException, DataException
from moldau.connect.transforms import java_time_format as jtf
from moldau.connect.transforms.parts import KAFKA

_JAVA_GROUP = re.compile(r"\\(.)|\$(\d+)|\$\{(\w+)\}|(.)", re.DOTALL)


def java_replacement(replacement: str) -> str:
    """Java's `Matcher.replaceFirst` syntax ($1, ${name}, backslash escapes) as a Python `re` template."""
    out = []
    for m in _JAVA_GROUP.finditer(replacement):
        literal = m.group(1) if m.group(1) is not None else m.group(4)
        if literal is not None:
            out.append(literal.replace("\\", "\\\\"))
        else:
            out.append(f"\\g<{m.group(2) or m.group(3)}>")
    return "".join(out)


def _regex(name: str, value: Any) -> None:
    try:
        re.compile(str(value))
    except re.error as e:
        raise ConfigException(name, value, f"Invalid regex: {e}") from None


REGEX_DEF = (
    ConfigDef()
    .define("regex", ConfigType.STRING, importance=Importance.HIGH,
            documentation="Regular expression to use for matching.", validator=_regex)
    .define("replacement", ConfigType.STRING, importance=Importance.HIGH, documentation="Replacement string.")
)


class RegexRouter(Transformation[ConnectRecord]):
    """Kafka's RegexRouter: a topic that matches `regex` entirely becomes `replacement`."""

    aliases = (KAFKA + "RegexRouter",)

    def config_def(self) -> ConfigDef:
        return REGEX_DEF

    def configure(self, configs: Mapping[str, Any]) -> None:
        parsed = REGEX_DEF.parse(configs)
        self.regex = re.compile(parsed["regex"])
        self.template = java_replacement(parsed["replacement"])
        try:
            self.regex.sub(self.template, "")  # a group the regex does not have fails here, not per record
        except (re.error, IndexError) as e:
            raise ConfigException("replacement", parsed["replacement"], str(e)) from None

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        match = self.regex.fullmatch(record.topic)
        if match is None:
            return record
        return record.new_record(topic=match.expand(self.template))


TIMESTAMP_DEF = (
    ConfigDef()
    .define("topic.format", ConfigType.STRING, "${topic}-${timestamp}", Importance.HIGH,
            "Format string which can contain ${topic} and ${timestamp} as placeholders for the topic and "
            "timestamp, respectively.")
    .define("timestamp.format", ConfigType.STRING, "yyyyMMdd", Importance.HIGH,
            "Format string for the timestamp that is compatible with java.text.SimpleDateFormat.")
)


class TimestampRouter(Transformation[ConnectRecord]):
    """Kafka's TimestampRouter: the topic becomes `topic.format` filled with the topic and formatted timestamp."""

    aliases = (KAFKA + "TimestampRouter",)

    def config_def(self) -> ConfigDef:
        return TIMESTAMP_DEF

    def configure(self, configs: Mapping[str, Any]) -> None:
        parsed = TIMESTAMP_DEF.parse(configs)
        self.topic_format: str = parsed["topic.format"]
        try:
            self.pattern = jtf.compile_pattern(parsed["timestamp.format"])
        except jtf.PatternError as e:
            raise ConfigException("timestamp.format", parsed["timestamp.format"], str(e)) from None

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        if record.timestamp is None:
            raise DataException(f"Timestamp missing on record: {record}")
        stamp = jtf.format_millis(self.pattern, record.timestamp)
        return record.new_record(topic=self.topic_format.replace("${topic}", record.topic)
                                 .replace("${timestamp}", stamp))
