"""Instantiating a connector's plugins from its config: its converters (the connector's own `key.converter`
etc., else the worker's, each configured with the properties under its prefix) and its transform chain
(`transforms`, `transforms.<alias>.type`, `.predicate`, `.negate`; `predicates`, `predicates.<alias>.type`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from moldau.connect.api import ConnectRecord, Converter, HeaderConverter
from moldau.connect.errors import ConfigException
from moldau.connect.plugins import PluginRegistry
from moldau.connect.worker.worker_config import WorkerConfig, prefixed

__all__ = ["Converters", "build_converters"]

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
