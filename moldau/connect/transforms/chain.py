"""A connector's transformation chain, built from its config as Kafka Connect reads it:

    transforms=a,b
    transforms.a.type=<class name>       transforms.a.<option>=...
    transforms.a.predicate=p             transforms.a.negate=true|false
    predicates=p
    predicates.p.type=<class name>       predicates.p.<option>=...

A transform with a predicate applies only to records the predicate matches (or, with `negate`, does not).
Config errors are ConfigExceptions naming the full key at fault (`transforms.a.regex`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from moldau.connect.api import ConnectRecord, Predicate, Transformation
from moldau.connect.config import ConfigType, parse_value
from moldau.connect.errors import ConfigException, ConnectException, NotFoundError
from moldau.connect.plugins import PluginRegistry

_RESERVED = ("type", "predicate", "negate")


class TransformError(ConnectException):
    """A transform or predicate raised; says which (the original exception is the `__cause__`)."""

    def __init__(self, alias: str, class_name: str, cause: BaseException) -> None:
        super().__init__(f"Transform {alias} ({class_name}) failed: {cause}")
        self.alias = alias
        self.class_name = class_name


@dataclass
class Stage:
    alias: str
    transform: Transformation[Any]
    class_name: str
    predicate: Predicate[Any] | None = None
    negate: bool = False

    def applies_to(self, record: ConnectRecord) -> bool:
        return self.predicate is None or self.predicate.test(record) != self.negate


R = TypeVar("R", bound=ConnectRecord)


class TransformationChain:
    """The transforms of a connector, in order; a record dropped by one is not seen by the next."""

    def __init__(self, stages: Sequence[Stage] = ()) -> None:
        self.stages = list(stages)

    def apply(self, record: R) -> R | None:
        """The record after every stage (a transform keeps a record's kind: source records stay source records),
        or None once one drops it."""
        current: R | None = record
        for stage in self.stages:
            if current is None:
                return None
            try:
                if stage.applies_to(current):
                    current = stage.transform.apply(current)
            except Exception as e:
                raise TransformError(stage.alias, stage.class_name, e) from e
        return current

    def close(self) -> None:
        closed: set[int] = set()
        for stage in self.stages:
            for plugin in (stage.transform, stage.predicate):
                if plugin is not None and id(plugin) not in closed:
                    closed.add(id(plugin))
                    plugin.close()


def _aliases(config: Mapping[str, Any], key: str) -> list[str]:
    aliases = parse_value(key, ConfigType.LIST, config.get(key, "")) or []
    if len(set(aliases)) != len(aliases):
        raise ConfigException(key, config.get(key), "Duplicate alias provided.")
    if any(not a for a in aliases):
        raise ConfigException(key, config.get(key), "Empty alias provided.")
    return list(aliases)


def _options(config: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    return {k[len(prefix):]: v for k, v in config.items()
            if k.startswith(prefix) and k[len(prefix):] not in _RESERVED}


def _instantiate(config: Mapping[str, Any], prefix: str, registry: PluginRegistry, kind: type) -> tuple[Any, str]:
    type_key = prefix + "type"
    name = config.get(type_key)
    if not name:
        raise ConfigException(type_key, None, f'Missing required configuration "{type_key}" which has no default '
                                              "value.")
    try:
        info = registry.get(str(name), kind)
    except NotFoundError:
        raise ConfigException(type_key, name, f"Class {name} could not be found.") from None
    plugin: Any = info.cls()
    try:
        plugin.configure(_options(config, prefix))
    except ConfigException as e:
        raise ConfigException(prefix + e.name, e.value, e.reason) from e
    except (ValueError, ConnectException) as e:
        raise ConfigException(type_key, name, f"Invalid configuration: {e}") from e
    return plugin, info.class_name


def build_chain(config: Mapping[str, Any], registry: PluginRegistry) -> TransformationChain:
    """The chain a connector config describes; ConfigException (naming the key) when it is invalid."""
    predicates: dict[str, Predicate[Any]] = {}
    built: list[Stage] = []
    try:
        for alias in _aliases(config, "predicates"):
            predicates[alias], _ = _instantiate(config, f"predicates.{alias}.", registry, Predicate)
        for alias in _aliases(config, "transforms"):
            prefix = f"transforms.{alias}."
            transform, class_name = _instantiate(config, prefix, registry, Transformation)
            stage = Stage(alias, transform, class_name)
            built.append(stage)
            _attach_predicate(stage, config, prefix, predicates)
    except ConfigException:
        TransformationChain(built).close()
        for p in predicates.values():
            p.close()
        raise
    return TransformationChain(built)


def _attach_predicate(stage: Stage, config: Mapping[str, Any], prefix: str,
                      predicates: Mapping[str, Predicate[Any]]) -> None:
    name = config.get(prefix + "predicate")
    negate = parse_value(prefix + "negate", ConfigType.BOOLEAN, config.get(prefix + "negate", False))
    if name:
        if name not in predicates:
            raise ConfigException(prefix + "predicate", name, f"Predicate {name} is not listed in 'predicates'")
        stage.predicate, stage.negate = predicates[name], bool(negate)
    elif negate:
        raise ConfigException(prefix + "negate", "true", "negate is only allowed together with a predicate")
