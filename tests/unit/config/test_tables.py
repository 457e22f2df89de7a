"""The definition tables are the single source: a config is one entry, and the generated doc and the set of
configs not acted on yet follow from the entries alone."""

from __future__ import annotations

import pytest

from moldau import config_doc
from moldau.config import (
    BROKER_CONFIGS,
    NOT_YET_ACTED_ON,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigDef,
    ConfigType,
    Range,
    Synonym,
    TopicConfigDef,
    describe_broker_configs,
    effective_topic_configs,
)


def _rows(text: str) -> dict[str, list[str]]:
    """The doc's table rows by config name; broker and topic configs of the same name both appear."""
    rows: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.startswith("| `"):
            cells = [cell.strip() for cell in line.strip("|").split(" | ")]
            rows.setdefault(cells[0].strip("`"), []).append(" | ".join(cells[1:]))
    return rows


def test_the_doc_has_one_row_per_table_entry_built_from_the_entry() -> None:
    rows = _rows(config_doc.render())
    for d in BROKER_CONFIGS.values():
        acted_on = "yes" if d.acted_on else "not yet"
        default = "—" if not d.default else d.default
        expected = f"{d.type.name.lower()} | {default} | {'yes' if d.dynamic else 'no'} | {acted_on} | {d.doc}"
        assert expected in rows[d.name], d.name
    for t in TOPIC_CONFIGS.values():
        synonyms = ", ".join(f"`{s.name}`" for s in t.synonyms) or f"(none: `{t.default}`)"
        assert f"{t.type.name.lower()} | {synonyms} | {'yes' if t.acted_on else 'not yet'} | {t.doc}" in rows[t.name]
    assert sum(len(r) for r in rows.values()) == len(BROKER_CONFIGS) + len(TOPIC_CONFIGS)


@pytest.mark.parametrize("acted_on", [True, False])
def test_a_new_broker_entry_is_all_the_doc_needs(monkeypatch: pytest.MonkeyPatch, acted_on: bool) -> None:
    new = ConfigDef("zz.example.ms", ConfigType.LONG, "42", "An example.", Range(low=0), dynamic=True,
                    acted_on=acted_on)
    monkeypatch.setattr(config_doc, "BROKER_CONFIGS", {**BROKER_CONFIGS, new.name: new})
    rendered = config_doc.render()
    expected = f"| `zz.example.ms` | long | 42 | yes | {'yes' if acted_on else 'not yet'} | An example. |"
    assert expected in rendered.splitlines()
    # Sorted by name: the new entry is the last broker row.
    assert rendered.split("\n\n## Topic configs")[0].rstrip().endswith(expected)


def test_a_new_topic_entry_is_all_the_doc_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    new = TopicConfigDef("aa.example.bytes", ConfigType.INT, "An example.", (Synonym("log.segment.bytes"),),
                         acted_on=False)
    monkeypatch.setattr(config_doc, "TOPIC_CONFIGS", {**TOPIC_CONFIGS, new.name: new})
    rows = config_doc.render().split("## Topic configs")[1].splitlines()
    first = next(line for line in rows if line.startswith("| `"))
    assert first == "| `aa.example.bytes` | int | `log.segment.bytes` | not yet | An example. |"


def test_not_yet_acted_on_is_derived_from_the_entries() -> None:
    derived = {d.name for d in BROKER_CONFIGS.values() if not d.acted_on}
    derived |= {d.name for d in TOPIC_CONFIGS.values() if not d.acted_on}
    assert derived == NOT_YET_ACTED_ON
    # Replication, its quotas and Java key stores exist: their configs are acted on. Preallocation does not.
    assert "min.insync.replicas" not in NOT_YET_ACTED_ON
    assert "replica.fetch.max.bytes" not in NOT_YET_ACTED_ON
    assert "leader.replication.throttled.replicas" not in NOT_YET_ACTED_ON
    assert "ssl.keystore.password" not in NOT_YET_ACTED_ON
    assert "log.preallocate" in NOT_YET_ACTED_ON


def test_a_topic_default_and_its_broker_configs_name_each_other() -> None:
    for t in TOPIC_CONFIGS.values():
        for synonym in t.synonyms:
            assert BROKER_CONFIGS[synonym.name].topic_config == t.name, (t.name, synonym.name)
    for d in BROKER_CONFIGS.values():
        if d.topic_config is not None:
            assert d.name in [s.name for s in TOPIC_CONFIGS[d.topic_config].synonyms], d.name


def test_every_entry_is_described_and_its_default_parses() -> None:
    broker = BrokerConfig()
    assert [e.name for e in describe_broker_configs(broker)] == sorted(BROKER_CONFIGS)
    assert [e.name for e in effective_topic_configs(broker, {})] == sorted(TOPIC_CONFIGS)
    for d in BROKER_CONFIGS.values():
        if d.default is not None:
            d.parse(d.default)
