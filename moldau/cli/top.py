"""`moldau top`: a live terminal view of the cluster's traffic per topic and the lag of its groups.

Every `--interval` seconds it samples, per topic, the sum of its partitions' log end offsets (ListOffsets, through
confluent-kafka's AdminClient) and of their sizes on their leaders (DescribeLogDirs to every broker), and per group
its lag: for consumer groups the log end offset minus the committed offset, summed over the group's partitions (as
`moldau groups describe` and `kafka-consumer-groups --describe` compute it), for share groups the lag of
DescribeShareGroupOffsets. Rates are the difference between two samples over the time between them, so the first
frame comes one interval after the start. `--once` prints that one frame and exits (for scripts and tests; with
`--output json` as one JSON document); otherwise the frame is redrawn in place until Ctrl-C.

The rate arithmetic (`topic_rates`) is a pure function of two samples; only `take_sample` does I/O.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import kio.schema.describe_log_dirs.v4.request as dld_req

from moldau.cli.common import CliError, add_action, check_reachable, client_config
from moldau.cli.output import add_output_option, emit
from moldau.cli.table import format_table
from moldau.cli.transactions_session import Session, run_session
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode

DEFAULT_INTERVAL_S = 2.0
# Clears the terminal and puts the cursor home, so each frame replaces the last one.
CLEAR_SCREEN = "\033[H\033[2J"


@dataclass(frozen=True, slots=True)
class TopicSample:
    partitions: int
    end_offset: int  # sum of the partitions' log end offsets: records written so far
    size_bytes: int  # sum of the partitions' sizes on their leaders


@dataclass(frozen=True, slots=True)
class GroupLag:
    group: str
    group_type: str
    state: str
    lag: int | None  # records behind, summed over its partitions; None: not known
    partitions: int


@dataclass(frozen=True, slots=True)
class Sample:
    time_s: float  # monotonic
    topics: dict[str, TopicSample]
    groups: list[GroupLag] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class TopicRate:
    topic: str
    partitions: int
    end_offset: int
    size_bytes: int
    messages_per_s: float
    bytes_per_s: float


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `top` to the top-level parser."""
    text = "a live view of messages/s and bytes/s per topic and the lag of every group"
    parser = add_output_option(add_action(subparsers, "top", run, text))
    parser.add_argument("--interval", type=_positive, default=DEFAULT_INTERVAL_S, metavar="SECONDS",
                        help=f"seconds between refreshes, and over which rates are measured (default "
                             f"{DEFAULT_INTERVAL_S:g})")
    parser.add_argument("--once", action="store_true", help="print one frame (after one interval) and exit")
    parser.add_argument("--topic", action="append", default=[], metavar="TOPIC",
                        help="only this topic (repeatable; default: every topic but internal ones)")
    parser.add_argument("--no-groups", action="store_true", help="leave out group lag (cheaper on many groups)")


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got '{text}'") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("the interval must be above 0")
    return value


def topic_rates(before: Sample, after: Sample) -> list[TopicRate]:
    """Per topic of `after`, its totals and its rates since `before`. A topic new since then counts from zero; a
    shrinking size (retention deleting segments) is no negative traffic, so rates never go below 0."""
    elapsed = max(after.time_s - before.time_s, 1e-9)
    rates = []
    for name, now in sorted(after.topics.items()):
        then = before.topics.get(name, TopicSample(now.partitions, 0, 0))
        rates.append(TopicRate(name, now.partitions, now.end_offset, now.size_bytes,
                               max(now.end_offset - then.end_offset, 0) / elapsed,
                               max(now.size_bytes - then.size_bytes, 0) / elapsed))
    return rates


def run(args: argparse.Namespace) -> int:
    check_reachable(args.bootstrap_server)
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(client_config(args.bootstrap_server))
    live = not args.once and sys.stdout.isatty()
    before = take_sample(admin, args)
    try:
        while True:
            time.sleep(args.interval)
            after = take_sample(admin, args)
            rates = topic_rates(before, after)
            if live:
                sys.stdout.write(CLEAR_SCREEN)
            _show(args, rates, after.groups)
            sys.stdout.flush()
            if args.once:
                return 0
            before = after
    except KeyboardInterrupt:
        return 0


def _show(args: argparse.Namespace, rates: list[TopicRate], groups: list[GroupLag]) -> None:
    emit(args, frame_document(args, rates, groups), lambda: frame_text(args, rates, groups))


def take_sample(admin: Any, args: argparse.Namespace) -> Sample:
    """End offsets and sizes of the topics, and the lag of every group (unless --no-groups)."""
    partitions = _partitions(admin, args.topic)
    ends = _end_offsets(admin, partitions)
    sizes = run_session(args.bootstrap_server, _leader_sizes)
    topics: dict[str, TopicSample] = {}
    for topic in sorted({t for t, _ in partitions}):
        mine = [tp for tp in partitions if tp[0] == topic]
        topics[topic] = TopicSample(len(mine), sum(ends.get(tp, 0) for tp in mine),
                                    sum(sizes.get(tp, 0) for tp in mine))
    groups = [] if args.no_groups else _group_lags(admin, args.bootstrap_server)
    return Sample(time.monotonic(), topics, groups)


def _end_offsets(admin: Any, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

    from moldau.cli.groups import list_offsets

    return list_offsets(admin, {tp: OffsetSpec.latest() for tp in partitions})  # type: ignore[no-untyped-call]


def _partitions(admin: Any, wanted: list[str]) -> list[tuple[str, int]]:
    from moldau.cli.common import REQUEST_TIMEOUT_S, request_failed

    try:
        metadata = admin.list_topics(timeout=REQUEST_TIMEOUT_S)
    except Exception as exc:
        raise request_failed(exc, "cannot list topics") from None
    missing = [t for t in wanted if t not in metadata.topics]
    if missing:
        raise CliError(f"topic '{missing[0]}' does not exist")
    names = wanted or [t for t in metadata.topics if not t.startswith("__")]
    return sorted((t, p) for t in names for p in metadata.topics[t].partitions)


async def _leader_sizes(session: Session) -> dict[tuple[str, int], int]:
    """(topic, partition) -> its size in bytes on its leader, from every broker's DescribeLogDirs."""
    cluster = await session.metadata(None)
    sizes: dict[tuple[str, int], int] = {}
    for node, address in cluster.brokers.items():
        response = await session.send(address, make(dld_req.DescribeLogDirsRequest, topics=None))
        if response.error_code != ErrorCode.none:
            continue  # not allowed here (DESCRIBE on the cluster): sizes stay unknown, shown as 0
        for result in response.results:
            for topic in result.topics:
                for p in topic.partitions:
                    if cluster.leaders.get((topic.name, p.partition_index)) == node and not p.is_future_key:
                        sizes[(topic.name, p.partition_index)] = p.partition_size
    return sizes


def _group_lags(admin: Any, bootstrap: str) -> list[GroupLag]:
    """Each group's total lag: for consumer groups over the partitions they committed, for share groups the sum
    of their share-partitions' lag."""
    from moldau.cli.groups import committed_offsets
    from moldau.cli.share_groups import describe_share_group, list_all_groups

    lags = []
    for listed in list_all_groups(bootstrap):
        try:
            if listed.group_type == "share":
                view = describe_share_group(bootstrap, listed.group_id)
                known = [p.lag for p in view.partitions if p.lag >= 0]
                lag = sum(known) if known or not view.partitions else None
                lags.append(GroupLag(listed.group_id, "share", view.state, lag, len(view.partitions)))
                continue
            committed = {tp: o for tp, o in committed_offsets(admin, listed.group_id).items() if o is not None}
            ends = _end_offsets(admin, list(committed))
            lag = sum(max(ends[tp] - offset, 0) for tp, offset in committed.items())
            lags.append(GroupLag(listed.group_id, listed.group_type, listed.state, lag, len(committed)))
        except CliError:
            # A group deleted between listing and describing, or a coordinator moving: shown without lag.
            lags.append(GroupLag(listed.group_id, listed.group_type, listed.state, None, 0))
    return lags


def frame_document(args: argparse.Namespace, rates: list[TopicRate], groups: list[GroupLag]) -> dict[str, Any]:
    return {
        "bootstrap_server": args.bootstrap_server,
        "interval_s": args.interval,
        "topics": [{"topic": r.topic, "partitions": r.partitions, "end_offset": r.end_offset,
                    "size_bytes": r.size_bytes, "messages_per_s": round(r.messages_per_s, 3),
                    "bytes_per_s": round(r.bytes_per_s, 3)} for r in rates],
        "groups": [{"group": g.group, "type": g.group_type, "state": g.state, "partitions": g.partitions,
                    "lag": g.lag} for g in groups],
    }


def frame_text(args: argparse.Namespace, rates: list[TopicRate], groups: list[GroupLag]) -> str:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    lines = [f"moldau top  {args.bootstrap_server}  {now}  (rates over {args.interval:g} s)", ""]
    topic_rows = [(r.topic, r.partitions, r.end_offset, _bytes(r.size_bytes), f"{r.messages_per_s:,.1f}",
                   _bytes(r.bytes_per_s) + "/s") for r in rates]
    lines.append(format_table(topic_rows, headers=("TOPIC", "PARTITIONS", "END-OFFSET", "SIZE", "MSG/S", "BYTES/S"))
                 if topic_rows else "(no topics)")
    if not args.no_groups:
        lines.append("")
        group_rows = [(g.group, g.group_type, g.state, g.partitions, g.lag) for g in groups]
        lines.append(format_table(group_rows, headers=("GROUP", "TYPE", "STATE", "PARTITIONS", "LAG"))
                     if group_rows else "(no groups)")
    return "\n".join(lines)


def _bytes(amount: float) -> str:
    """1023 B, 1.5 KiB, 12.0 MiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if amount < 1024 or unit == "GiB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{amount:.1f} GiB"
