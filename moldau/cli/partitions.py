"""`moldau partitions reassign`: move partition replicas between brokers while they keep serving (KIP-455).

`--generate` proposes a balanced assignment (`reassignment_plan`) in Kafka's reassignment JSON format, which
Kafka's own `kafka-reassign-partitions.sh` also reads and writes; `--execute` submits a plan with
AlterPartitionReassignments and follows it with ListPartitionReassignments until nothing moves; `--verify`
checks whether a plan is done; `--cancel` reverts a plan's partitions that are still moving. A plan's `log_dirs`
fields move replicas between the log directories of their brokers too (`moldau.cli.log_dirs`), and
`moldau partitions log-dirs` lists every broker's log directories with the partitions in them.

The current assignment and the live brokers come from confluent-kafka's `AdminClient`, as in `moldau topics`.
librdkafka has no reassignment API, so those two requests go through kafka-python's `KafkaAdminClient`
(already installed: the console consumer decodes records with it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from moldau.cli.common import (
    REQUEST_TIMEOUT_S,
    CliError,
    add_bootstrap_option,
    check_reachable,
    command_properties,
    plural,
    request_failed,
)
from moldau.cli.log_dirs import ReplicaDirs, move_replicas, parse_log_dirs, print_log_dirs, replica_dirs_done
from moldau.cli.output import add_output_option
from moldau.cli.progress import Progress
from moldau.cli.reassignment_plan import Assignment, TopicPartition, moved_replicas, plan_reassignment
from moldau.cli.reassignment_throttle import clear_throttle, set_log_dirs_throttle, set_throttle
from moldau.cli.topics import admin_client, topic_names

Handler = Callable[[argparse.Namespace], int]
PLAN_VERSION = 1
POLL_INTERVAL_S = 1.0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `partitions` and its subcommands to the top-level parser."""
    parser = subparsers.add_parser("partitions", help="move partition replicas between brokers")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    text = "generate, execute, verify or cancel a partition reassignment"
    reassign_parser = actions.add_parser("reassign", help=text, description=text)
    add_bootstrap_option(reassign_parser)
    modes = reassign_parser.add_argument_group("what to do (--generate and --execute may go together)")
    modes.add_argument("--generate", action="store_true", help="print a balanced plan as JSON")
    modes.add_argument("--execute", action="store_true",
                       help="submit the plan (--plan, or the one --generate makes) and follow it until done")
    modes.add_argument("--verify", action="store_true", help="check whether the plan is complete")
    modes.add_argument("--cancel", action="store_true", help="cancel the plan's partitions that are still moving")
    reassign_parser.add_argument("--plan", type=Path, metavar="FILE", help="a plan in Kafka's reassignment JSON")
    reassign_parser.add_argument("--topics", type=_names, metavar="A,B",
                                 help="topics to plan for (default: every topic but internal ones)")
    reassign_parser.add_argument("--brokers", type=_broker_ids, metavar="1,2,3",
                                 help="brokers to spread replicas over (default: every live broker)")
    reassign_parser.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                                 help="how long --execute follows the reassignment (default: 600)")
    reassign_parser.add_argument("--throttle", type=_rate, metavar="BYTES_PER_S",
                                 help="with --execute: cap what the moving replicas copy at this many bytes per "
                                      "second per broker (replication quotas), removed once the plan is complete")
    reassign_parser.add_argument("--replica-alter-log-dirs-throttle", type=_rate, metavar="BYTES_PER_S",
                                 help="with --execute and a plan naming log_dirs: cap each broker's copying between "
                                      "its log directories at this many bytes per second, removed once done")
    reassign_parser.add_argument("--preserve-throttles", action="store_true",
                                 help="with --verify: keep the replication throttles of a complete plan")
    reassign_parser.set_defaults(func=reassign)
    text = "list each broker's log directories, their free space and the partitions in them"
    dirs_parser = actions.add_parser("log-dirs", help=text, description=text)
    add_bootstrap_option(dirs_parser)
    dirs_parser.add_argument("--topics", type=_names, metavar="A,B", help="only these topics' partitions")
    dirs_parser.add_argument("--brokers", type=_broker_ids, metavar="1,2,3", help="only these brokers")
    add_output_option(dirs_parser)
    dirs_parser.set_defaults(func=log_dirs)


def log_dirs(args: argparse.Namespace) -> int:
    with _reassignment_client(args.bootstrap_server) as client:
        return print_log_dirs(client, args)


def _names(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError("expected a comma-separated list of topic names")
    return names


def _rate(text: str) -> int:
    try:
        rate = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected bytes per second, got '{text}'") from None
    if rate < 1:
        raise argparse.ArgumentTypeError("expected at least 1 byte per second")
    return rate


def _broker_ids(text: str) -> list[int]:
    try:
        ids = [int(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated broker ids, got '{text}'") from None
    if not ids:
        raise argparse.ArgumentTypeError("expected at least one broker id")
    return ids


def reassign(args: argparse.Namespace) -> int:
    modes = [m for m in ("generate", "execute", "verify", "cancel") if getattr(args, m)]
    if not modes or (len(modes) > 1 and set(modes) != {"generate", "execute"}):
        raise CliError("give one of --generate, --execute, --verify or --cancel (or --generate --execute)")
    if args.generate:
        if args.plan is not None:
            raise CliError("--generate makes the plan: --plan is for --execute, --verify and --cancel")
        plan = generate(args.bootstrap_server, args.topics, args.brokers)
        if not args.execute:
            return 0
    else:
        if args.plan is None:
            raise CliError(f"--{modes[0]} needs --plan FILE")
        plan = read_plan(args.plan)
    dirs = parse_log_dirs(_read(args.plan)) if args.plan is not None else {}
    if args.throttle is not None and not args.execute:
        raise CliError("--throttle goes with --execute")
    dirs_throttle = args.replica_alter_log_dirs_throttle
    if dirs_throttle is not None and not (args.execute and dirs):
        raise CliError("--replica-alter-log-dirs-throttle goes with --execute and a plan that names log_dirs")
    if args.execute:
        return execute(args.bootstrap_server, plan, args.timeout, dirs, args.throttle, dirs_throttle)
    if args.verify:
        return verify(args.bootstrap_server, plan, dirs, clear=not args.preserve_throttles)
    return cancel(args.bootstrap_server, plan)


# -- plans ------------------------------------------------------------------------------------------------------


def plan_json(plan: Mapping[TopicPartition, Sequence[int]]) -> str:
    """A plan in Kafka's reassignment JSON format, one partition per line; each replica's log directory is
    "any" (no preference), as Kafka's tool writes it, ready to be edited."""
    lines = [json.dumps({"topic": t, "partition": p, "replicas": list(plan[(t, p)]),
                         "log_dirs": ["any"] * len(plan[(t, p)])}) for t, p in sorted(plan)]
    body = "".join(f"\n    {line}," for line in lines).rstrip(",")
    return f'{{"version": {PLAN_VERSION}, "partitions": [{body}{chr(10) if lines else ""}]}}'


def parse_plan(text: str) -> Assignment:
    """Partition -> target replicas from Kafka's reassignment JSON. Raises CliError."""
    try:
        document = json.loads(text)
        entries = document["partitions"]
        plan: Assignment = {}
        for entry in entries:
            key = (str(entry["topic"]), int(entry["partition"]))
            replicas = tuple(int(b) for b in entry["replicas"])
            if key in plan:
                raise CliError(f"{key[0]}-{key[1]} appears twice in the plan")
            plan[key] = replicas
    except (ValueError, KeyError, TypeError) as exc:
        raise CliError(f"not a reassignment plan ({{\"version\":1,\"partitions\":[{{\"topic\":..,\"partition\":..,"
                       f"\"replicas\":[..]}}]}}): {exc}") from None
    return plan


def read_plan(path: Path) -> Assignment:
    return parse_plan(_read(path))


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None


def _cluster_state(bootstrap: str, topics: Sequence[str] | None) -> tuple[Assignment, list[int]]:
    """The current replicas of the partitions of `topics` (None: every non-internal topic), and the live brokers."""
    admin = admin_client(bootstrap)
    names = list(dict.fromkeys(topics)) if topics else topic_names(admin, internal=False)
    try:
        metadata = admin.list_topics(timeout=REQUEST_TIMEOUT_S)
    except Exception as exc:
        raise request_failed(exc, "cannot read the cluster metadata") from None
    missing = [name for name in names if name not in metadata.topics]
    if missing:
        raise CliError(f"no such topic: {', '.join(missing)}")
    current = {(name, p.id): tuple(p.replicas) for name in names
               for p in metadata.topics[name].partitions.values()}
    return current, sorted(metadata.brokers)


def generate(bootstrap: str, topics: Sequence[str] | None, brokers: Sequence[int] | None) -> Assignment:
    """Print (stdout) a plan moving the partitions that change; a summary and the current assignment go to
    stderr, the latter to roll back with. Returns the plan."""
    current, live = _cluster_state(bootstrap, topics)
    targets = sorted(set(brokers)) if brokers else live
    dead = [b for b in targets if b not in live]
    if dead:
        raise CliError(f"brokers {dead} are not live (live: {live})")
    try:
        proposed = plan_reassignment(current, targets)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    plan = {key: replicas for key, replicas in proposed.items() if replicas != current[key]}
    print(plan_json(plan))
    moved = moved_replicas(current, plan)
    print(f"the plan moves {plural(moved, 'replica')} and changes {plural(len(plan), 'partition')} of "
          f"{len(current)} over brokers {','.join(map(str, targets))}", file=sys.stderr)
    if plan:
        print(f"current assignment of these partitions (to roll back):\n"
              f"{plan_json({key: current[key] for key in plan})}", file=sys.stderr)
    return plan


# -- requests ---------------------------------------------------------------------------------------------------


@contextmanager
def _reassignment_client(bootstrap: str) -> Iterator[Any]:
    """kafka-python's admin client (librdkafka has no reassignment API); it asks the broker it reaches, which
    forwards to the active controller."""
    check_reachable(bootstrap)
    from kafka.admin import KafkaAdminClient

    try:
        from moldau.cli.command_config import to_kafka_python

        client = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="moldau-cli",
                                  request_timeout_ms=int(REQUEST_TIMEOUT_S * 1000),
                                  **to_kafka_python(command_properties()))
    except Exception as exc:
        raise CliError(f"cannot connect to {bootstrap}: {exc}") from None
    try:
        yield client
    finally:
        client.close()


def _error_name(error: Any) -> str:
    """The Kafka name of a kafka-python error class, e.g. NO_REASSIGNMENT_IN_PROGRESS."""
    from moldau.protocol.errors import ErrorCode

    try:
        return ErrorCode(error.errno).name.upper()
    except (ValueError, AttributeError):
        return str(getattr(error, "__name__", error))


def _submit(bootstrap: str, changes: Mapping[TopicPartition, Sequence[int] | None]) -> dict[TopicPartition, str]:
    """Send AlterPartitionReassignments; returns the error name of each refused partition."""
    from kafka import TopicPartition as KafkaTopicPartition

    with _reassignment_client(bootstrap) as client:
        request = {KafkaTopicPartition(t, p): None if r is None else list(r) for (t, p), r in sorted(changes.items())}
        try:
            answers = client.alter_partition_reassignments(request, timeout_ms=int(REQUEST_TIMEOUT_S * 1000))
        except Exception as exc:
            raise CliError(f"cannot submit the reassignment: {_error_name(exc)}: {exc}") from None
    return {(tp.topic, tp.partition): _error_name(error) for tp, error in answers.items() if error is not None}


def _ongoing(client: Any, keys: Sequence[TopicPartition]) -> dict[TopicPartition, dict[str, list[int]]]:
    """The plan's partitions still being reassigned, with their replicas, adding and removing lists."""
    wanted: dict[str, list[int]] = {}
    for topic, partition in keys:
        wanted.setdefault(topic, []).append(partition)
    try:
        listing = client.list_partition_reassignments(wanted, timeout_ms=int(REQUEST_TIMEOUT_S * 1000))
    except Exception as exc:
        raise CliError(f"cannot list the reassignments: {_error_name(exc)}: {exc}") from None
    return {(tp.topic, tp.partition): state for tp, state in listing.items()}


def _moving(key: TopicPartition, state: Mapping[str, list[int]]) -> str:
    return (f"{key[0]}-{key[1]} (replicas {_ids(state['replicas'])}, adding {_ids(state['adding_replicas'])}, "
            f"removing {_ids(state['removing_replicas'])})")


def _ids(brokers: Sequence[int]) -> str:
    return ",".join(map(str, brokers)) or "-"


# -- execute, verify, cancel ------------------------------------------------------------------------------------


def execute(bootstrap: str, plan: Mapping[TopicPartition, Sequence[int]], timeout_s: float,
            dirs: ReplicaDirs | None = None, throttle: int | None = None, dirs_throttle: int | None = None) -> int:
    """Submit the plan, then report the partitions still moving every second until none is (0) or the timeout
    passes (1); then move the replicas the plan puts in given log directories there. Refused partitions are
    reported and make the exit code 1. With `throttle`, the moves are held to that many bytes per second
    (`moldau.cli.reassignment_throttle`) until they are done; with `dirs_throttle`, the moves between log
    directories."""
    if not plan:
        print("nothing to reassign")
        return 0
    started = time.monotonic()
    if throttle is not None:
        current, _ = _cluster_state(bootstrap, sorted({topic for topic, _ in plan}))
        brokers = set_throttle(admin_client(bootstrap), current, plan, throttle)
        print(f"the inter-broker throttle limit is {throttle} B/s on brokers {_ids(brokers)}")
    code = _execute_replicas(bootstrap, plan, timeout_s)
    if throttle is not None:
        if code == 0:
            clear_throttle(admin_client(bootstrap), sorted({topic for topic, _ in plan}), brokers)
            print("throttle removed")
        else:
            print("the throttle stays until --verify finds the plan complete", file=sys.stderr)
    if dirs and code == 0:
        code = _move_between_dirs(bootstrap, dirs, max(timeout_s - (time.monotonic() - started), 1.0),
                                  dirs_throttle)
    return code


def _move_between_dirs(bootstrap: str, dirs: ReplicaDirs, timeout_s: float, throttle: int | None) -> int:
    brokers = sorted({broker for _, _, broker in dirs})
    if throttle is not None:
        set_log_dirs_throttle(admin_client(bootstrap), brokers, throttle)
        print(f"the log directory throttle limit is {throttle} B/s on brokers {_ids(brokers)}")
    with _reassignment_client(bootstrap) as client:
        code = move_replicas(client, dirs, timeout_s)
    if throttle is not None:
        if code == 0:
            set_log_dirs_throttle(admin_client(bootstrap), brokers, None)
            print("log directory throttle removed")
        else:
            print("the log directory throttle stays until --verify finds the plan complete", file=sys.stderr)
    return code


def _execute_replicas(bootstrap: str, plan: Mapping[TopicPartition, Sequence[int]], timeout_s: float) -> int:
    refused = _submit(bootstrap, plan)
    for (topic, partition), error in sorted(refused.items()):
        print(f"error: {topic}-{partition}: {error}", file=sys.stderr)
    accepted = [key for key in sorted(plan) if key not in refused]
    print(f"reassigning {plural(len(accepted), 'partition')}")
    deadline = time.monotonic() + timeout_s
    last: list[str] | None = None
    with _reassignment_client(bootstrap) as client, Progress("reassigning", total=len(accepted),
                                                             unit="partition") as progress:
        while accepted:
            ongoing = _ongoing(client, accepted)
            progress.advance_to(len(accepted) - len(ongoing))
            if not ongoing:
                break
            report = [_moving(key, state) for key, state in sorted(ongoing.items())]
            if report != last:
                print(f"{plural(len(ongoing), 'partition')} moving: " + "; ".join(report))
                last = report
            if time.monotonic() >= deadline:
                print(f"error: still moving after {timeout_s:g} s; follow it with --verify", file=sys.stderr)
                return 1
            time.sleep(POLL_INTERVAL_S)
    if accepted:
        print(f"reassignment complete: {plural(len(accepted), 'partition')} moved")
    return 1 if refused else 0


def verify(bootstrap: str, plan: Mapping[TopicPartition, Sequence[int]], dirs: ReplicaDirs | None = None,
           clear: bool = True) -> int:
    """Print each partition's status; 0 if every partition has exactly the planned replicas, each in the log
    directory the plan names for it. A complete plan's replication throttles are removed unless `clear` is
    False (Kafka's --preserve-throttles)."""
    current, _ = _cluster_state(bootstrap, sorted({topic for topic, _ in plan}))
    with _reassignment_client(bootstrap) as client:
        ongoing = _ongoing(client, sorted(plan))
    done = 0
    for key in sorted(plan):
        name = f"{key[0]}-{key[1]}"
        target = tuple(plan[key])
        if key in ongoing:
            print(f"{_moving(key, ongoing[key])}: still moving")
        elif key not in current:
            print(f"{name}: no such partition")
        elif current[key] == target:
            print(f"{name}: complete")
            done += 1
        elif set(current[key]) == set(target):
            print(f"{name}: complete, preferred leader order {_ids(current[key])} instead of {_ids(target)}")
            done += 1
        else:
            print(f"{name}: replicas {_ids(current[key])}, not {_ids(target)} (not submitted, or cancelled)")
    print(f"{done} of {plural(len(plan), 'partition')} complete")
    if done == len(plan) and clear:
        # As Kafka's tool: a complete plan leaves no throttle behind (nothing changes where none was set).
        topics = sorted({topic for topic, _ in plan})
        _, live = _cluster_state(bootstrap, topics)
        clear_throttle(admin_client(bootstrap), topics, live)
        print(f"replication throttles cleared on brokers {_ids(live)} and topics {','.join(topics)}")
    pending: dict[tuple[str, int, int], str] = {}
    if dirs:
        with _reassignment_client(bootstrap) as client:
            pending = replica_dirs_done(client, dirs)
        for (topic, partition, broker), state in sorted(pending.items()):
            print(f"{topic}-{partition} on broker {broker}: {state}")
        print(f"{len(dirs) - len(pending)} of {plural(len(dirs), 'replica')} in their log directories")
    return 0 if done == len(plan) and not pending else 1


def cancel(bootstrap: str, plan: Mapping[TopicPartition, Sequence[int]]) -> int:
    """Cancel the plan's reassignments still in progress: their partitions go back to the replicas they had."""
    refused = _submit(bootstrap, dict.fromkeys(plan))
    failed = False
    for key in sorted(plan):
        error = refused.get(key)
        if error is None:
            print(f"{key[0]}-{key[1]}: cancelled")
        elif error == "NO_REASSIGNMENT_IN_PROGRESS":
            print(f"{key[0]}-{key[1]}: not moving, nothing to cancel")
        else:
            print(f"error: {key[0]}-{key[1]}: {error}", file=sys.stderr)
            failed = True
    return 1 if failed else 0
