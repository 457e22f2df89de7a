"""Renders docs/configuration.md from the config tables, so the doc cannot drift from the code: one row per
table entry, its cells taken from the entry alone.

    python -m moldau.config_doc > docs/configuration.md
"""

from __future__ import annotations

from moldau.config import BROKER_CONFIGS, TOPIC_CONFIGS, ConfigDef, TopicConfigDef

_INTRO = """# Configuration

`moldau server` reads Kafka's configuration names, with the same meaning, units and defaults where Kafka has
them. Precedence, highest first: `--override key=value` flags, the properties file given as the first
argument, the defaults below. For a topic: its own configs (set at creation or altered later), then dynamic
broker configs (this broker's, then cluster-wide), then the static broker config, then the default
(DescribeConfigs lists these as synonyms).

```sh
./dev server                                          # all defaults: 127.0.0.1:9092, data in ./data
./dev server server.properties --override node.id=2   # a file, with one value overridden
```

Without a properties file, the broker starts as if given one with what Kafka's stock server.properties sets
for a development machine: `group.initial.rebalance.delay.ms=0`, so a consumer started by hand gets its
partitions at once. The defaults below stay Kafka's built-in ones (3000 ms for that delay, suited to a fleet
of consumers starting together); a properties file or an `--override` sets any of them.

An invalid value stops the broker with one line naming the key, the value and what is allowed, e.g.
`error: Invalid value abc for configuration log.segment.bytes: Not a number of type INT`. An unknown name is
kept and logged as a warning, as Kafka does; when it is a topic config's name (`file.delete.delay.ms`), the
warning names the broker config that sets that topic config's default (`log.segment.delete.delay.ms`). A
properties file uses Java properties syntax (`#` and `!` comments, `key=value` or `key: value`, backslash
continuation).

Configs marked "not yet" in the "acted on" column are accepted, so that Kafka configuration files carry over,
but the feature behind them is not built yet (preallocation, down-conversion) or
does not apply (thread pools); the broker logs a warning when one is set.

Every other broker config Kafka 4.2 defines is known too (`moldau/config/kafka_broker_configs.py`), marked
"not yet" and described as having no effect: tiered storage, Kerberos and OAuth settings,
metrics reporters, purgatories and the like have nothing to act on in Moldau. They are validated by their
Kafka type, stored, and described with their source (their Kafka default until set), so admin tools that read
a broker's whole config and write it back unchanged work; setting one in the properties file or with
AlterConfigs/IncrementalAlterConfigs logs a warning that it has no effect.

This file is generated: `python -m moldau.config_doc > docs/configuration.md`.
"""


def _cell(value: object) -> str:
    return "—" if value is None or value == "" else str(value).replace("|", "\\\\|")


def _acted_on(definition: ConfigDef | TopicConfigDef) -> str:
    return "yes" if definition.acted_on else "not yet"


def _own_default(definition: TopicConfigDef) -> str:
    return f"(none: `{definition.default}`)" if definition.default is not None else ""


def render() -> str:
    lines = [_INTRO, "## Broker configs", "",
             '"Dynamic" configs can be changed while the broker runs, with IncrementalAlterConfigs or AlterConfigs '
             "on the broker resource (any Kafka admin client); the others are read at start.", "",
             "| name | type | default | dynamic | acted on | meaning |", "|---|---|---|---|---|---|"]
    for d in sorted(BROKER_CONFIGS.values(), key=lambda d: d.name):
        lines.append(f"| `{d.name}` | {d.type.name.lower()} | {_cell(d.default)} | "
                     f"{'yes' if d.dynamic else 'no'} | {_acted_on(d)} | {_cell(d.doc)} |")
    lines += ["", "## Topic configs", "",
              "Set with `moldau topics create NAME --config key=value`, `moldau topics alter NAME --config "
              "key=value` or any Kafka admin client. An unknown topic config is refused (INVALID_CONFIG). The "
              "broker configs named under \"default from\" supply the value when the topic sets none; "
              "\"(none: `x`)\" marks a topic config no broker config supplies, whose default is x. "
              "`cleanup.policy=compact` is accepted, but nothing is compacted yet.", "",
              "| name | type | default from | acted on | meaning |", "|---|---|---|---|---|"]
    for t in sorted(TOPIC_CONFIGS.values(), key=lambda t: t.name):
        synonyms = ", ".join(f"`{s.name}`" for s in t.synonyms) or _own_default(t)
        lines.append(f"| `{t.name}` | {t.type.name.lower()} | {_cell(synonyms)} | {_acted_on(t)} | "
                     f"{_cell(t.doc)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render(), end="")
