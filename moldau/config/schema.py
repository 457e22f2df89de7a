"""What a config is: its type, how a raw string is parsed and validated, and the definition records.

Values are parsed the way Kafka's ``ConfigDef`` parses them (trimmed, case-insensitive booleans,
comma-separated lists) and invalid ones are reported in Kafka's words, e.g. ``Invalid value abc for
configuration log.segment.bytes: Not a number of type INT``. ``ConfigDef`` (a broker config) and
``TopicConfigDef`` (a topic config) are the records the definition tables are made of.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeAlias

LONG_MAX = 2**63 - 1

# A parsed value: bool, int (INT, SHORT, LONG), float (DOUBLE), str (STRING, CLASS, PASSWORD),
# tuple of str (LIST), or None for a config without a value.
ConfigValue: TypeAlias = bool | int | float | str | tuple[str, ...] | None


class ConfigError(ValueError):
    """A configuration is unknown where that is not allowed, has an invalid value, or is read-only."""

    def __init__(self, message: str, name: str | None = None) -> None:
        super().__init__(message)
        self.name = name


class ConfigType(IntEnum):
    """Kafka's ConfigType numbers, as sent in DescribeConfigs responses."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """Kafka's ConfigSource numbers: where a value in a DescribeConfigs response comes from."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8  # a group's own value (GROUP config resources)


# --- value parsing ----------------------------------------------------------------------------------


class _Invalid(Exception):
    """Why a value was rejected; turned into a ConfigError naming the config and the value."""


_INTEGER_RE = re.compile(r"[+-]?[0-9]+\Z")
_DOUBLE_RE = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\Z")
_INTEGER_BITS = {ConfigType.SHORT: 16, ConfigType.INT: 32, ConfigType.LONG: 64}


def _parse_integer(config_type: ConfigType, text: str) -> int:
    # Stricter than int(): no underscores or non-ASCII digits, and bounded like the Java type.
    bits = _INTEGER_BITS[config_type]
    if not _INTEGER_RE.match(text) or not -(2 ** (bits - 1)) <= int(text) < 2 ** (bits - 1):
        raise _Invalid(f"Not a number of type {config_type.name}")
    return int(text)


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered not in ("true", "false"):
        raise _Invalid("Expected value to be either true or false")
    return lowered == "true"


def _parse_double(text: str) -> float:
    if not _DOUBLE_RE.match(text):
        raise _Invalid("Not a number of type DOUBLE")
    return float(text)


def _parse_list(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(",")) if text else ()


def _parse_typed(config_type: ConfigType, raw: str) -> ConfigValue:
    """Parse a raw string as ``config_type``; surrounding whitespace is ignored, as in Kafka."""
    text = raw.strip()
    if config_type in _INTEGER_BITS:
        return _parse_integer(config_type, text)
    if config_type is ConfigType.BOOLEAN:
        return _parse_bool(text)
    if config_type is ConfigType.DOUBLE:
        return _parse_double(text)
    if config_type is ConfigType.LIST:
        return _parse_list(text)
    return text


def format_value(value: ConfigValue) -> str | None:
    """The string form of a parsed value, as DescribeConfigs reports it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


# --- validators -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Range:
    """A number within [low, high]; either bound may be open. None (no value) always passes."""

    low: int | float | None = None
    high: int | float | None = None

    def check(self, value: ConfigValue) -> str | None:
        """Return why ``value`` is invalid, or None if it is valid."""
        if not isinstance(value, int | float) or isinstance(value, bool):
            return None
        if self.low is not None and value < self.low:
            return f"Value must be at least {self.low}"
        if self.high is not None and value > self.high:
            return f"Value must be no more than {self.high}"
        return None

    def describe(self) -> str:
        """The allowed values in Kafka's documentation notation."""
        low = "..." if self.low is None else str(self.low)
        return f"[{low},...]" if self.high is None else f"[{low},...,{self.high}]"


def at_least(low: int) -> Range:
    return Range(low=low)


@dataclass(frozen=True, slots=True)
class OneOf:
    """A string that is one of ``choices`` (case-sensitive, as Kafka's ValidString)."""

    choices: tuple[str, ...]

    def check(self, value: ConfigValue) -> str | None:
        """Return why ``value`` is invalid, or None if it is valid."""
        if isinstance(value, str) and value not in self.choices:
            return f"String must be one of: {', '.join(self.choices)}"
        return None

    def describe(self) -> str:
        """The allowed values in Kafka's documentation notation."""
        return f"[{', '.join(self.choices)}]"


@dataclass(frozen=True, slots=True)
class ListOf:
    """A list whose items are all in ``choices``; empty only where ``allow_empty`` says so."""

    choices: tuple[str, ...]
    allow_empty: bool = False

    def check(self, value: ConfigValue) -> str | None:
        """Return why ``value`` is invalid, or None if it is valid."""
        if not isinstance(value, tuple):
            return None
        if not value:
            return None if self.allow_empty else "Empty list is not allowed"
        if any(item not in self.choices for item in value):
            return f"String must be one of: {', '.join(self.choices)}"
        return None

    def describe(self) -> str:
        """The allowed values in Kafka's documentation notation."""
        return f"[{', '.join(self.choices)}]"


@dataclass(frozen=True, slots=True)
class Custom:
    """A validator defined by a function returning the reason a value is invalid, or None."""

    func: Callable[[ConfigValue], str | None]
    text: str

    def check(self, value: ConfigValue) -> str | None:
        """Return why ``value`` is invalid, or None if it is valid."""
        return self.func(value)

    def describe(self) -> str:
        """The allowed values, in words."""
        return self.text


Validator: TypeAlias = Range | OneOf | ListOf | Custom


def _check_roles(value: ConfigValue) -> str | None:
    if isinstance(value, tuple) and len(set(value)) != len(value):
        return "Each role may be listed only once"
    return ListOf(("broker", "controller")).check(value)


def _check_paths(value: ConfigValue) -> str | None:
    if isinstance(value, tuple) and (not value or not all(value)):
        return "Expected a comma-separated list of non-empty paths"
    return None


def _check_non_empty(value: ConfigValue) -> str | None:
    return "Expected a non-empty string" if value == "" else None


# Validators shared by the definition tables.
ROLES = Custom(_check_roles, "[broker, controller]")
PATHS = Custom(_check_paths, "a comma-separated list of paths")
NON_EMPTY = Custom(_check_non_empty, "a non-empty string")
TIMESTAMP_TYPES = OneOf(("CreateTime", "LogAppendTime"))
# Empty (Kafka 4.2): neither deletion by retention nor compaction; the log keeps everything until DeleteRecords.
CLEANUP_POLICIES = ListOf(("compact", "delete"), allow_empty=True)
COMPRESSION_TYPES = OneOf(("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"))
# Kafka's codec ids (offsets.topic.compression.codec and the like): Kafka takes any int and refuses an id that
# names no codec when the broker starts, in these words; Moldau refuses it when the value is read.
CODEC_IDS = Custom(lambda v: None if not isinstance(v, int) or 0 <= v <= 4 else f"Unknown compression type id: {v}",
                   "[0 (none), 1 (gzip), 2 (snappy), 3 (lz4), 4 (zstd)]")
GZIP_LEVELS = Custom(lambda v: None if v == -1 or (isinstance(v, int) and 1 <= v <= 9)
                     else "Value must be -1 or between 1 and 9", "[1,...,9] or -1")


# --- definitions ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One known broker config.

    ``default`` is the raw string default (None: no value). ``dynamic`` configs may be changed at runtime;
    the others are read-only. ``topic_config`` names the topic config this one provides the default for.
    ``acted_on`` is False for a config that is accepted but has no effect yet (see ``NOT_YET_ACTED_ON``).
    """

    name: str
    type: ConfigType
    default: str | None
    doc: str
    validator: Validator | None = None
    dynamic: bool = False
    topic_config: str | None = None
    acted_on: bool = True

    @property
    def sensitive(self) -> bool:
        return self.type is ConfigType.PASSWORD

    def parse(self, raw: str) -> ConfigValue:
        """Parse and validate ``raw``; raise ConfigError naming this config, the value and what is allowed."""
        return _parse_checked(self.name, self.type, self.validator, raw)


def _parse_checked(name: str, config_type: ConfigType, validator: Validator | None, raw: str) -> ConfigValue:
    try:
        value = _parse_typed(config_type, raw)
        reason = validator.check(value) if validator is not None else None
    except _Invalid as error:
        reason = str(error)
    if reason is not None:
        # Never echo a password back, not even an invalid one.
        shown = "[hidden]" if config_type is ConfigType.PASSWORD else raw.strip()
        raise ConfigError(f"Invalid value {shown} for configuration {name}: {reason}", name)
    return value


@dataclass(frozen=True, slots=True)
class Synonym:
    """A broker config providing a topic default, with the milliseconds per unit of its value."""

    name: str
    unit_ms: int = 1


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    """One known topic config; its default is the first set broker config among ``synonyms``, else ``default``
    (the raw string default of a topic config no broker config supplies, such as Confluent's schema validation).

    ``acted_on`` is False for a config that is accepted but has no effect yet (see ``NOT_YET_ACTED_ON``).
    """

    name: str
    type: ConfigType
    doc: str
    synonyms: tuple[Synonym, ...]
    validator: Validator | None = None
    acted_on: bool = True
    default: str | None = None

    def parse(self, raw: str) -> ConfigValue:
        """Parse and validate ``raw``; raise ConfigError naming this config, the value and what is allowed."""
        return _parse_checked(self.name, self.type, self.validator, raw)
