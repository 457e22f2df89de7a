"""`moldau topics`: create, list, describe, alter and delete topics.

Every request goes through confluent-kafka's `AdminClient`, the Python binding of librdkafka, a
well-kept and widely deployed Kafka client: the tool sees the broker exactly as applications do.
"""

import argparse
import sys
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from confluent_kafka import TopicCollection, TopicPartition

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from moldau.cli.common import (
    REQUEST_TIMEOUT_S,
    CliError,
    add_action,
    check_reachable,
    client_config,
    error_name,
    kafka_error,
    request_failed,
    topic_error,
)
from moldau.cli.output import add_output_option, emit, wants_json
from moldau.cli.table import format_table

# Overrides set on the topic itself; DescribeConfigs v0 reports no source, only a default flag.
OVERRIDE_SOURCES = frozenset({ConfigSource.DYNAMIC_TOPIC_CONFIG.value, ConfigSource.UNKNOWN_CONFIG.value})


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `topics` and its subcommands to the top-level parser."""
    parser = subparsers.add_parser("topics", help="create, list, describe, alter and delete topics")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    _add_create(actions)
    _add_list(actions)
    _add_describe(actions)
    _add_alter(actions)
    _add_delete(actions)



def positive_int(text: str) -> int:
    """argparse type for counts that must be at least one."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: '{text}'") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def config_pair(text: str) -> tuple[str, str]:
    """argparse type for `key=value` topic configs."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected key=value, got '{text}'")
    return key, value


def _add_config_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=config_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="topic config to set (repeatable)",
    )


def _add_create(actions: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    parser = add_action(actions, "create", create, "create a topic")
    parser.add_argument("name", metavar="NAME")
    parser.add_argument("--partitions", type=positive_int, help="partition count (default: broker's)")
    parser.add_argument("--replication-factor", type=positive_int, help="replicas per partition (default: broker's)")
    _add_config_option(parser)
    parser.add_argument("--if-not-exists", action="store_true", help="succeed if the topic already exists")


def _add_list(actions: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    parser = add_output_option(add_action(actions, "list", list_topics, "list topic names"))
    parser.add_argument("--internal", action="store_true", help="include internal topics (names starting '__')")


def _add_describe(actions: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    parser = add_output_option(add_action(actions, "describe", describe,
                                          "show topics' partitions, replicas, configs and offsets"))
    parser.add_argument("names", nargs="*", metavar="NAME", help="topics to describe (default: all)")


def _add_alter(actions: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    parser = add_action(actions, "alter", alter, "add partitions to a topic or change its configs")
    parser.add_argument("name", metavar="NAME")
    parser.add_argument("--partitions", type=positive_int, help="new, larger partition count")
    _add_config_option(parser)
    parser.add_argument(
        "--delete-config",
        action="append",
        default=[],
        metavar="KEY",
        help="topic config to reset to the broker default (repeatable)",
    )


def _add_delete(actions: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    parser = add_action(actions, "delete", delete, "delete topics")
    parser.add_argument("names", nargs="+", metavar="NAME")


def admin_client(bootstrap: str) -> AdminClient:
    """An admin client for `bootstrap`, once one of its servers accepts connections."""
    check_reachable(bootstrap)
    return AdminClient(client_config(bootstrap))


def wait_result(future: "Future[Any]") -> Any:
    """The result of an admin future, bounded so an unresponsive broker cannot hang the command."""
    return future.result(timeout=REQUEST_TIMEOUT_S + 5)


def create(args: argparse.Namespace) -> int:
    """Create one topic; with --if-not-exists an existing topic is not an error."""
    admin = admin_client(args.bootstrap_server)
    topic = NewTopic(
        args.name,
        num_partitions=args.partitions or -1,
        replication_factor=args.replication_factor or -1,
        config=dict(args.config),
    )
    future = admin.create_topics([topic], request_timeout=REQUEST_TIMEOUT_S)[args.name]
    try:
        wait_result(future)
    except Exception as exc:
        err = kafka_error(exc)
        if err is None:
            raise request_failed(exc, f"cannot create topic '{args.name}'") from None
        if args.if_not_exists and error_name(err) == "TOPIC_ALREADY_EXISTS":
            print(f"topic '{args.name}' already exists")
            return 0
        raise topic_error(args.name, err, "create") from None
    print(f"created topic '{args.name}'")
    return 0


def topic_names(admin: AdminClient, internal: bool) -> list[str]:
    """All topic names, sorted; internal ones ('__' prefix, e.g. __consumer_offsets) only on request."""
    try:
        metadata = admin.list_topics(timeout=REQUEST_TIMEOUT_S)
    except Exception as exc:
        raise request_failed(exc, "cannot list topics") from None
    names: list[str] = sorted(metadata.topics)
    return [name for name in names if internal or not name.startswith("__")]


def list_topics(args: argparse.Namespace) -> int:
    """Print one topic name per line (a JSON list of names with --output json)."""
    names = topic_names(admin_client(args.bootstrap_server), args.internal)
    if names or wants_json(args):
        emit(args, names, lambda: "\n".join(names))
    return 0


def describe(args: argparse.Namespace) -> int:
    """Print a summary and a partition table for each topic; unknown topics are reported, not fatal."""
    admin = admin_client(args.bootstrap_server)
    # Duplicates would make librdkafka reject the whole request.
    names = list(dict.fromkeys(args.names)) or topic_names(admin, internal=False)
    if not names:
        emit(args, [], lambda: "no topics")
        return 0
    futures = admin.describe_topics(TopicCollection(names), request_timeout=REQUEST_TIMEOUT_S)
    failed = False
    described = []
    for name in names:
        try:
            description = wait_result(futures[name])
        except Exception as exc:
            err = kafka_error(exc)
            message = topic_error(name, err, "describe") if err else request_failed(exc, f"cannot describe '{name}'")
            print(f"error: {message}", file=sys.stderr)
            failed = True
            continue
        described.append(_topic_data(admin, description))
    if described or wants_json(args):
        emit(args, described, lambda: "\n\n".join(_topic_text(d) for d in described))
    return 1 if failed else 0


PARTITION_HEADERS = ("PARTITION", "LEADER", "REPLICAS", "ISR", "EARLIEST", "LATEST")


def _topic_data(admin: AdminClient, description: Any) -> dict[str, Any]:
    """One topic: id, config overrides, and per partition its leader, replicas, ISR and offsets."""
    partitions = sorted(description.partitions, key=lambda p: p.id)
    # OffsetSpec's factories carry no annotations upstream.
    earliest = _offsets(admin, description.name, partitions, OffsetSpec.earliest())  # type: ignore[no-untyped-call]
    latest = _offsets(admin, description.name, partitions, OffsetSpec.latest())  # type: ignore[no-untyped-call]
    return {
        "topic": description.name,
        "id": str(description.topic_id),
        "partition_count": len(partitions),
        "replication_factor": max((len(p.replicas) for p in partitions), default=0),
        "configs": _overridden_configs(admin, description.name),
        "partitions": [{"partition": p.id, "leader": _node_id(p.leader), "replicas": [n.id for n in p.replicas],
                        "isr": [n.id for n in p.isr], "earliest": earliest.get(p.id), "latest": latest.get(p.id)}
                       for p in partitions],
    }


def _topic_text(data: dict[str, Any]) -> str:
    """The text block for one topic: summary lines, then one row per partition."""
    configs = data["configs"]
    shown = (", ".join(f"{k}={v}" for k, v in configs.items()) or "(none overridden)" if isinstance(configs, dict)
             else configs)
    summary = format_table([("Id:", data["id"]), ("Partitions:", str(data["partition_count"])),
                            ("Replication factor:", str(data["replication_factor"])), ("Configs:", shown)],
                           indent="  ")
    rows = [(p["partition"], "none" if p["leader"] is None else str(p["leader"]),
             ",".join(map(str, p["replicas"])), ",".join(map(str, p["isr"])), p["earliest"], p["latest"])
            for p in data["partitions"]]
    table = format_table(rows, headers=PARTITION_HEADERS, indent="  ")
    return f"Topic: {data['topic']}\n{summary}\n\n{table}"


def _node_id(node: Any) -> int | None:
    """A broker id, or None for a partition without a leader."""
    return None if node is None or node.id < 0 else int(node.id)


def _overridden_configs(admin: AdminClient, name: str) -> dict[str, str] | str:
    """The topic's own config overrides (broker defaults left out), or why they are unavailable."""
    resource = ConfigResource(ResourceType.TOPIC, name)
    try:
        entries = wait_result(admin.describe_configs([resource], request_timeout=REQUEST_TIMEOUT_S)[resource])
    except Exception as exc:
        err = kafka_error(exc)
        return f"unavailable ({error_name(err) if err else exc})"
    return {entry.name: "(sensitive)" if entry.is_sensitive else entry.value
            for entry in sorted(entries.values(), key=lambda e: e.name)
            if _source_code(entry) in OVERRIDE_SOURCES and not entry.is_default}


def _source_code(entry: Any) -> int:
    """A config entry's source as a number: describe_configs results carry the raw int, not the enum."""
    source = entry.source
    return int(source.value if isinstance(source, ConfigSource) else source)


def _offsets(admin: AdminClient, name: str, partitions: Sequence[Any], spec: OffsetSpec) -> dict[int, int]:
    """Partition -> offset for `spec`; partitions whose lookup fails are simply absent."""
    if not partitions:
        return {}
    requests = {TopicPartition(name, p.id): spec for p in partitions}
    futures = admin.list_offsets(requests, request_timeout=REQUEST_TIMEOUT_S)
    offsets = {}
    for partition, future in futures.items():
        try:
            offsets[partition.partition] = wait_result(future).offset
        except Exception:
            continue
    return offsets


def alter(args: argparse.Namespace) -> int:
    """Grow the partition count and/or set and delete config overrides."""
    if args.partitions is None and not args.config and not args.delete_config:
        raise CliError("nothing to alter: give --partitions, --config or --delete-config")
    admin = admin_client(args.bootstrap_server)
    if args.partitions is not None:
        _add_partitions(admin, args.name, args.partitions)
        print(f"topic '{args.name}' now has {args.partitions} partitions")
    if args.config or args.delete_config:
        _alter_configs(admin, args.name, args.config, args.delete_config)
        changes = [f"{k}={v}" for k, v in args.config] + [f"-{k}" for k in args.delete_config]
        print(f"altered configs of topic '{args.name}': {', '.join(changes)}")
    return 0


def _add_partitions(admin: AdminClient, name: str, count: int) -> None:
    future = admin.create_partitions([NewPartitions(name, count)], request_timeout=REQUEST_TIMEOUT_S)[name]
    try:
        wait_result(future)
    except Exception as exc:
        err = kafka_error(exc)
        if err is None:
            raise request_failed(exc, f"cannot add partitions to topic '{name}'") from None
        raise topic_error(name, err, "add partitions to") from None


def _alter_configs(admin: AdminClient, name: str, settings: list[tuple[str, str]], removals: list[str]) -> None:
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in settings]
    entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in removals]
    resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
    future = admin.incremental_alter_configs([resource], request_timeout=REQUEST_TIMEOUT_S)[resource]
    try:
        wait_result(future)
    except Exception as exc:
        err = kafka_error(exc)
        if err is None:
            raise request_failed(exc, f"cannot alter configs of topic '{name}'") from None
        raise topic_error(name, err, "alter configs of") from None


def delete(args: argparse.Namespace) -> int:
    """Delete each named topic, reporting every failure; non-zero exit if any failed."""
    admin = admin_client(args.bootstrap_server)
    names = list(dict.fromkeys(args.names))
    futures = admin.delete_topics(names, request_timeout=REQUEST_TIMEOUT_S)
    failed = False
    for name in names:
        try:
            wait_result(futures[name])
        except Exception as exc:
            err = kafka_error(exc)
            message = topic_error(name, err, "delete") if err else request_failed(exc, f"cannot delete '{name}'")
            print(f"error: {message}", file=sys.stderr)
            failed = True
            continue
        print(f"deleted topic '{name}'")
    return 1 if failed else 0
