"""The plugin registry: built-ins by every name, `plugin.path` directories, and the transform chain built
from a connector's config."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from moldau.connect.api import Predicate, SourceRecord, Transformation
from moldau.connect.config import ConfigDef
from moldau.connect.connectors.file import FileStreamSinkConnector, FileStreamSourceConnector
from moldau.connect.converters.simple import StringConverter
from moldau.connect.errors import ConfigException, NotFoundError
from moldau.connect.plugins import PluginRegistry
from moldau.connect.transforms.chain import build_chain


@pytest.fixture(scope="module")
def registry() -> PluginRegistry:
    return PluginRegistry.discover(entry_points=False)


@pytest.mark.parametrize("name", ["FileStreamSource", "FileStreamSourceConnector",
                                  "org.apache.kafka.connect.file.FileStreamSourceConnector",
                                  "moldau.connect.connectors.file.FileStreamSourceConnector"])
def test_connector_names_and_aliases(registry: PluginRegistry, name: str) -> None:
    info = registry.connector(name)
    assert info.cls is FileStreamSourceConnector and info.type == "source"
    assert info.class_name == "org.apache.kafka.connect.file.FileStreamSourceConnector"


def test_kinds_and_listing(registry: PluginRegistry) -> None:
    assert registry.get("org.apache.kafka.connect.storage.StringConverter").cls is StringConverter
    assert registry.connector("FileStreamSink").cls is FileStreamSinkConnector
    with pytest.raises(NotFoundError):
        registry.connector("org.apache.kafka.connect.storage.StringConverter")  # a converter, not a connector
    listed = [p.json() for p in registry.plugins()]
    assert {p["type"] for p in listed} == {"source", "sink"}
    everything = {p.type for p in registry.plugins(connectors_only=False)}
    assert {"source", "sink", "converter", "header_converter"} <= everything


def test_plugin_path_directory(tmp_path: Path) -> None:
    (tmp_path / "my_connect_plugin.py").write_text(
        "from moldau.connect.converters.simple import ByteArrayConverter\n"
        "class ShoutingConverter(ByteArrayConverter):\n"
        "    aliases = ('com.example.Shouting',)\n")
    registry = PluginRegistry.discover([str(tmp_path)], entry_points=False)
    info = registry.get("com.example.Shouting")
    assert info.cls.__name__ == "ShoutingConverter" and info.type == "converter"
    # A third-party class never takes over a built-in's name.
    assert registry.get("ByteArrayConverter").cls.__module__ == "moldau.connect.converters.simple"


class Upper(Transformation[SourceRecord]):
    def configure(self, configs: Mapping[str, Any]) -> None:
        self.field = configs.get("suffix", "")

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        return record.new_record(value=str(record.value).upper() + self.field)

    def config_def(self) -> ConfigDef:
        return ConfigDef()


class DropEmpty(Transformation[SourceRecord]):
    def configure(self, configs: Mapping[str, Any]) -> None:
        pass

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        return None if not record.value else record

    def config_def(self) -> ConfigDef:
        return ConfigDef()


class TopicIs(Predicate[SourceRecord]):
    def configure(self, configs: Mapping[str, Any]) -> None:
        self.topic: str = configs["topic"]

    def test(self, record: SourceRecord) -> bool:
        return record.topic == self.topic

    def config_def(self) -> ConfigDef:
        return ConfigDef()


def test_transform_chain_with_predicates() -> None:
    registry = PluginRegistry()
    for cls in (Upper, DropEmpty, TopicIs):
        registry.add_class(cls)
    chain = build_chain({
        "transforms": "drop, up", "transforms.drop.type": "DropEmpty",
        "transforms.up.type": "Upper", "transforms.up.suffix": "!", "transforms.up.predicate": "isA",
        "transforms.up.negate": "true",
        "predicates": "isA", "predicates.isA.type": "TopicIs", "predicates.isA.topic": "a"}, registry)
    assert chain.apply(SourceRecord(topic="b", value="x")) == SourceRecord(topic="b", value="X!")
    assert chain.apply(SourceRecord(topic="a", value="x")) == SourceRecord(topic="a", value="x")
    assert chain.apply(SourceRecord(topic="b", value="")) is None
    with pytest.raises(ConfigException) as raised:
        build_chain({"transforms": "x", "transforms.x.type": "Nope"}, registry)
    assert raised.value.name == "transforms.x.type"


def test_entry_point_plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An installed distribution exposing a class (or a module) in the `moldau.connect.plugins` group."""
    (tmp_path / "ep_connect_plugin.py").write_text(
        "from moldau.connect.converters.simple import ByteArrayConverter\n"
        "class EntryPointConverter(ByteArrayConverter):\n"
        "    aliases = ('com.example.EntryPoint',)\n")
    dist = tmp_path / "ep_connect_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-connect-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[moldau.connect.plugins]\nshouting = ep_connect_plugin:EntryPointConverter\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = PluginRegistry.discover()
    assert registry.get("com.example.EntryPoint").cls.__name__ == "EntryPointConverter"
    assert registry.get("shouting").cls.__name__ == "EntryPointConverter"  # the entry point's own name
