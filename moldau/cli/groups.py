"""`moldau groups`: list, describe and delete consumer groups, and reset their committed offsets; list, describe
and reset the start offsets of share groups (KIP-932) too.

Like `moldau topics`, requests go through confluent-kafka's `AdminClient`, so the tool sees groups exactly as any
Kafka client does and works against any Kafka-compatible broker. The AdminClient has no share-group calls yet:
those, and the listing of groups of every type, go through `moldau.cli.share_groups`.
"""

import argparse
import asyncio
import sys
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from moldau.cli import group_offsets
from moldau.cli.common import (
    REQUEST_TIMEOUT_S,
    CliError,
    add_action,
    check_reachable,
    client_config,
    error_name,
    kafka_error,
    parse_time,
    plural,
    request_failed,
)
from moldau.cli.output import add_output_option, emit, emit_table, key, wants_json
from moldau.cli.progress import Progress
from moldau.cli.share_groups import (
    ShareGroupView,
    alter_group_configs,
    alter_share_offsets,
    describe_share_group,
    group_configs,
    list_all_groups,
)
from moldau.cli.table import format_assignment, format_table
from moldau.text import ascii_digits

# The state names Kafka's tools print, keyed by confluent-kafka's enum.
STATE_NAMES = {
    ConsumerGroupState.UNKNOWN: "Unknown",
    ConsumerGroupState.PREPARING_REBALANCING: "PreparingRebalance",
    ConsumerGroupState.COMPLETING_REBALANCING: "CompletingRebalance",
    ConsumerGroupState.STABLE: "Stable",
    ConsumerGroupState.DEAD: "Dead",
    ConsumerGroupState.EMPTY: "Empty",
}
STATES_BY_NAME = {name.lower(): state for state, name in STATE_NAMES.items() if name != "Unknown"}
# Offsets can only be reset while no member could overwrite them with its own commits.
INACTIVE_STATES = frozenset({ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD})


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `groups` and its subcommands to the top-level parser."""
    parser = subparsers.add_parser("groups", help="list, describe and delete consumer and share groups, reset their "
                                                  "offsets")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = add_output_option(add_action(actions, "list", list_groups, "list groups with their type and state"))
    listing.add_argument("--state", type=_state, metavar="STATE", help="only groups in STATE (e.g. Stable, Empty)")
    describing = add_output_option(add_action(actions, "describe", describe,
                                              "show groups' members, assignments, offsets and lag"))
    describing.add_argument("groups", nargs="+", metavar="GROUP")
    deleting = add_action(actions, "delete", delete, "delete inactive groups and their committed offsets")
    deleting.add_argument("groups", nargs="+", metavar="GROUP")
    _add_reset(actions)
    configuring = add_action(actions, "configs", configs, "show or change a group's configs (share.*, consumer.*, "
                             "errors.deadletterqueue.*)")
    add_output_option(configuring).add_argument("group", metavar="GROUP")
    configuring.add_argument("--config", action="append", default=[], type=_config_pair, metavar="KEY=VALUE",
                             help="group config to set (repeatable)")
    configuring.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                             help="group config to reset to the broker's value (repeatable)")



def _add_reset(actions: Any) -> None:
    text = "plan or apply new committed offsets for an inactive group (dry run unless --execute)"
    parser = add_action(actions, "reset-offsets", reset_offsets, text)
    parser.add_argument("group", metavar="GROUP")
    scope = parser.add_mutually_exclusive_group(required=True)
    scope.add_argument(
        "--topic",
        type=topic_spec,
        action="append",
        metavar="TOPIC[:P,...]",
        help="topic to reset, optionally only some partitions (repeatable)",
    )
    scope.add_argument("--all-topics", action="store_true", help="every topic the group has committed offsets for")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--to-earliest", action="store_true", help="the earliest offset of each partition")
    mode.add_argument("--to-latest", action="store_true", help="the log end offset of each partition")
    mode.add_argument("--to-offset", type=int, metavar="N", help="offset N (clamped to the partition's range)")
    mode.add_argument(
        "--to-datetime",
        type=parse_time,
        metavar="ISO8601",
        help="the first record at or after this time (UTC if no zone)",
    )
    mode.add_argument("--shift-by", type=int, metavar="N", help="move the committed offset by N (may be negative)")
    parser.add_argument("--execute", action="store_true", help="commit the new offsets (default: only print them)")


def _state(text: str) -> ConsumerGroupState:
    """argparse type for a group state name, in any case."""
    state = STATES_BY_NAME.get(text.lower())
    if state is None:
        choices = ", ".join(STATE_NAMES[s] for s in STATES_BY_NAME.values())
        raise argparse.ArgumentTypeError(f"unknown state '{text}', choose from {choices}")
    return state


def _config_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected key=value, got '{text}'")
    return key, value


def configs(args: argparse.Namespace) -> int:
    """Change the group's configs when asked to, then print every group config with its value and source."""
    check_reachable(args.bootstrap_server)
    if args.config or args.delete_config:
        alter_group_configs(args.bootstrap_server, args.group, args.config, args.delete_config)
        print(f"updated the configs of group '{args.group}'", file=sys.stderr)
    rows = group_configs(args.bootstrap_server, args.group)
    emit_table(args, [(n, v, s) for n, v, s in rows], ("NAME", "VALUE", "SOURCE"))
    return 0


def topic_spec(text: str) -> tuple[str, list[int] | None]:
    """argparse type for `TOPIC` or `TOPIC:0,2`: the topic and its chosen partitions (None: all)."""
    topic, sep, rest = text.partition(":")
    if not topic:
        raise argparse.ArgumentTypeError(f"expected TOPIC or TOPIC:P,..., got '{text}'")
    if not sep:
        return topic, None
    parts = [part.strip() for part in rest.split(",")]
    if not parts or not all(ascii_digits(part) for part in parts):
        raise argparse.ArgumentTypeError(f"expected partition numbers after ':', got '{rest}'")
    return topic, sorted({int(part) for part in parts})


def _admin(bootstrap: str) -> AdminClient:
    check_reachable(bootstrap)
    return AdminClient(client_config(bootstrap))


def _wait(future: "Future[Any]") -> Any:
    """The result of an admin future, bounded so an unresponsive broker cannot hang the command."""
    return future.result(timeout=REQUEST_TIMEOUT_S + 5)


def state_name(state: Any) -> str:
    """Kafka's name for a group state (confluent-kafka may hand back the enum or a raw value)."""
    if isinstance(state, ConsumerGroupState):
        return STATE_NAMES[state]
    return str(state)


def list_groups(args: argparse.Namespace) -> int:
    """Print a table of group ids, types (classic, consumer, share) and states, sorted by id."""
    states = () if args.state is None else (STATE_NAMES[args.state],)
    listings = list_all_groups(args.bootstrap_server, states)
    emit_table(args, [(g.group_id, g.group_type, g.state) for g in listings], ("GROUP", "TYPE", "STATE"),
               empty="no groups")
    return 0


def _share_group_ids(bootstrap: str) -> set[str]:
    return {g.group_id for g in list_all_groups(bootstrap) if g.group_type == "share"}


def _describe_one(admin: AdminClient, group: str) -> Any:
    """The broker's description of one group."""
    future = admin.describe_consumer_groups([group], request_timeout=REQUEST_TIMEOUT_S)[group]
    try:
        return _wait(future)
    except Exception as exc:
        raise request_failed(exc, f"cannot describe group '{group}'") from None


def committed_offsets(admin: AdminClient, group: str) -> dict[tuple[str, int], int | None]:
    """(topic, partition) -> committed offset of every partition the group has a commit for."""
    try:
        return asyncio.run(group_offsets.committed_offsets(admin, group, REQUEST_TIMEOUT_S))
    except Exception as exc:
        raise request_failed(exc, f"cannot fetch the offsets of group '{group}'") from None


def list_offsets(admin: AdminClient, specs: dict[tuple[str, int], OffsetSpec]) -> dict[tuple[str, int], int]:
    """(topic, partition) -> offset for each spec; a failed lookup is an error for the whole command."""
    try:
        return asyncio.run(group_offsets.list_offsets(admin, specs, REQUEST_TIMEOUT_S))
    except group_offsets.OffsetLookupFailed as exc:
        raise _lookup_failed(exc) from None


def _lookup_failed(exc: group_offsets.OffsetLookupFailed) -> CliError:
    topic, partition = exc.partition
    return request_failed(exc.cause, f"cannot look up offsets of {topic}:{partition}")


def _latest() -> OffsetSpec:
    spec: OffsetSpec = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    return spec


def describe(args: argparse.Namespace) -> int:
    """Print, per group, a summary, its members and its offsets with lag (or all of it as one JSON list)."""
    admin = _admin(args.bootstrap_server)
    shared = _share_group_ids(args.bootstrap_server)
    described: list[dict[str, Any]] = []
    failed = False
    for group in dict.fromkeys(args.groups):
        try:
            described.append(_share_group_data(admin, describe_share_group(args.bootstrap_server, group))
                             if group in shared else _group_data(admin, group))
        except CliError as exc:
            print(f"error: {exc}", file=sys.stderr)
            failed = True
    if described or wants_json(args):
        emit(args, described, lambda: "\n\n".join(
            _share_group_text(d) if d["type"] == "share" else _group_text(d) for d in described))
    return 1 if failed else 0


def _group_data(admin: AdminClient, group: str) -> dict[str, Any]:
    """One consumer group: its summary, members and committed offsets with lag."""
    description = _describe_one(admin, group)
    committed = committed_offsets(admin, group)
    # DescribeGroups answers Dead for an unknown id; without offsets either, there is nothing to show.
    if description.state == ConsumerGroupState.DEAD and not description.members and not committed:
        raise CliError(f"group '{group}' does not exist")
    members = sorted(description.members, key=lambda m: (m.client_id, m.member_id))
    return {
        "group": group,
        "type": _group_type(description),
        "state": state_name(description.state),
        "protocol_type": "(simple)" if description.is_simple_consumer_group else "consumer",
        "assignor": description.partition_assignor or None,
        "coordinator": _node(description.coordinator),
        "members": [{"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
                     "assignment": _partitions_data(_assigned(m))} for m in members],
        "offsets": _offsets_data(admin, committed, _owners(description.members)),
    }


def _group_type(description: Any) -> str:
    """`classic` or `consumer` (KIP-848), as `groups list` names them; classic when the client cannot tell."""
    name = str(getattr(getattr(description, "type", None), "name", "")).lower()
    return name if name in ("classic", "consumer") else "classic"


def _group_text(data: dict[str, Any]) -> str:
    """The text block for one group: summary lines, the members table and the offsets table."""
    summary = format_table([("State:", data["state"]), ("Protocol type:", data["protocol_type"]),
                            ("Assignor:", data["assignor"] or "-"), ("Coordinator:", _node_text(data["coordinator"])),
                            ("Members:", str(len(data["members"])))], indent="  ")
    members = _members_text(data["members"])
    if data["offsets"]:
        headers = ("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CLIENT-ID")
        offsets = format_table([[row[key(h)] for h in headers] for row in data["offsets"]], headers=headers,
                               indent="  ")
    else:
        offsets = "  (no committed offsets)"
    return f"Group: {data['group']}\n{summary}\n\n{members}\n\n{offsets}"


SHARE_PARTITION_HEADERS = ("TOPIC", "PARTITION", "START-OFFSET", "IN-FLIGHT", "LOG-END-OFFSET", "LAG")


def _share_group_data(admin: AdminClient, view: ShareGroupView) -> dict[str, Any]:
    """A share group: summary, members with their assignments, and each share-partition's start offset, records
    in flight (acquired, or available again after a delivery), log end offset and lag (records from the start
    offset not yet acknowledged or archived)."""
    node, (host, port) = view.coordinator
    members = sorted(view.members, key=lambda m: (m.client_id, m.member_id))
    ends = (list_offsets(admin, {(p.topic, p.partition): _latest() for p in view.partitions}) if view.partitions
            else {})
    return {
        "group": view.group_id,
        "type": "share",
        "state": view.state,
        "group_epoch": view.epoch,
        "coordinator": {"id": node, "host": host, "port": port},
        "members": [{"member_id": m.member_id, "client_id": m.client_id, "host": m.client_host,
                     "assignment": _partitions_data(sorted((tp.topic_name, p) for tp in m.assignment.topic_partitions
                                                           for p in tp.partitions))} for m in members],
        "partitions": [{"topic": p.topic, "partition": p.partition, "start_offset": p.start_offset,
                        "in_flight": _known(p.in_flight), "log_end_offset": ends.get((p.topic, p.partition)),
                        "lag": _known(p.lag)} for p in view.partitions],
    }


def _share_group_text(data: dict[str, Any]) -> str:
    summary = format_table([("Type:", "share"), ("State:", data["state"]), ("Group epoch:", str(data["group_epoch"])),
                            ("Coordinator:", _node_text(data["coordinator"])),
                            ("Members:", str(len(data["members"])))], indent="  ")
    members = _members_text(data["members"])
    if not data["partitions"]:
        return f"Group: {data['group']}\n{summary}\n\n{members}\n\n  (no share-partitions started)"
    offsets = format_table([[row[key(h)] for h in SHARE_PARTITION_HEADERS] for row in data["partitions"]],
                           headers=SHARE_PARTITION_HEADERS, indent="  ")
    return f"Group: {data['group']}\n{summary}\n\n{members}\n\n{offsets}"


def _known(value: int) -> int | None:
    """None for the protocol's -1 (not known)."""
    return value if value >= 0 else None


def _node(node: Any) -> dict[str, Any] | None:
    """A broker as data, or None when the broker named none."""
    if node is None or node.id < 0:
        return None
    return {"id": node.id, "host": node.host, "port": node.port}


def _node_text(node: dict[str, Any] | None) -> str:
    """`id (host:port)`, or '-'."""
    return "-" if node is None else f"{node['id']} ({node['host']}:{node['port']})"


def _assigned(member: Any) -> list[tuple[str, int]]:
    partitions = member.assignment.topic_partitions if member.assignment else []
    return sorted((tp.topic, tp.partition) for tp in partitions)


def _partitions_data(partitions: list[tuple[str, int]]) -> list[dict[str, Any]]:
    return [{"topic": topic, "partition": partition} for topic, partition in partitions]


def _owners(members: Iterable[Any]) -> dict[tuple[str, int], str]:
    """(topic, partition) -> client id of the member it is assigned to."""
    return {tp: member.client_id for member in members for tp in _assigned(member)}


def _members_text(members: list[dict[str, Any]]) -> str:
    if not members:
        return "  (no active members)"
    rows = [(m["member_id"], m["client_id"], m["host"],
             format_assignment([(a["topic"], a["partition"]) for a in m["assignment"]])) for m in members]
    return format_table(rows, headers=("MEMBER-ID", "CLIENT-ID", "HOST", "ASSIGNMENT"), indent="  ")


def _offsets_data(
    admin: AdminClient, committed: dict[tuple[str, int], int | None], owners: dict[tuple[str, int], str]
) -> list[dict[str, Any]]:
    """Committed offset, log end offset and lag of every committed or assigned partition."""
    partitions = sorted(set(committed) | set(owners))
    ends = list_offsets(admin, {tp: _latest() for tp in partitions})
    rows = []
    for tp in partitions:
        offset, end = committed.get(tp), ends.get(tp)
        lag = end - offset if offset is not None and end is not None else None
        rows.append({"topic": tp[0], "partition": tp[1], "current_offset": offset, "log_end_offset": end,
                     "lag": lag, "client_id": owners.get(tp)})
    return rows


def delete(args: argparse.Namespace) -> int:
    """Delete each named group, reporting every failure; non-zero exit if any failed."""
    admin = _admin(args.bootstrap_server)
    groups = list(dict.fromkeys(args.groups))
    futures = admin.delete_consumer_groups(groups, request_timeout=REQUEST_TIMEOUT_S)
    failed = False
    for group in groups:
        try:
            _wait(futures[group])
        except Exception as exc:
            print(f"error: {_group_error(group, exc, 'delete')}", file=sys.stderr)
            failed = True
            continue
        print(f"deleted group '{group}'")
    return 1 if failed else 0


def _group_error(group: str, exc: BaseException, action: str) -> CliError:
    """Turn a per-group failure into a one-line CLI error, naming the usual causes plainly."""
    err = kafka_error(exc)
    name = error_name(err) if err is not None else ""
    if name == "GROUP_ID_NOT_FOUND":
        return CliError(f"group '{group}' does not exist ({name})")
    if name == "NON_EMPTY_GROUP":
        return CliError(f"group '{group}' still has active members ({name})")
    return request_failed(exc, f"cannot {action} group '{group}'")


@dataclass
class Plan:
    """One partition's offset before and after a reset."""

    topic: str
    partition: int
    current: int | None
    new: int


def reset_offsets(args: argparse.Namespace) -> int:
    """Compute the new offsets, print them, and commit them with --execute."""
    admin = _admin(args.bootstrap_server)
    if args.group in _share_group_ids(args.bootstrap_server):
        return _reset_share_offsets(admin, args)
    _require_inactive(admin, args.group)
    committed = committed_offsets(admin, args.group)
    partitions = _reset_partitions(admin, args, committed)
    plans = _plan(admin, args, partitions, committed)
    rows = [(p.topic, p.partition, p.current, p.new) for p in plans]
    print(format_table(rows, headers=("TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET")))
    if not args.execute:
        print(f"dry run: nothing changed; add --execute to commit {plural(len(plans), 'offset')}", file=sys.stderr)
        return 0
    with Progress(f"resetting {args.group}", total=len(plans), unit="partition") as progress:
        _commit(admin, args.group, plans)
        progress.advance(len(plans))
    print(f"committed {plural(len(plans), 'offset')} for group '{args.group}'", file=sys.stderr)
    return 0


def _reset_share_offsets(admin: AdminClient, args: argparse.Namespace) -> int:
    """A share group's new start offsets (AlterShareGroupOffsets), only while it has no members: what is in
    flight is dropped and the records from the new start are delivered afresh."""
    view = describe_share_group(args.bootstrap_server, args.group)
    if view.members:
        raise CliError(f"offsets can only be reset while share group '{args.group}' is empty, but it has "
                       f"{plural(len(view.members), 'member')}")
    current: dict[tuple[str, int], int | None] = {
        (p.topic, p.partition): (p.start_offset if p.start_offset >= 0 else None) for p in view.partitions}
    partitions = _reset_partitions(admin, args, current)
    plans = _plan(admin, args, partitions, current)
    rows = [(p.topic, p.partition, p.current, p.new) for p in plans]
    print(format_table(rows, headers=("TOPIC", "PARTITION", "START-OFFSET", "NEW-START-OFFSET")))
    if not args.execute:
        print(f"dry run: nothing changed; add --execute to set {plural(len(plans), 'start offset')}", file=sys.stderr)
        return 0
    with Progress(f"resetting {args.group}", total=len(plans), unit="partition") as progress:
        alter_share_offsets(args.bootstrap_server, args.group, {(p.topic, p.partition): p.new for p in plans})
        progress.advance(len(plans))
    print(f"set {plural(len(plans), 'start offset')} for share group '{args.group}'", file=sys.stderr)
    return 0


def _require_inactive(admin: AdminClient, group: str) -> None:
    """Refuse, as Kafka's tool does, while members could overwrite the reset with their own commits."""
    description = _describe_one(admin, group)
    if description.state not in INACTIVE_STATES:
        raise CliError(
            f"offsets can only be reset while group '{group}' is inactive (Empty or Dead), "
            f"but it is {state_name(description.state)} with {plural(len(description.members), 'member')}"
        )


def _reset_partitions(
    admin: AdminClient, args: argparse.Namespace, committed: dict[tuple[str, int], int | None]
) -> list[tuple[str, int]]:
    """The partitions named by --topic, or those with a committed offset for --all-topics."""
    if args.all_topics:
        if not committed:
            raise CliError(f"group '{args.group}' has no committed offsets to reset")
        return sorted(committed)
    chosen: set[tuple[str, int]] = set()
    for topic, partitions in args.topic:
        existing = _topic_partitions(admin, topic)
        for partition in existing if partitions is None else partitions:
            if partition not in existing:
                raise CliError(f"topic '{topic}' has no partition {partition}")
            chosen.add((topic, partition))
    return sorted(chosen)


def _topic_partitions(admin: AdminClient, topic: str) -> list[int]:
    """The partition ids of an existing topic."""
    try:
        # All topics, not just this one: asking for one by name may auto-create it on the broker.
        metadata = admin.list_topics(timeout=REQUEST_TIMEOUT_S).topics.get(topic)
    except Exception as exc:
        raise request_failed(exc, f"cannot look up topic '{topic}'") from None
    if metadata is None or metadata.error is not None or not metadata.partitions:
        raise CliError(f"topic '{topic}' does not exist")
    return sorted(metadata.partitions)


def _plan(
    admin: AdminClient,
    args: argparse.Namespace,
    partitions: list[tuple[str, int]],
    committed: dict[tuple[str, int], int | None],
) -> list[Plan]:
    """The new offset of each partition, always within [earliest, latest]."""
    try:
        new = asyncio.run(group_offsets.new_offsets(admin, args.group, partitions, _target(args), committed,
                                                    REQUEST_TIMEOUT_S))
    except group_offsets.OffsetLookupFailed as exc:
        raise _lookup_failed(exc) from None
    except group_offsets.ResetRefused as exc:
        raise CliError(str(exc)) from None
    return [Plan(tp[0], tp[1], committed.get(tp), new[tp]) for tp in partitions]


def _target(args: argparse.Namespace) -> group_offsets.ResetTarget:
    """The reset the options ask for."""
    if args.to_earliest:
        return group_offsets.ResetTarget("earliest")
    if args.to_latest:
        return group_offsets.ResetTarget("latest")
    if args.to_offset is not None:
        return group_offsets.ResetTarget("offset", offset=args.to_offset)
    if args.to_datetime is not None:
        return group_offsets.ResetTarget("timestamp", timestamp_ms=args.to_datetime)
    return group_offsets.ResetTarget("shift", shift=args.shift_by)


def _commit(admin: AdminClient, group: str, plans: list[Plan]) -> None:
    """Commit the new offsets in one request; any partition-level error fails the command."""
    partitions = [TopicPartition(p.topic, p.partition, p.new) for p in plans]
    request = [ConsumerGroupTopicPartitions(group, partitions)]
    future = admin.alter_consumer_group_offsets(request, request_timeout=REQUEST_TIMEOUT_S)[group]
    try:
        result = _wait(future)
    except Exception as exc:
        raise _group_error(group, exc, "reset offsets of") from None
    errors = [f"{tp.topic}:{tp.partition} {tp.error}" for tp in result.topic_partitions or [] if tp.error]
    if errors:
        raise CliError(f"cannot reset offsets of group '{group}': {'; '.join(errors)}")
