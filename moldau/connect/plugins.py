"""The plugin registry: connector, converter, header converter, transform and predicate classes by name.

Classes are found in three places: every module of the built-in packages (`BUILTIN_PACKAGES`, with their
subpackages), the Python entry points of the group `moldau.connect.plugins` (each names a class or a module),
and every module (`*.py`, or a package directory) under the directories of the worker's `plugin.path`. Each
concrete subclass of a plugin base class is known by its qualified Python name (`package.module.Class`), its
class name, the class name without a `Connector` suffix (`FileStreamSource`), and its `aliases` (Kafka's class
names). Transforms that Kafka nests as `$Key`/`$Value` declare those spellings in `aliases`.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import inspect
import logging
import pkgutil
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from moldau.connect.api import (
    Connector,
    Converter,
    HeaderConverter,
    Plugin,
    Predicate,
    SinkConnector,
    SourceConnector,
    Transformation,
)
from moldau.connect.errors import NotFoundError

__all__ = ["BUILTIN_PACKAGES", "ENTRY_POINT_GROUP", "PluginInfo", "PluginRegistry", "plugin_type"]

log = logging.getLogger(__name__)

BUILTIN_PACKAGES = ("moldau.connect.connectors", "moldau.connect.converters", "moldau.connect.transforms",
                    "moldau.mirror")
ENTRY_POINT_GROUP = "moldau.connect.plugins"

# Kafka's plugin type names, as GET /connector-plugins reports them.
_KINDS: tuple[tuple[type, str], ...] = (
    (SourceConnector, "source"), (SinkConnector, "sink"), (Converter, "converter"),
    (HeaderConverter, "header_converter"), (Transformation, "transformation"), (Predicate, "predicate"),
)


def plugin_type(cls: type) -> str | None:
    """Kafka's name for the kind of plugin `cls` is, or None when it is none."""
    return next((name for base, name in _KINDS if issubclass(cls, base)), None)


@dataclass(frozen=True)
class PluginInfo:
    cls: type[Plugin]
    type: str
    class_name: str  # the name reported by the REST API: the first alias, else the qualified Python name

    def version(self) -> str:
        try:
            return str(self.cls().version())
        except Exception:  # a plugin whose constructor fails still lists, without a version
            return "unknown"

    def json(self) -> dict[str, Any]:
        return {"class": self.class_name, "type": self.type, "version": self.version()}


class PluginRegistry:
    """Every plugin class found, by each of its names."""

    def __init__(self) -> None:
        self._by_name: dict[str, PluginInfo] = {}
        self._infos: list[PluginInfo] = []

    @classmethod
    def discover(cls, plugin_path: Iterable[str] = (), entry_points: bool = True) -> PluginRegistry:
        registry = cls()
        for package in BUILTIN_PACKAGES:
            registry.add_package(package)
        if entry_points:
            registry.add_entry_points()
        for directory in plugin_path:
            registry.add_directory(Path(directory))
        return registry

    def add_class(self, plugin: type) -> None:
        kind = plugin_type(plugin)
        if kind is None or inspect.isabstract(plugin) or any(i.cls is plugin for i in self._infos):
            return
        aliases = tuple(getattr(plugin, "aliases", ()))
        qualified = f"{plugin.__module__}.{plugin.__qualname__}"
        info = PluginInfo(plugin, kind, aliases[0] if aliases and "." in aliases[0] else qualified)
        self._infos.append(info)
        names = [qualified, plugin.__name__, *aliases]
        if plugin.__name__.endswith("Connector") and len(plugin.__name__) > len("Connector"):
            names.append(plugin.__name__.removesuffix("Connector"))
        for name in names:
            # Built-ins come first; a third-party class never takes over a name already taken.
            self._by_name.setdefault(name, info)

    def add_module(self, module: ModuleType) -> None:
        for _, member in inspect.getmembers(module, inspect.isclass):
            if member.__module__ == module.__name__:
                self.add_class(member)

    def add_package(self, package_name: str) -> None:
        package = importlib.import_module(package_name)
        self.add_module(package)
        # walk_packages, not iter_modules: a connector may be a package of modules (postgres_cdc, jdbc_sink).
        for module in pkgutil.walk_packages(package.__path__, package_name + "."):
            self._import_and_add(module.name)

    def _import_and_add(self, module_name: str) -> None:
        try:
            self.add_module(importlib.import_module(module_name))
        except Exception:
            log.exception("connect: cannot load plugin module %s", module_name)

    def add_entry_points(self) -> None:
        for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                loaded = entry.load()
            except Exception:
                log.exception("connect: cannot load plugin entry point %s", entry.name)
                continue
            if isinstance(loaded, ModuleType):
                self.add_module(loaded)
            elif isinstance(loaded, type):
                self.add_class(loaded)
                self._by_name.setdefault(entry.name, self._info_of(loaded))

    def _info_of(self, plugin: type) -> PluginInfo:
        return next(i for i in self._infos if i.cls is plugin)

    def add_directory(self, directory: Path) -> None:
        """Import every module and package directly under `directory` (a `plugin.path` entry)."""
        if not directory.is_dir():
            log.warning("connect: plugin.path entry %s is not a directory", directory)
            return
        if str(directory) not in sys.path:
            # Appended, not prepended: a plugin directory must not shadow installed packages.
            sys.path.append(str(directory))
        for module in pkgutil.iter_modules([str(directory)]):
            self._import_and_add(module.name)
            if module.ispkg:
                loaded = sys.modules.get(module.name)
                if loaded is not None and hasattr(loaded, "__path__"):
                    for sub in pkgutil.iter_modules(loaded.__path__, module.name + "."):
                        self._import_and_add(sub.name)

    def find(self, name: str) -> PluginInfo | None:
        return self._by_name.get(name.strip())

    def get(self, name: str, kind: type | None = None) -> PluginInfo:
        """The plugin called `name` (of base class `kind` if given); NotFoundError otherwise."""
        info = self.find(name)
        if info is None or (kind is not None and not issubclass(info.cls, kind)):
            what = "plugin" if kind is None else kind.__name__
            raise NotFoundError(f"Failed to find any class that implements {what} and which name matches {name}")
        return info

    def connector(self, name: str) -> PluginInfo:
        return self.get(name, Connector)

    def plugins(self, connectors_only: bool = True) -> list[PluginInfo]:
        kinds = ("source", "sink") if connectors_only else tuple(name for _, name in _KINDS)
        chosen = [info for info in self._infos if info.type in kinds]
        return sorted(chosen, key=lambda i: (kinds.index(i.type), i.class_name))
