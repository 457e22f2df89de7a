"""Configuration definitions for plugins (Kafka's ConfigDef): typed keys with defaults, importance,
documentation and validators; parsing string properties into typed values; and validation producing Kafka
Connect's `/config/validate` answer (`ConfigInfos`). Pure: no I/O.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from moldau.connect.errors import ConfigException

__all__ = [
    "NO_DEFAULT", "ConfigDef", "ConfigKey", "ConfigType", "ConfigValue", "Importance", "NonEmptyString", "Range",
    "ValidString", "Validator", "Width", "config_infos",
]


class ConfigType(enum.Enum):
    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    INT = "INT"
    SHORT = "SHORT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    LIST = "LIST"
    CLASS = "CLASS"
    PASSWORD = "PASSWORD"


class Importance(enum.Enum):
    HIGH = "HIGH"
    MEDIUM = "MEDIUM"
    LOW = "LOW"


class Width(enum.Enum):
    NONE = "NONE"
    SHORT = "SHORT"
    MEDIUM = "MEDIUM"
    LONG = "LONG"


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()  # a key without a default is required

Validator = Callable[[str, Any], None]  # raises ConfigException for a bad (parsed) value


@dataclass(frozen=True)
class Range:
    """A number in [low, high] (either bound optional)."""

    low: float | None = None
    high: float | None = None

    @classmethod
    def at_least(cls, low: float) -> Range:
        return cls(low, None)

    @classmethod
    def between(cls, low: float, high: float) -> Range:
        return cls(low, high)

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        if self.low is not None and value < self.low:
            raise ConfigException(name, value, f"Value must be at least {_num(self.low)}")
        if self.high is not None and value > self.high:
            raise ConfigException(name, value, f"Value must be no more than {_num(self.high)}")

    def __str__(self) -> str:
        low = _num(self.low) if self.low is not None else "..."
        high = _num(self.high) if self.high is not None else ""
        return f"[{low},...,{high}]"


@dataclass(frozen=True)
class ValidString:
    """One of a fixed set of strings."""

    allowed: tuple[str, ...]
    case_sensitive: bool = True

    @classmethod
    def in_(cls, *allowed: str) -> ValidString:
        return cls(tuple(allowed))

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        candidates = self.allowed if self.case_sensitive else tuple(a.lower() for a in self.allowed)
        if (value if self.case_sensitive else str(value).lower()) not in candidates:
            raise ConfigException(name, value, f"String must be one of: {', '.join(self.allowed)}")

    def __str__(self) -> str:
        return f"[{', '.join(self.allowed)}]"


class NonEmptyString:
    """A string with at least one non-blank character."""

    def __call__(self, name: str, value: Any) -> None:
        if value is not None and not str(value).strip():
            raise ConfigException(name, value, "String must be non-empty")

    def __str__(self) -> str:
        return "non-empty string"


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: ConfigType
    default: Any
    importance: Importance
    documentation: str
    validator: Validator | None = None
    group: str | None = None
    order_in_group: int = -1
    width: Width = Width.NONE
    display_name: str | None = None
    dependents: tuple[str, ...] = ()

    @property
    def required(self) -> bool:
        return self.default is NO_DEFAULT


@dataclass
class ConfigValue:
    """The validation result of one key: Kafka's ConfigValue."""

    name: str
    value: Any = None
    recommended_values: list[Any] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    visible: bool = True


class ConfigDef:
    """A set of config keys. `define` returns self so definitions chain, as Kafka's do."""

    def __init__(self, keys: Iterable[ConfigKey] = ()) -> None:
        self.keys: dict[str, ConfigKey] = {}
        for key in keys:
            self._add(key)

    def _add(self, key: ConfigKey) -> None:
        if key.name in self.keys:
            raise ConfigException(key.name, None, "is defined twice")
        self.keys[key.name] = key

    def define(self, name: str, type_: ConfigType, default: Any = NO_DEFAULT,
               importance: Importance = Importance.MEDIUM, documentation: str = "", *,
               validator: Validator | None = None, group: str | None = None, order_in_group: int = -1,
               width: Width = Width.NONE, display_name: str | None = None,
               dependents: Sequence[str] = ()) -> ConfigDef:
        if default is not NO_DEFAULT and default is not None:
            default = parse_value(name, type_, default)
        self._add(ConfigKey(name, type_, default, importance, documentation, validator, group, order_in_group,
                            width, display_name, tuple(dependents)))
        return self

    def merge(self, other: ConfigDef) -> ConfigDef:
        """A new definition with this one's keys and then `other`'s (other wins where both define a key)."""
        merged = ConfigDef(self.keys.values())
        merged.keys.update(other.keys)
        return merged

    def groups(self) -> list[str]:
        seen: list[str] = []
        for key in self.keys.values():
            if key.group and key.group not in seen:
                seen.append(key.group)
        return seen

    def parse(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """Typed values for every defined key (defaults filled in); raises ConfigException for the first bad
        or missing key. Keys not defined are passed through unchanged."""
        parsed: dict[str, Any] = {k: v for k, v in props.items() if k not in self.keys}
        for key in self.keys.values():
            parsed[key.name] = self._parse_key(key, props)
        return parsed

    def _parse_key(self, key: ConfigKey, props: Mapping[str, Any]) -> Any:
        if key.name in props:
            value = parse_value(key.name, key.type, props[key.name])
        elif key.required:
            raise ConfigException(key.name, None,
                                  f'Missing required configuration "{key.name}" which has no default value.')
        else:
            value = key.default
        if key.validator is not None:
            key.validator(key.name, value)
        return value

    def validate(self, props: Mapping[str, Any]) -> list[ConfigValue]:
        """One ConfigValue per defined key, errors collected rather than raised (for `/config/validate`)."""
        results = []
        for key in self.keys.values():
            result = ConfigValue(key.name, props.get(key.name, None if key.required else key.default))
            try:
                result.value = self._parse_key(key, props)
            except ConfigException as exc:
                result.errors.append(str(exc) if key.name in props else exc.reason)
            results.append(result)
        return results


_TRUE = frozenset(("true",))
_FALSE = frozenset(("false",))
_LIST_SPLIT = re.compile(r"\s*,\s*")
_INT_BITS = {ConfigType.SHORT: 16, ConfigType.INT: 32, ConfigType.LONG: 64}


def parse_value(name: str, type_: ConfigType, value: Any) -> Any:
    """`value` (a string from a properties file, or an already typed value) as `type_`."""
    if value is None:
        return None
    if type_ is ConfigType.BOOLEAN:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
        raise ConfigException(name, value, "Expected value to be either true or false")
    if type_ in _INT_BITS:
        return _parse_int(name, type_, value)
    if type_ is ConfigType.DOUBLE:
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigException(name, value, "Not a number of type DOUBLE") from None
    if type_ is ConfigType.LIST:
        if isinstance(value, (list, tuple)):
            return [str(item) for item in value]
        text = str(value).strip()
        return [] if not text else _LIST_SPLIT.split(text)
    if isinstance(value, (dict, list)):
        raise ConfigException(name, value, f"Expected a {type_.value.lower()}")
    return str(value).strip() if type_ is not ConfigType.PASSWORD else str(value)


def _parse_int(name: str, type_: ConfigType, value: Any) -> int:
    if isinstance(value, bool):
        raise ConfigException(name, value, f"Not a number of type {type_.value}")
    try:
        number = value if isinstance(value, int) else int(str(value).strip())
    except ValueError:
        raise ConfigException(name, value, f"Not a number of type {type_.value}") from None
    bits = _INT_BITS[type_]
    if not -(1 << (bits - 1)) <= number < (1 << (bits - 1)):
        raise ConfigException(name, value, f"Not a number of type {type_.value}")
    return number


def _definition_json(key: ConfigKey, order: int) -> dict[str, Any]:
    default = None if key.required else key.default
    if isinstance(default, list):
        default = ",".join(default)
    elif isinstance(default, bool):
        default = str(default).lower()
    elif default is not None:
        default = str(default)
    return {"name": key.name, "type": key.type.value, "required": key.required, "default_value": default,
            "importance": key.importance.value, "documentation": key.documentation, "group": key.group,
            "width": key.width.value, "display_name": key.display_name or key.name,
            "dependents": list(key.dependents), "order": key.order_in_group if key.order_in_group >= 0 else order}


def _value_json(value: ConfigValue, key: ConfigKey) -> dict[str, Any]:
    shown = value.value
    if key.type is ConfigType.PASSWORD and shown is not None:
        shown = "[hidden]"
    elif isinstance(shown, list):
        shown = ",".join(shown)
    elif isinstance(shown, bool):
        shown = str(shown).lower()
    elif shown is not None:
        shown = str(shown)
    return {"name": value.name, "value": shown, "recommended_values": list(value.recommended_values),
            "errors": list(value.errors), "visible": value.visible}


def config_infos(name: str, definition: ConfigDef, values: Sequence[ConfigValue]) -> dict[str, Any]:
    """Kafka Connect's ConfigInfos JSON: `name`, `error_count`, `groups`, and per key its definition and
    validated value."""
    by_name = {value.name: value for value in values}
    configs = []
    for order, key in enumerate(definition.keys.values(), start=1):
        value = by_name.get(key.name, ConfigValue(key.name))
        configs.append({"definition": _definition_json(key, order), "value": _value_json(value, key)})
    errors = sum(len(value.errors) for value in values)
    return {"name": name, "error_count": errors, "groups": definition.groups(), "configs": configs}
