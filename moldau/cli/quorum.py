"""`moldau quorum`: the metadata quorum, as kafka-metadata-quorum does (KIP-595, KIP-853).

    moldau quorum describe [--status | --replication]
    moldau quorum add-controller --command-config controller.properties
    moldau quorum add-controller --controller-id 4 --controller-directory-id UUID \\
        --controller-endpoints CONTROLLER://host:port
    moldau quorum remove-controller --controller-id 3 [--controller-directory-id UUID]

`--bootstrap-server` names a broker (which forwards to the quorum leader) and `--bootstrap-controller` a
controller (the command then finds the leader through DescribeQuorum). `add-controller` reads the new
controller's `node.id`, controller listener and metadata directory id from its server properties, as Kafka reads
them from `--command-config`; or they are given one by one. Voter changes need `kraft.version` 1
(`moldau features upgrade --feature kraft.version=1`).
"""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid
from datetime import timedelta
from typing import Any

import kio.schema.add_raft_voter.v1.request as add_req
import kio.schema.describe_quorum.v2.request as dq_req
import kio.schema.remove_raft_voter.v0.request as remove_req
from kio.schema.types import TopicName
from kio.static.primitive import i32, i32Timedelta, u16

from moldau.cli.common import CliError, add_action, command_properties
from moldau.cli.output import add_output_option, emit, emit_table
from moldau.cli.raw_request import call, check
from moldau.config.addresses import Listener, parse_listener
from moldau.text import ascii_digits

METADATA_TOPIC = "__cluster_metadata"
METADATA_DIR = "__cluster_metadata"
RETRIABLE = {"NOT_LEADER_OR_FOLLOWER", "NOT_CONTROLLER", "REQUEST_TIMED_OUT"}
RETRY_S = 0.3
CHANGE_TIMEOUT_S = 30.0  # for the whole command, retries included
ATTEMPT_TIMEOUT_S = 10.0  # what AddRaftVoter asks the leader to wait, below the CLI's request timeout


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("quorum", help="describe the metadata quorum, add and remove controllers")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    describe = add_action(actions, "describe", run_describe, "the quorum's leader, voters and observers")
    shown = describe.add_mutually_exclusive_group()
    shown.add_argument("--status", action="store_true", help="leader, epoch, high watermark, voters (default)")
    shown.add_argument("--replication", action="store_true", help="one row per voter and observer")
    add_output_option(describe)
    add = add_action(actions, "add-controller", run_add, "make a controller that follows the log a voter")
    add.add_argument("--controller-id", type=int, help="its node.id (default: from --command-config)")
    add.add_argument("--controller-directory-id", help="its metadata directory id (default: read from its "
                     "metadata directory, found through metadata.log.dir or log.dirs in --command-config)")
    add.add_argument("--controller-endpoints", help="its controller listeners, NAME://host:port,... "
                     "(default: from --command-config)")
    remove = add_action(actions, "remove-controller", run_remove, "take a voter out of the quorum")
    remove.add_argument("--controller-id", type=int, required=True, help="the voter's node.id")
    remove.add_argument("--controller-directory-id", help="its metadata directory id (checked if given)")
    for action in (describe, add, remove):
        action.add_argument("--bootstrap-controller", metavar="HOST:PORT",
                            help="a controller to ask instead of a broker")


# -- describe -------------------------------------------------------------------------------------------------


def describe_quorum(address: str) -> Any:
    partition = dq_req.PartitionData(partition_index=i32(0))
    request = dq_req.DescribeQuorumRequest(topics=(dq_req.TopicData(topic_name=TopicName(METADATA_TOPIC),
                                                                     partitions=(partition,)),))
    response = call(address, request)
    check(response.error_code, response.error_message)
    return response


def _leader_view(args: argparse.Namespace) -> tuple[Any, Any]:
    """(response, partition) from the quorum leader: through a broker, or found through a controller."""
    response = describe_quorum(_target(args))
    partition = response.topics[0].partitions[0]
    if args.bootstrap_controller and int(partition.error_code) == 6 and partition.leader_id >= 0:
        response = describe_quorum(_endpoint_of(response, int(partition.leader_id)))
        partition = response.topics[0].partitions[0]
    check(partition.error_code, partition.error_message)
    return response, partition


def _target(args: argparse.Namespace) -> str:
    return str(args.bootstrap_controller or args.bootstrap_server)


def _endpoint_of(response: Any, node_id: int) -> str:
    for node in response.nodes:
        if int(node.node_id) == node_id and node.listeners:
            return f"{node.listeners[0].host}:{node.listeners[0].port}"
    raise CliError(f"the quorum does not say where node {node_id} listens")


def run_describe(args: argparse.Namespace) -> int:
    response, partition = _leader_view(args)
    if args.replication:
        emit_table(args, _replication_rows(partition), ["NodeId", "DirectoryId", "LogEndOffset", "Lag",
                                                        "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"])
        return 0
    endpoints = {int(n.node_id): [f"{e.name}://{e.host}:{e.port}" for e in n.listeners] for n in response.nodes}
    lags = [partition.high_watermark - v.log_end_offset for v in partition.current_voters]
    now_ms = int(time.time() * 1000)
    caught_up = [now_ms - v.last_caught_up_timestamp for v in partition.current_voters
                 if v.last_caught_up_timestamp >= 0]
    rows = [
        ("LeaderId:", partition.leader_id),
        ("LeaderEpoch:", partition.leader_epoch),
        ("HighWatermark:", partition.high_watermark),
        ("MaxFollowerLag:", max(lags, default=0)),
        ("MaxFollowerLagTimeMs:", max(caught_up, default=0)),
        ("CurrentVoters:", json.dumps([_replica_json(v, endpoints) for v in partition.current_voters])),
        ("CurrentObservers:", json.dumps([_replica_json(o, {}) for o in partition.observers])),
    ]
    document = {
        "leader_id": int(partition.leader_id), "leader_epoch": int(partition.leader_epoch),
        "high_watermark": int(partition.high_watermark), "max_follower_lag": max(lags, default=0),
        "max_follower_lag_time_ms": max(caught_up, default=0),
        "current_voters": [_replica_json(v, endpoints) for v in partition.current_voters],
        "current_observers": [_replica_json(o, {}) for o in partition.observers],
    }
    emit(args, document, lambda: "\n".join(f"{name:<22}{value}" for name, value in rows))
    return 0


def _replica_json(replica: Any, endpoints: dict[int, list[str]]) -> dict[str, Any]:
    found: dict[str, Any] = {"id": int(replica.replica_id)}
    if replica.replica_directory_id is not None and replica.replica_directory_id.int:
        found["directoryId"] = str(replica.replica_directory_id)
    if int(replica.replica_id) in endpoints:
        found["endpoints"] = endpoints[int(replica.replica_id)]
    return found


def _replication_rows(partition: Any) -> list[tuple[object, ...]]:
    leader = int(partition.leader_id)
    rows = []
    for status, replicas in (("Voter", partition.current_voters), ("Observer", partition.observers)):
        for r in replicas:
            role = "Leader" if int(r.replica_id) == leader else ("Follower" if status == "Voter" else status)
            directory = r.replica_directory_id if r.replica_directory_id is not None else ""
            rows.append((r.replica_id, directory, r.log_end_offset, partition.high_watermark - r.log_end_offset,
                         r.last_fetch_timestamp, r.last_caught_up_timestamp, role))
    return sorted(rows, key=lambda row: (row[6] != "Leader", row[6] == "Observer", row[0]))


# -- add and remove -------------------------------------------------------------------------------------------


def run_add(args: argparse.Namespace) -> int:
    props = command_properties()
    node_id = args.controller_id if args.controller_id is not None else _int_property(props, "node.id")
    listeners = _controller_listeners(args.controller_endpoints, props)
    directory = uuid.UUID(args.controller_directory_id) if args.controller_directory_id else _directory_id(props)
    request = add_req.AddRaftVoterRequest(
        cluster_id=None, timeout=i32Timedelta.parse(timedelta(seconds=ATTEMPT_TIMEOUT_S)), voter_id=i32(node_id),
        voter_directory_id=directory, ack_when_committed=True,
        listeners=tuple(add_req.Listener(name=n, host=h, port=u16(p)) for n, h, p in listeners))
    _send_until_done(args, request, done_if="DUPLICATE_VOTER")
    print(f"Added controller {node_id} with directory id {directory} and endpoints: "
          + ", ".join(f"{n}://{h}:{p}" for n, h, p in listeners))
    return 0


def run_remove(args: argparse.Namespace) -> int:
    directory = uuid.UUID(args.controller_directory_id) if args.controller_directory_id else None
    request = remove_req.RemoveRaftVoterRequest(cluster_id=None, voter_id=i32(args.controller_id),
                                                voter_directory_id=directory)
    _send_until_done(args, request, done_if="VOTER_NOT_FOUND")
    print(f"Removed controller {args.controller_id}" + (f" with directory id {directory}" if directory else ""))
    return 0


def _send_until_done(args: argparse.Namespace, request: Any, done_if: str) -> None:
    """Send a voter change to the leader (or a broker), retrying while leadership moves or a change is pending.

    After an attempt whose outcome is unknown (no answer in time), `done_if` (DUPLICATE_VOTER for an add,
    VOTER_NOT_FOUND for a remove) means that attempt went through.
    """
    deadline = time.monotonic() + CHANGE_TIMEOUT_S
    unknown = False
    while True:
        try:
            answer = call(_leader_address(args), request)
        except CliError:
            if time.monotonic() > deadline:
                raise
            unknown = True
            continue
        name = answer.error_code.name.upper()
        if int(answer.error_code) == 0 or (unknown and name == done_if):
            return
        if name not in RETRIABLE or time.monotonic() > deadline:
            check(answer.error_code, answer.error_message)
        time.sleep(RETRY_S)


def _leader_address(args: argparse.Namespace) -> str:
    if not args.bootstrap_controller:
        return _target(args)
    response, partition = _leader_view(args)
    return _endpoint_of(response, int(partition.leader_id))


def _int_property(props: dict[str, str], name: str) -> int:
    value = props.get(name, "")
    if not ascii_digits(value.strip()):
        raise CliError(f"give --controller-id, or {name} in --command-config (the new controller's properties)")
    return int(value)


def _controller_listeners(endpoints: str | None, props: dict[str, str]) -> list[tuple[str, str, int]]:
    """NAME://host:port entries: the ones given, else the controller listeners of the properties."""
    if endpoints:
        return [(listener.name, listener.host, listener.port) for listener in _parse_listeners(endpoints)]
    names = {n.strip().upper() for n in props.get("controller.listener.names", "").split(",") if n.strip()}
    chosen: list[tuple[str, str, int]] = []
    for key in ("advertised.listeners", "listeners"):  # controller listeners are seldom advertised
        found = _parse_listeners(props.get(key, ""))
        chosen = chosen or [(listener.name, listener.host, listener.port) for listener in found
                            if listener.name in names]
    if not chosen:
        raise CliError("give --controller-endpoints, or controller.listener.names and listeners in --command-config")
    return chosen


def _parse_listeners(text: str) -> list[Listener]:
    try:
        return [parse_listener(e) for e in text.split(",") if e.strip()]
    except ValueError as exc:
        raise CliError(str(exc)) from None


def _directory_id(props: dict[str, str]) -> uuid.UUID:
    """The metadata directory id the server wrote in its metadata log's directory: under metadata.log.dir, else
    under its first log dir."""
    parent = props.get("metadata.log.dir") or (props.get("log.dirs") or props.get("log.dir") or "").split(",")[0]
    if not parent.strip():
        raise CliError("give --controller-directory-id, or metadata.log.dir or log.dirs in --command-config")
    path = os.path.join(parent.strip(), METADATA_DIR, "directory.id")
    try:
        with open(path) as f:
            return uuid.UUID(f.read().strip())
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read the controller's directory id from {path}: {exc}") from None
