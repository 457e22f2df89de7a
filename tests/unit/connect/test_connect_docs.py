"""docs/connect.md lists every built-in converter, transform and predicate by the class names users configure."""

from __future__ import annotations

from pathlib import Path

from moldau.connect.plugins import PluginRegistry

ROOT = Path(__file__).resolve().parents[3]
TRANSFORMS = "org.apache.kafka.connect.transforms."


def test_every_transform_predicate_and_registry_converter_is_documented() -> None:
    text = (ROOT / "docs" / "connect.md").read_text()
    section = text.split("## Converters and transforms", 1)[1]
    documented = 0
    for info in PluginRegistry.discover(entry_points=False).plugins(connectors_only=False):
        name = info.class_name
        if info.type in ("transformation", "predicate"):
            short = name.removeprefix(TRANSFORMS).removeprefix("predicates.")
            assert f"`{short}`" in section or f"{short}`" in section, f"{name} is not documented"
            documented += 1
        elif info.cls.__module__.startswith(("moldau.connect.converters.json", "moldau.connect.converters.avro",
                                                  "moldau.connect.converters.protobuf")):
            assert f"`{name}`" in section, f"{name} is not documented"
            documented += 1
    assert documented >= 27  # 20 transforms, 3 predicates, 4 converters
