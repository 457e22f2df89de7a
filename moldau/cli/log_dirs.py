"""Log directories from the command line: `moldau partitions log-dirs` lists them (as `kafka-log-dirs.sh
--describe` does), and the `log_dirs` field of a reassignment plan moves replicas between them.

In Kafka's reassignment JSON an entry may carry `"log_dirs"`, one absolute path (or `"any"`, no preference) per
replica, in the order of `"replicas"`. `--execute` sends AlterReplicaLogDirs to each broker for its replica
(retrying while the replica does not exist there yet: REPLICA_NOT_AVAILABLE) and waits until DescribeLogDirs shows
every replica in its directory with no future replica left; `--verify` checks the same. Requests go through
kafka-python's admin client, as the reassignment ones do (librdkafka has neither API).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from moldau.cli.common import CliError, plural
from moldau.cli.output import emit

__all__ = ["ANY_LOG_DIR", "ReplicaDirs", "describe", "move_replicas", "parse_log_dirs", "print_log_dirs",
           "replica_dirs_done"]

ANY_LOG_DIR = "any"
ReplicaDirs = dict[tuple[str, int, int], str]  # (topic, partition, broker) -> absolute log directory
_POLL_INTERVAL_S = 0.5


def parse_log_dirs(text: str) -> ReplicaDirs:
    """The replicas a plan places in a given directory. Raises CliError when an entry's `log_dirs` is not one
    path or "any" per replica."""
    try:
        entries = json.loads(text)["partitions"]
        wanted: ReplicaDirs = {}
        for entry in entries:
            dirs = entry.get("log_dirs")
            if dirs is None:
                continue
            topic, partition, replicas = str(entry["topic"]), int(entry["partition"]), entry["replicas"]
            if not isinstance(dirs, list) or len(dirs) != len(replicas):
                raise CliError(f"{topic}-{partition}: log_dirs must name one directory (or \"any\") per replica")
            for broker, path in zip(replicas, dirs, strict=True):
                if path != ANY_LOG_DIR:
                    wanted[(topic, partition, int(broker))] = str(path)
    except (ValueError, KeyError, TypeError) as exc:
        raise CliError(f"not a reassignment plan: {exc}") from None
    return wanted


def describe(client: Any, brokers: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """kafka-python's DescribeLogDirs answer of every broker (or those named)."""
    try:
        return list(client.describe_log_dirs(brokers=list(brokers) if brokers else None))
    except Exception as exc:
        raise CliError(f"cannot describe the log directories: {exc}") from None


def _placement(described: list[dict[str, Any]]) -> dict[tuple[str, int, int], tuple[str, bool]]:
    """(topic, partition, broker) -> (directory, whether a future replica is still on its way there)."""
    found: dict[tuple[str, int, int], tuple[str, bool]] = {}
    for result in described:
        for log_dir in result["log_dirs"]:
            for topic in log_dir["topics"]:
                for p in topic["partitions"]:
                    key = (topic["name"], p["partition_index"], result["broker"])
                    if p["is_future_key"]:
                        found[key] = (log_dir["log_dir"], True)
                    elif key not in found:
                        found[key] = (log_dir["log_dir"], False)
    return found


def replica_dirs_done(client: Any, wanted: Mapping[tuple[str, int, int], str]) -> dict[tuple[str, int, int], str]:
    """Each replica of `wanted` not yet (only) in its directory, with where it is now."""
    placement = _placement(describe(client, sorted({b for _, _, b in wanted})))
    pending = {}
    for key, path in wanted.items():
        where, moving = placement.get(key, ("nowhere", False))
        if moving or where != path:
            pending[key] = f"moving to {path}" if moving else f"in {where}, not {path}"
    return pending


def move_replicas(client: Any, wanted: Mapping[tuple[str, int, int], str], timeout_s: float) -> int:
    """Ask each broker to move its replicas of `wanted`, then wait until they are there (0) or the timeout
    passes or a broker refuses (1)."""
    from kafka import TopicPartitionReplica

    deadline = time.monotonic() + timeout_s
    left = dict(wanted)
    failed = False
    while left:
        try:
            answers = client.alter_replica_log_dirs({TopicPartitionReplica(*key): path for key, path in left.items()})
        except Exception as exc:
            raise CliError(f"cannot move replicas between log directories: {exc}") from None
        retry = {}
        for tpr, error in answers.items():
            key = (tpr.topic, tpr.partition, tpr.broker_id)
            name = _error_name(error)
            if name == "REPLICA_NOT_AVAILABLE" and key in left:
                retry[key] = left[key]  # not created on that broker yet (the reassignment adds it)
            elif name != "NONE" and key in left:
                print(f"error: {key[0]}-{key[1]} on broker {key[2]}: {name}", file=sys.stderr)
                failed = True
        left = retry
        if left and time.monotonic() >= deadline:
            print(f"error: {plural(len(left), 'replica')} still not on their brokers after {timeout_s:g} s",
                  file=sys.stderr)
            return 1
        if left:
            time.sleep(_POLL_INTERVAL_S)
    while pending := replica_dirs_done(client, wanted):
        if time.monotonic() >= deadline:
            print(f"error: {plural(len(pending), 'replica')} still moving between log directories after "
                  f"{timeout_s:g} s; follow it with --verify", file=sys.stderr)
            return 1
        time.sleep(_POLL_INTERVAL_S)
    print(f"{plural(len(wanted), 'replica')} in their log directories")
    return 1 if failed else 0


def print_log_dirs(client: Any, args: argparse.Namespace) -> int:
    """`moldau partitions log-dirs`: each broker's log directories, their space, and the partitions in them
    (`--output json`: the same as one document)."""
    topics = set(args.topics) if args.topics else None
    document = [{
        "broker": result["broker"],
        "log_dir": log_dir["log_dir"],
        "error_code": log_dir["error_code"],
        "usable_bytes": log_dir.get("usable_bytes", -1),
        "total_bytes": log_dir.get("total_bytes", -1),
        "partitions": [
            {"topic": topic["name"], "partition": p["partition_index"], "size": p["partition_size"],
             "future": bool(p["is_future_key"]), "offset_lag": p["offset_lag"]}
            for topic in sorted(log_dir["topics"], key=lambda t: t["name"])
            if topics is None or topic["name"] in topics
            for p in sorted(topic["partitions"], key=lambda p: p["partition_index"])],
    } for result in sorted(describe(client, args.brokers), key=lambda r: r["broker"])
        for log_dir in result["log_dirs"]]
    emit(args, document, lambda: _log_dirs_text(document))
    return 0


def _log_dirs_text(document: list[dict[str, Any]]) -> str:
    lines = []
    for log_dir in document:
        state = "ok" if log_dir["error_code"] == 0 else f"error {log_dir['error_code']} (offline)"
        lines.append(f"broker {log_dir['broker']} {log_dir['log_dir']}: {state}, "
                     f"{_size(log_dir['usable_bytes'])} usable of {_size(log_dir['total_bytes'])}")
        for p in log_dir["partitions"]:
            future = f" future replica, {p['offset_lag']} offsets behind" if p["future"] else ""
            lines.append(f"  {p['topic']}-{p['partition']}  {_size(p['size'])}{future}")
    return "\n".join(lines)


def _error_name(error: Any) -> str:
    """The Kafka name (e.g. REPLICA_NOT_AVAILABLE, NONE) of a kafka-python error class."""
    from moldau.protocol.errors import ErrorCode

    try:
        return ErrorCode(error.errno).name.upper()
    except (ValueError, AttributeError):
        return str(getattr(error, "__name__", error))


def _size(n: int) -> str:
    if n < 0:
        return "unknown"
    if n < 1024:
        return f"{n} B"
    scaled, unit = n / 1024, "KiB"
    for bigger in ("MiB", "GiB", "TiB"):
        if scaled < 1024:
            break
        scaled, unit = scaled / 1024, bigger
    return f"{scaled:.1f} {unit}"
