"""`moldau transactions`: list, describe, find hanging and abort transactions, like Kafka's kafka-transactions.sh.

- `list`: ListTransactions sent to every broker (each answers for the transactional ids it coordinates), merged.
- `describe`: FindCoordinator (key type 1, transactional ids), then DescribeTransactions on the coordinator.
- `find-hanging`: DescribeProducers on partition leaders shows the transactions open on each partition; one open
  longer than the longest transaction timeout is hanging unless its coordinator still knows it as an Ongoing
  transaction containing that partition (ListTransactions by producer id, then DescribeTransactions).
- `abort`: WriteTxnMarkers with an abort marker, sent to the partition leader, for a producer given explicitly or
  found with DescribeProducers by the offset its transaction starts at.

confluent-kafka's AdminClient has none of these APIs, so the requests are kio entities sent with the broker's own
client connection (`moldau.net.client`), which also makes the tool work against any Kafka broker. The session
with the brokers is in `moldau.cli.transactions_session`; this module holds the requests and the commands.
"""

import argparse
import asyncio
import datetime
import re
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import kio.schema.describe_producers.v0.request as dp_req
import kio.schema.describe_transactions.v0.request as dt_req
import kio.schema.find_coordinator.v4.request as fc_req
import kio.schema.list_transactions.v0.request as lt0_req
import kio.schema.list_transactions.v1.request as lt1_req
import kio.schema.list_transactions.v2.request as lt2_req
import kio.schema.write_txn_markers.v1.request as wtm_req

from moldau.cli.common import CliError, add_action, plural
from moldau.cli.output import add_output_option, emit, emit_table, records
from moldau.cli.table import format_table
from moldau.cli.transactions_session import (
    RETRIABLE,
    Address,
    Cluster,
    DescribeTransactionsResponse,
    Retriable,
    Session,
    TopicPartition,
    error_name,
    retrying,
    run_session,
)
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode

# Kafka's transaction states, as ListTransactions and DescribeTransactions name them.
STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
          "PrepareEpochFence")
STATES_BY_KEY = {name.lower(): name for name in STATES}
TRANSACTIONAL_ID_KEY = 1  # FindCoordinator key type
DEFAULT_MAX_TIMEOUT_MIN = 15  # Kafka's transaction.max.timeout.ms


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `transactions` and its subcommands to the top-level parser."""
    parser = subparsers.add_parser("transactions", help="list, describe, find hanging and abort transactions")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    _add_list(actions)
    describing = add_output_option(add_action(actions, "describe", describe,
                                              "show a transactional id's current transaction"))
    describing.add_argument("--transactional-id", required=True, metavar="ID")
    _add_find_hanging(actions)
    _add_abort(actions)


def _add_list(actions: Any) -> None:
    parser = add_output_option(add_action(actions, "list", list_transactions,
                                          "list the transactional ids every broker coordinates"))
    parser.add_argument("--state", type=_state, action="append", default=[], metavar="STATE",
                        help=f"only transactions in STATE (repeatable; {', '.join(STATES)})")
    parser.add_argument("--producer-id", type=int, action="append", default=[], metavar="N",
                        help="only the transactional id of producer N (repeatable)")
    parser.add_argument("--duration-ms", type=_non_negative, metavar="MS",
                        help="only transactions open for at least MS milliseconds")
    parser.add_argument("--pattern", type=_regex, metavar="REGEX",
                        help="only transactional ids the regular expression matches as a whole")


def _add_find_hanging(actions: Any) -> None:
    text = "find transactions left open on partitions that their coordinator no longer tracks"
    parser = add_output_option(add_action(actions, "find-hanging", find_hanging, text))
    parser.add_argument("--broker-id", type=int, metavar="N", help="only partitions led by broker N (default: all)")
    parser.add_argument("--max-transaction-timeout", type=_non_negative, default=DEFAULT_MAX_TIMEOUT_MIN,
                        metavar="MINUTES", help="the brokers' transaction.max.timeout.ms, in minutes: only "
                        f"transactions open longer are suspects (default: {DEFAULT_MAX_TIMEOUT_MIN})")


def _add_abort(actions: Any) -> None:
    text = "write an abort marker for a transaction open on a partition"
    parser = add_action(actions, "abort", abort, text)
    parser.add_argument("--topic", required=True, metavar="TOPIC")
    parser.add_argument("--partition", required=True, type=_non_negative, metavar="P")
    found = parser.add_argument_group("the transaction, by where it starts")
    found.add_argument("--start-offset", type=_non_negative, metavar="OFFSET",
                       help="the offset of the transaction's first record on the partition")
    explicit = parser.add_argument_group("or the transaction's producer, explicitly")
    explicit.add_argument("--producer-id", type=int, metavar="ID")
    explicit.add_argument("--producer-epoch", type=int, metavar="EPOCH")
    explicit.add_argument("--coordinator-epoch", type=int, metavar="EPOCH")


def _state(text: str) -> str:
    """argparse type for a transaction state, in any case."""
    state = STATES_BY_KEY.get(text.lower())
    if state is None:
        raise argparse.ArgumentTypeError(f"unknown state '{text}', choose from {', '.join(STATES)}")
    return state


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got '{text}'")
    return value


def _regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"invalid regular expression '{text}': {exc}") from None
    return text


# -- list -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Listed:
    transactional_id: str
    coordinator: int
    producer_id: int
    state: str


def _list_request(states: Sequence[str], producer_ids: Sequence[int], duration_ms: int | None,
                  pattern: str | None) -> Any:
    """The oldest ListTransactions version that carries the filters given, as Kafka's admin client does."""
    version = lt2_req if pattern is not None else lt1_req if duration_ms is not None else lt0_req
    return make(version.ListTransactionsRequest, state_filters=tuple(states), producer_id_filters=tuple(producer_ids),
                duration_filter=-1 if duration_ms is None else duration_ms, transactional_id_pattern=pattern)


async def _list_all(session: Session, cluster: Cluster, request: Any) -> tuple[list[Listed], set[str]]:
    """Every broker's answer to `request`, merged; and the state filters some broker did not know."""
    ids = sorted(cluster.brokers)
    responses = await asyncio.gather(*(session.send(cluster.brokers[i], request) for i in ids))
    listed, unknown = [], set()
    for broker_id, response in zip(ids, responses, strict=True):
        if response.error_code != ErrorCode.none:
            raise CliError(f"broker {broker_id} refused ListTransactions ({error_name(response.error_code)})")
        unknown.update(response.unknown_state_filters)
        listed += [Listed(t.transactional_id, broker_id, t.producer_id, t.transaction_state)
                   for t in response.transaction_states]
    return sorted(listed, key=lambda t: t.transactional_id), unknown


async def _list_everywhere(session: Session, request: Any) -> tuple[list[Listed], set[str]]:
    return await _list_all(session, await session.metadata(()), request)


def list_transactions(args: argparse.Namespace) -> int:
    request = _list_request(args.state, args.producer_id, args.duration_ms, args.pattern)
    listed, unknown = run_session(args.bootstrap_server, lambda s: _list_everywhere(s, request))
    if unknown:
        print(f"warning: states unknown to the brokers: {', '.join(sorted(unknown))}", file=sys.stderr)
    rows = [(t.transactional_id, t.coordinator, t.producer_id, t.state) for t in listed]
    emit_table(args, rows, ("TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "STATE"), empty="no transactions")
    return 0


# -- describe ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Coordinator:
    node_id: int
    address: Address


@dataclass(frozen=True, slots=True)
class Description:
    transactional_id: str
    coordinator: Coordinator
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_ms: int  # -1: no transaction started
    partitions: list[TopicPartition]


async def _find_coordinator(session: Session, transactional_id: str) -> Coordinator:
    """The coordinator of a transactional id. Raises Retriable or CliError."""
    request = make(fc_req.FindCoordinatorRequest, key_type=TRANSACTIONAL_ID_KEY, coordinator_keys=(transactional_id,))
    found = (await session.send_any(request)).coordinators[0]
    if found.error_code in RETRIABLE:
        raise Retriable(found.error_code)
    if found.error_code != ErrorCode.none:
        raise CliError(f"cannot find the coordinator of transactional id '{transactional_id}' "
                       f"({error_name(found.error_code)})")
    return Coordinator(found.node_id, (found.host, found.port))


async def _describe_once(session: Session, transactional_id: str) -> Description:
    coordinator = await _find_coordinator(session, transactional_id)
    request = make(dt_req.DescribeTransactionsRequest, transactional_ids=(transactional_id,))
    state = (await session.send(coordinator.address, request, DescribeTransactionsResponse)).transaction_states[0]
    if state.error_code in RETRIABLE:
        raise Retriable(state.error_code)
    if state.error_code == ErrorCode.transactional_id_not_found:
        raise CliError(f"transactional id '{transactional_id}' does not exist (TRANSACTIONAL_ID_NOT_FOUND)")
    if state.error_code != ErrorCode.none:
        raise CliError(f"cannot describe transactional id '{transactional_id}' ({error_name(state.error_code)})")
    return _description(state, coordinator)


def _description(state: Any, coordinator: Coordinator) -> Description:
    return Description(
        transactional_id=state.transactional_id, coordinator=coordinator, state=state.transaction_state,
        producer_id=state.producer_id, producer_epoch=state.producer_epoch,
        timeout_ms=int(state.transaction_timeout / datetime.timedelta(milliseconds=1)),
        start_ms=state.transaction_start_time,
        partitions=sorted((t.topic, p) for t in state.topics for p in t.partitions))


def describe(args: argparse.Namespace) -> int:
    txn_id = args.transactional_id
    found = run_session(args.bootstrap_server, lambda s: retrying(lambda: _describe_once(s, txn_id)))
    now_ms = _now_ms()
    document = {"transactional_id": found.transactional_id,
                "coordinator": {"id": found.coordinator.node_id, "host": found.coordinator.address[0],
                                "port": found.coordinator.address[1]},
                "state": found.state, "producer_id": found.producer_id, "producer_epoch": found.producer_epoch,
                "timeout_ms": found.timeout_ms, "start_ms": found.start_ms if found.start_ms >= 0 else None,
                "partitions": [{"topic": t, "partition": p} for t, p in found.partitions]}
    emit(args, document, lambda: _describe_text(found, now_ms))
    return 0


def _describe_text(d: Description, now_ms: int) -> str:
    host, port = d.coordinator.address
    started = "-" if d.start_ms < 0 else f"{_timestamp(d.start_ms)} ({_duration(now_ms - d.start_ms)} ago)"
    lines = [
        f"Transactional id: {d.transactional_id}",
        f"  Coordinator:     {d.coordinator.node_id} ({host}:{port})",
        f"  State:           {d.state}",
        f"  Producer id:     {d.producer_id}",
        f"  Producer epoch:  {d.producer_epoch}",
        f"  Timeout:         {d.timeout_ms} ms",
        f"  Started:         {started}",
        f"  Partitions:      {len(d.partitions)}",
    ]
    if d.partitions:
        lines += ["", format_table(d.partitions, headers=("TOPIC", "PARTITION"), indent="  ")]
    return "\n".join(lines)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _timestamp(ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _duration(ms: int) -> str:
    """`850ms`, `12.3s`, `4m05s`, `2h03m`."""
    if ms < 1000:
        return f"{max(ms, 0)}ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f}s"
    minutes, seconds = divmod(ms // 1000, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    return f"{minutes // 60}h{minutes % 60:02d}m"


# -- find-hanging -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OpenTxn:
    """A transaction open on one partition, as its leader sees it."""

    partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    start_offset: int
    last_timestamp_ms: int


async def _describe_producers(session: Session, address: Address, partitions: Iterable[TopicPartition]
                              ) -> dict[TopicPartition, Any]:
    """The DescribeProducers answer of the broker at `address`, per partition."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    request = make(dp_req.DescribeProducersRequest, topics=tuple(
        make(dp_req.TopicRequest, name=t, partition_indexes=tuple(ps)) for t, ps in by_topic.items()))
    response = await session.send(address, request)
    return {(t.name, p.partition_index): p for t in response.topics for p in t.partitions}


def _open_txns(answers: dict[TopicPartition, Any]) -> list[OpenTxn]:
    """The open transactions in DescribeProducers answers; partitions that failed are reported on stderr."""
    found = []
    for tp, answer in sorted(answers.items()):
        if answer.error_code != ErrorCode.none:
            print(f"warning: skipped {tp[0]}-{tp[1]}: {error_name(answer.error_code)}", file=sys.stderr)
            continue
        found += [OpenTxn(tp, p.producer_id, p.producer_epoch, p.coordinator_epoch, p.current_txn_start_offset,
                          p.last_timestamp) for p in answer.active_producers if p.current_txn_start_offset >= 0]
    return found


async def _open_on_brokers(session: Session, cluster: Cluster, broker_id: int | None
                           ) -> tuple[list[OpenTxn], int]:
    """The transactions open on the partitions led by `broker_id` (None: every broker), and how many partitions
    were asked about."""
    if broker_id is not None and broker_id not in cluster.brokers:
        raise CliError(f"no broker {broker_id} (brokers: {', '.join(map(str, sorted(cluster.brokers)))})")
    led: dict[int, list[TopicPartition]] = {}
    for tp, leader in cluster.leaders.items():
        if leader in cluster.brokers and broker_id in (None, leader):
            led.setdefault(leader, []).append(tp)
    answers = await asyncio.gather(*(_describe_producers(session, cluster.brokers[b], tps) for b, tps in led.items()))
    merged = {tp: answer for per_broker in answers for tp, answer in per_broker.items()}
    return _open_txns(merged), len(merged)


async def _coordinator_views(session: Session, cluster: Cluster, producer_ids: set[int]
                             ) -> dict[int, list[Description]]:
    """What the coordinators know of the transactions of these producers: ListTransactions by producer id, then
    DescribeTransactions on the broker that listed each transactional id."""
    listed, _ = await _list_all(session, cluster, _list_request((), sorted(producer_ids), None, None))
    by_broker: dict[int, list[str]] = {}
    for t in listed:
        by_broker.setdefault(t.coordinator, []).append(t.transactional_id)
    views: dict[int, list[Description]] = {}
    for broker_id, ids in by_broker.items():
        coordinator = Coordinator(broker_id, cluster.brokers[broker_id])
        request = make(dt_req.DescribeTransactionsRequest, transactional_ids=tuple(ids))
        response = await session.send(coordinator.address, request, DescribeTransactionsResponse)
        for state in response.transaction_states:
            if state.error_code == ErrorCode.none:
                views.setdefault(state.producer_id, []).append(_description(state, coordinator))
            else:
                print(f"warning: cannot describe transactional id '{state.transactional_id}' on broker {broker_id} "
                      f"({error_name(state.error_code)}): its open transactions count as hanging", file=sys.stderr)
    return views


def _is_tracked(txn: OpenTxn, views: dict[int, list[Description]]) -> bool:
    """Whether a coordinator knows `txn` as an ongoing transaction that includes its partition."""
    return any(d.state == "Ongoing" and txn.partition in d.partitions for d in views.get(txn.producer_id, []))


async def _hanging(session: Session, broker_id: int | None, max_timeout_ms: int, now_ms: int
                   ) -> tuple[list[OpenTxn], int, int]:
    """The hanging transactions, how many partitions were checked and how many transactions were open there."""
    cluster = await session.metadata(None)
    open_txns, checked = await _open_on_brokers(session, cluster, broker_id)
    suspects = [t for t in open_txns if now_ms - t.last_timestamp_ms > max_timeout_ms]
    if not suspects:
        return [], checked, len(open_txns)
    views = await _coordinator_views(session, cluster, {t.producer_id for t in suspects})
    return [t for t in suspects if not _is_tracked(t, views)], checked, len(open_txns)


def find_hanging(args: argparse.Namespace) -> int:
    now_ms = _now_ms()
    max_timeout_ms = args.max_transaction_timeout * 60_000
    hanging, checked, open_count = run_session(args.bootstrap_server,
                                        lambda s: _hanging(s, args.broker_id, max_timeout_ms, now_ms))
    print(f"checked {plural(checked, 'partition')}: {plural(open_count, 'open transaction')}, "
          f"{len(hanging)} hanging", file=sys.stderr)
    rows = [(t.partition[0], t.partition[1], t.producer_id, t.producer_epoch, t.coordinator_epoch, t.start_offset,
             _duration(now_ms - t.last_timestamp_ms)) for t in hanging]
    headers = ("TOPIC", "PARTITION", "PRODUCER-ID", "PRODUCER-EPOCH", "COORDINATOR-EPOCH", "START-OFFSET", "OPEN-FOR")
    document = [{**row, "open_for_ms": now_ms - t.last_timestamp_ms}
                for row, t in zip(records(rows, headers), hanging, strict=True)]
    emit(args, document, lambda: format_table(rows, headers=headers) if rows else "no hanging transactions")
    return 0


# -- abort ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AbortSpec:
    partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    start_offset: int | None = None


async def _leader(session: Session, partition: TopicPartition) -> tuple[int, Address]:
    """The leader of a partition and its address. Raises CliError."""
    topic, index = partition
    cluster = await session.metadata([topic])
    error = cluster.topic_errors.get(topic)
    if error == ErrorCode.unknown_topic_or_partition:
        raise CliError(f"topic '{topic}' does not exist (UNKNOWN_TOPIC_OR_PARTITION)")
    if error is not None:
        raise CliError(f"cannot look up topic '{topic}' ({error_name(error)})")
    leader = cluster.leaders.get(partition)
    if leader is None:
        raise CliError(f"topic '{topic}' has no partition {index}")
    if leader not in cluster.brokers:
        raise CliError(f"{topic}-{index} has no leader right now (LEADER_NOT_AVAILABLE)")
    return leader, cluster.brokers[leader]


async def _spec_at_offset(session: Session, address: Address, partition: TopicPartition, offset: int) -> AbortSpec:
    """The producer whose transaction on `partition` starts at `offset` (DescribeProducers on the leader)."""
    answer = (await _describe_producers(session, address, [partition])).get(partition)
    name = f"{partition[0]}-{partition[1]}"
    if answer is None:
        raise CliError(f"the leader did not answer for {name}")
    if answer.error_code != ErrorCode.none:
        raise CliError(f"cannot describe the producers of {name} ({error_name(answer.error_code)})")
    starts = sorted(p.current_txn_start_offset for p in answer.active_producers if p.current_txn_start_offset >= 0)
    for p in answer.active_producers:
        if p.current_txn_start_offset == offset:
            # Kafka's tool does the same: a producer that never saw a marker has coordinator epoch -1.
            return AbortSpec(partition, p.producer_id, p.producer_epoch, max(p.coordinator_epoch, 0), offset)
    open_ones = f"transactions open there start at {', '.join(map(str, starts))}" if starts else "none is open there"
    raise CliError(f"no open transaction starts at offset {offset} of {name} ({open_ones})")


async def _write_abort(session: Session, leader: int, address: Address, spec: AbortSpec) -> None:
    topic, index = spec.partition
    marker = make(
        wtm_req.WritableTxnMarker,
        producer_id=spec.producer_id, producer_epoch=spec.producer_epoch, transaction_result=False,
        coordinator_epoch=spec.coordinator_epoch,
        topics=(make(wtm_req.WritableTxnMarkerTopic, name=topic, partition_indexes=(index,)),))
    response = await session.send(address, make(wtm_req.WriteTxnMarkersRequest, markers=(marker,)))
    codes = [p.error_code for m in response.markers for t in m.topics for p in t.partitions]
    code = codes[0] if codes else ErrorCode.unknown_server_error
    if code == ErrorCode.not_leader_or_follower:
        raise CliError(f"broker {leader} is no longer the leader of {topic}-{index} (NOT_LEADER_OR_FOLLOWER)")
    if code != ErrorCode.none:
        raise CliError(f"broker {leader} refused the abort marker for {topic}-{index} ({error_name(code)})")


async def _abort(session: Session, partition: TopicPartition, offset: int | None, explicit: AbortSpec | None
                 ) -> AbortSpec:
    leader, address = await _leader(session, partition)
    spec = explicit if offset is None else await _spec_at_offset(session, address, partition, offset)
    assert spec is not None
    await _write_abort(session, leader, address, spec)
    return spec


def _explicit_spec(args: argparse.Namespace) -> AbortSpec | None:
    """The producer given with --producer-id/--producer-epoch/--coordinator-epoch, checked against
    --start-offset: exactly one way must be used."""
    values = (args.producer_id, args.producer_epoch, args.coordinator_epoch)
    given = [v is not None for v in values]
    if args.start_offset is not None:
        if any(given):
            raise CliError("give either --start-offset or the producer (--producer-id ...), not both")
        return None
    if not all(given):
        raise CliError("give --start-offset, or all of --producer-id, --producer-epoch and --coordinator-epoch")
    return AbortSpec((args.topic, args.partition), *values)


def abort(args: argparse.Namespace) -> int:
    explicit = _explicit_spec(args)
    partition = (args.topic, args.partition)
    spec = run_session(args.bootstrap_server, lambda s: _abort(s, partition, args.start_offset, explicit))
    where = "" if spec.start_offset is None else f", started at offset {spec.start_offset}"
    print(f"aborted the transaction of producer {spec.producer_id} (epoch {spec.producer_epoch}, coordinator "
          f"epoch {spec.coordinator_epoch}) on {args.topic}-{args.partition}{where}")
    return 0
