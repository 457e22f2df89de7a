"""`moldau configs`: describe and alter dynamic configs of brokers, the cluster's broker defaults, topics and
groups, with the options of Kafka's `kafka-configs.sh`, so its commands work with the script's name changed:

    moldau configs --bootstrap-server 127.0.0.1:9092 --entity-type brokers --entity-name 1 --describe
    moldau configs --entity-type brokers --entity-default --alter --add-config log.retention.ms=3600000
    moldau configs --entity-type topics --entity-name orders --alter --add-config 'cleanup.policy=[compact,delete]'

`--add-config` takes Kafka's syntax: `k1=v1,k2=v2`, a value holding commas in square brackets. The requests are
Kafka's DescribeConfigs and IncrementalAlterConfigs (SET and DELETE), sent with Moldau's own protocol client as
the Kafka tool sends them: librdkafka cannot name the cluster-wide broker default (resource name ""), and a
broker's own configs go to that broker, which alone knows its static configs and checks its files (the TLS key
stores). A refusal prints the broker's error and exits with status 1. Quotas and SCRAM users have their own
commands (`moldau quotas`, `moldau users`), client metrics subscriptions `moldau client-metrics`.
"""

from __future__ import annotations

import argparse
from typing import Any

from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kio.schema.metadata.v12.request import MetadataRequest
from kio.static.primitive import i8

from moldau.cli.common import CliError, add_bootstrap_option
from moldau.cli.output import add_output_option, emit
from moldau.cli.raw_request import call, check
from moldau.config.schema import ConfigSource

# Kafka's entity types this command handles: their ConfigResource type and how the tool names one.
ENTITY_TYPES = {"brokers": (4, "broker"), "topics": (2, "topic"), "groups": (32, "group")}
# The source of a value set on the entity itself: what `--describe` lists without `--all`.
_OWN_SOURCE = {"brokers": ConfigSource.DYNAMIC_BROKER_CONFIG, "topics": ConfigSource.DYNAMIC_TOPIC_CONFIG,
               "groups": ConfigSource.GROUP_CONFIG}
OP_SET, OP_DELETE = 0, 1


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("configs", help="describe and alter broker, topic and group configs",
                                   description="Describe and alter configs as Kafka's kafka-configs.sh does.")
    add_bootstrap_option(parser)
    add_output_option(parser)
    parser.add_argument("--entity-type", required=True, choices=sorted(ENTITY_TYPES), help="what to configure")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--entity-name", metavar="NAME", help="the broker id, topic or group")
    which.add_argument("--entity-default", action="store_true",
                       help="brokers: the cluster-wide defaults every broker takes")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--describe", action="store_true", help="list the configs set on the entity")
    mode.add_argument("--alter", action="store_true", help="set (--add-config) and remove (--delete-config) configs")
    parser.add_argument("--all", action="store_true", help="--describe: every config, defaults included")
    parser.add_argument("--add-config", action="append", default=[], metavar="K=V[,K=V]",
                        help="configs to set; a value with commas in square brackets: k=[a,b] (repeatable)")
    parser.add_argument("--delete-config", action="append", default=[], metavar="K[,K]",
                        help="configs to remove, back to their defaults (repeatable)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.entity_default and args.entity_type != "brokers":
        raise CliError("--entity-default is for --entity-type brokers only")
    if args.describe and (args.add_config or args.delete_config):
        raise CliError("--add-config and --delete-config go with --alter")
    resource_type, noun = ENTITY_TYPES[args.entity_type]
    name = "" if args.entity_default else args.entity_name
    shown = "default broker" if args.entity_default else f"{noun} {name}"
    target = args.bootstrap_server
    if args.entity_type == "brokers" and not args.entity_default:
        target = _broker_address(args.bootstrap_server, name)
    if args.describe:
        return _describe(args, target, resource_type, name, shown)
    return _alter(target, resource_type, name, shown, args.add_config, args.delete_config)


def _broker_address(bootstrap: str, broker: str) -> str:
    """Where broker `broker` listens, from the cluster's metadata: its own configs are asked of it, as Kafka's
    admin client does."""
    if not broker.isdigit():
        raise CliError(f"--entity-name for brokers is a broker id, not '{broker}'")
    metadata = call(bootstrap, MetadataRequest(topics=(), allow_auto_topic_creation=False,
                                               include_topic_authorized_operations=False))
    for found in metadata.brokers:
        if int(found.node_id) == int(broker):
            return f"{found.host}:{found.port}"
    known = ", ".join(str(b.node_id) for b in metadata.brokers)
    raise CliError(f"no broker {broker} in the cluster (brokers: {known})")


def _describe(args: argparse.Namespace, target: str, resource_type: int, name: str, shown: str) -> int:
    request = DescribeConfigsRequest(resources=(DescribeConfigsResource(
        resource_type=i8(resource_type), resource_name=name, configuration_keys=None),),
        include_synonyms=True, include_documentation=False)
    (result,) = call(target, request).results
    check(result.error_code, result.error_message)
    own = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG if args.entity_default else _OWN_SOURCE[args.entity_type]
    listed = sorted((c for c in result.configs if args.all or int(c.config_source) == own), key=lambda c: c.name)
    document = [{"name": c.name, "value": None if c.is_sensitive else c.value, "sensitive": c.is_sensitive,
                 "read_only": c.read_only, "source": _source_name(c.config_source)} for c in listed]

    def text() -> str:
        lines = [f"{'All' if args.all else 'Dynamic'} configs for {shown} are:"]
        for c in listed:
            synonyms = ", ".join(f"{_source_name(s.source)}:{s.name}={_shown(s.value, c.is_sensitive)}"
                                 for s in c.synonyms)
            lines.append(f"  {c.name}={_shown(c.value, c.is_sensitive)} sensitive={str(c.is_sensitive).lower()} "
                         f"synonyms={{{synonyms}}}")
        return "\n".join(lines)

    emit(args, document, text)
    return 0


def _source_name(source: Any) -> str:
    """Kafka's name of a DescribeConfigs config source."""
    try:
        return ConfigSource(int(source)).name
    except ValueError:
        return "UNKNOWN"


def _shown(value: str | None, sensitive: bool) -> str:
    return "null" if sensitive or value is None else value


def _alter(target: str, resource_type: int, name: str, shown: str, additions: list[str], deletions: list[str]) -> int:
    settings = [pair for text in additions for pair in parse_add_config(text)]
    removals = [key.strip() for text in deletions for key in text.split(",") if key.strip()]
    if not settings and not removals:
        raise CliError("nothing to alter: give --add-config or --delete-config")
    both = sorted({k for k, _ in settings} & set(removals))
    if both:
        raise CliError(f"configs both added and deleted: {', '.join(both)}")
    configs: list[Any] = [AlterableConfig(name=k, config_operation=i8(OP_SET), value=v) for k, v in settings]
    configs += [AlterableConfig(name=k, config_operation=i8(OP_DELETE), value=None) for k in removals]
    request = IncrementalAlterConfigsRequest(resources=(AlterConfigsResource(
        resource_type=i8(resource_type), resource_name=name, configs=tuple(configs)),), validate_only=False)
    (result,) = call(target, request).responses
    check(result.error_code, result.error_message)
    print(f"Completed updating config for {shown}.")
    return 0


def parse_add_config(text: str) -> list[tuple[str, str]]:
    """Kafka's `--add-config` syntax: `k1=v1,k2=v2`, a value with commas in square brackets (`k=[a,b]`, which
    sets `a,b`). Raises CliError for a pair without `=`."""
    parts: list[str] = []
    depth, start = 0, 0
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(0, depth - 1)
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    pairs: list[tuple[str, str]] = []
    for part in (p.strip() for p in parts):
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--add-config: expected key=value, got '{part}'")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        pairs.append((key.strip(), value))
    return pairs
