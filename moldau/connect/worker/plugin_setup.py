"""Instantiating a connector's plugins from its config: its converters (the connector's own `key.converter`
etc., else the worker's, each configured with the properties under its prefix) and its transform chain
(`transforms`, `transforms.<alias>.type`, `.predicate`, `.negate`; `predicates`, `predicates.<alias>.type`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from moldau.connect.api import ConnectRecord, Converter, HeaderConverter, Predicate, Transformation
from moldau.connect.config import ConfigType, parse_value
from moldau.connect.errors import ConfigException, ConnectException
from moldau.connect.plugins import PluginRegistry
from moldau.connect.worker.worker_config import WorkerConfig, prefixed

__all__ = ["Converters", "ErrorTolerance", "TransformChain", "build_converters", "build_transforms"]

log = logging.getLogger(__name__)

R = TypeVar("R", bound=ConnectRecord)
T = TypeVar("T")


@dataclass
class Converters:
    key: Converter
    value: Converter
    header: HeaderConverter


def _converter_source(worker: WorkerConfig, config: Mapping[str, str], kind: str) -> tuple[str, dict[str, Any]]:
    """The class name and the properties of the `kind` converter: the connector's if it names one."""
    if config.get(kind):
        return config[kind], prefixed(config, kind + ".")
    name = worker.raw.get(kind) or worker.values.get(kind)
    if not name:
        raise ConfigException(kind, None, "no converter configured for the worker or the connector")
    return str(name), prefixed(worker.raw, kind + ".")


def build_converters(registry: PluginRegistry, worker: WorkerConfig, config: Mapping[str, str]) -> Converters:
    built: dict[str, Any] = {}
    for kind, is_key in (("key.converter", True), ("value.converter", False)):
        name, props = _converter_source(worker, config, kind)
        converter: Converter = _instantiate(registry, name, Converter, kind)
        converter.configure({**props, "converter.type": "key" if is_key else "value"}, is_key)
        built[kind] = converter
    name, props = _converter_source(worker, config, "header.converter")
    header: HeaderConverter = _instantiate(registry, name, HeaderConverter, "header.converter")
    header.configure({**props, "converter.type": "header"})
    return Converters(built["key.converter"], built["value.converter"], header)


def _instantiate(registry: PluginRegistry, name: str, kind: type, config_name: str) -> Any:
    info = registry.find(name)
    if info is None or not issubclass(info.cls, kind):
        raise ConfigException(config_name, name, f"Class {name} could not be found or is not a {kind.__name__}")
    return info.cls()


@dataclass
class _Step(Generic[R]):
    alias: str
    transform: Transformation[R]
    predicate: Predicate[R] | None
    negate: bool


class TransformChain(Generic[R]):
    """The configured transforms, applied in order; a transform whose predicate does not hold (or holds,
    with `negate`) passes the record through unchanged. None from a transform drops the record."""

    def __init__(self, steps: Sequence[_Step[R]]) -> None:
        self.steps = list(steps)

    def apply(self, record: R) -> R | None:
        current: R | None = record
        for step in self.steps:
            if current is None:
                return None
            if step.predicate is not None and step.predicate.test(current) == step.negate:
                continue
            current = step.transform.apply(current)
        return current

    def close(self) -> None:
        closed: set[int] = set()
        for step in self.steps:
            for plugin in (step.transform, step.predicate):
                if plugin is not None and id(plugin) not in closed:
                    closed.add(id(plugin))
                    plugin.close()


def build_transforms(registry: PluginRegistry, config: Mapping[str, str]) -> TransformChain[Any]:
    predicates: dict[str, Predicate[Any]] = {}
    for alias in parse_value("predicates", ConfigType.LIST, config.get("predicates", "")):
        props = prefixed(config, f"predicates.{alias}.")
        if not props.get("type"):
            raise ConfigException(f"predicates.{alias}.type", None, "Missing the predicate's class")
        predicate: Predicate[Any] = _instantiate(registry, props["type"], Predicate, f"predicates.{alias}.type")
        predicate.configure({k: v for k, v in props.items() if k != "type"})
        predicates[alias] = predicate
    steps: list[_Step[Any]] = []
    for alias in parse_value("transforms", ConfigType.LIST, config.get("transforms", "")):
        props = prefixed(config, f"transforms.{alias}.")
        if not props.get("type"):
            raise ConfigException(f"transforms.{alias}.type", None, "Missing the transform's class")
        transform: Transformation[Any] = _instantiate(registry, props["type"], Transformation,
                                                      f"transforms.{alias}.type")
        transform.configure({k: v for k, v in props.items() if k not in ("type", "predicate", "negate")})
        predicate_alias = props.get("predicate")
        if predicate_alias and predicate_alias not in predicates:
            raise ConfigException(f"transforms.{alias}.predicate", predicate_alias, "Unknown predicate alias")
        negate = parse_value(f"transforms.{alias}.negate", ConfigType.BOOLEAN, props.get("negate", "false"))
        steps.append(_Step(alias, transform, predicates.get(predicate_alias or ""), bool(negate)))
    return TransformChain(steps)


class ErrorTolerance:
    """`errors.tolerance`: with `none` a failing conversion or transform fails the task; with `all` the
    record is skipped (and logged with `errors.log.enable`)."""

    def __init__(self, config: Mapping[str, str], connector: str) -> None:
        self.tolerate_all = config.get("errors.tolerance", "none").strip().lower() == "all"
        self.log_errors = config.get("errors.log.enable", "false").strip().lower() == "true"
        self.connector = connector
        self.skipped = 0

    def run(self, stage: str, operation: Callable[[], T]) -> tuple[bool, T | None]:
        """(True, result) when `operation` succeeded; (False, None) when it failed and is tolerated."""
        try:
            return True, operation()
        except Exception as exc:
            if not self.tolerate_all:
                raise ConnectException(f"Tolerance exceeded in error handler ({stage}): {exc}") from exc
            self.skipped += 1
            if self.log_errors:
                log.error("connector %s: %s failed, record skipped: %s", self.connector, stage, exc)
            return False, None
