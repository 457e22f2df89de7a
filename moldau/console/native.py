"""Requests the console needs that confluent-kafka has no API for (DescribeQuorum, DescribeLogDirs, ACLs of every
resource type), sent with
Moldau's own protocol client (moldau.net.client) as the same user and over the same listener as the page's
librdkafka clients.

Requests go over the user's pooled session (`ConsoleClients.native`): one connection per broker, reused by every
page and refresh, closed at sign-out and when the broker stops. Failures come back as ConsoleError (unreachable:
502; a Kafka error code: the status errors.py gives that error), so a page can show them in place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError
from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest
from kio.schema.describe_quorum.v2.request import DescribeQuorumRequest, PartitionData, TopicData
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32

from moldau.console.clients import REQUEST_TIMEOUT_MS, ConsoleClients
from moldau.console.errors import ConsoleError, kafka_error_status
from moldau.net.client import ConnectionFailed

__all__ = ["LogDir", "QuorumReplica", "QuorumState", "check_error", "describe_log_dirs", "describe_quorum", "send",
           "send_any"]

METADATA_TOPIC = "__cluster_metadata"


@dataclass(frozen=True)
class QuorumReplica:
    node_id: int
    log_end_offset: int
    last_fetch_ms: int  # wall-clock ms, -1 when unknown
    last_caught_up_ms: int


@dataclass(frozen=True)
class QuorumState:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[QuorumReplica, ...]
    observers: tuple[QuorumReplica, ...]


@dataclass(frozen=True)
class LogDir:
    """One log directory of one broker, as DescribeLogDirs reports it."""

    path: str
    error: str | None  # the Kafka error name when the directory cannot be read
    total_bytes: int  # of its file system, -1 when unknown
    usable_bytes: int
    partition_bytes: Mapping[tuple[str, int], int]  # size on disk of each partition stored there

    @property
    def size_bytes(self) -> int:
        return sum(self.partition_bytes.values())


async def describe_quorum(clients: ConsoleClients) -> QuorumState:
    """The metadata quorum as its leader sees it; any broker forwards the request to the active controller."""
    request = DescribeQuorumRequest(topics=(TopicData(topic_name=TopicName(METADATA_TOPIC),
                                                      partitions=(PartitionData(partition_index=i32(0)),)),))
    response = await send_any(clients, request)
    check_error(response.error_code, response.error_message)
    partition = response.topics[0].partitions[0]
    check_error(partition.error_code, partition.error_message)
    return QuorumState(leader_id=int(partition.leader_id), leader_epoch=int(partition.leader_epoch),
                       high_watermark=int(partition.high_watermark),
                       voters=tuple(_replica(r) for r in partition.current_voters),
                       observers=tuple(_replica(r) for r in partition.observers))


async def describe_log_dirs(clients: ConsoleClients, host: str, port: int) -> list[LogDir]:
    """The log directories of the broker at host:port and the size of every partition in each."""
    response = await send(clients, host, port, DescribeLogDirsRequest(topics=None))
    check_error(response.error_code, None)
    dirs = []
    for result in response.results:
        sizes = {(t.name, int(p.partition_index)): int(p.partition_size)
                 for t in result.topics for p in t.partitions if not p.is_future_key}
        error = None if result.error_code == ErrorCode.none else result.error_code.name.upper()
        dirs.append(LogDir(path=result.log_dir, error=error, total_bytes=int(result.total_bytes),
                           usable_bytes=int(result.usable_bytes), partition_bytes=sizes))
    return dirs


def bootstrap_address(config: Mapping[str, Any]) -> tuple[str, int]:
    """The first `bootstrap.servers` address of a librdkafka configuration."""
    first = str(config["bootstrap.servers"]).split(",")[0].strip().rpartition("://")[2]
    host, _, port = first.rpartition(":")
    return host.strip("[]"), int(port)


async def send_any(clients: ConsoleClients, request: Any) -> Any:
    """One request as the user to the console's bootstrap broker (any broker answers or forwards it)."""
    host, port = bootstrap_address(clients.config())
    return await send(clients, host, port, request)


async def send(clients: ConsoleClients, host: str, port: int, request: Any) -> Any:
    """One request as the user to the broker at host:port, on the user's pooled connection to it."""
    try:
        return await clients.native.pool.request(host, port, request, REQUEST_TIMEOUT_MS / 1000)
    except (ValueError, OSError) as exc:
        raise ConsoleError(502, f"cannot connect to {host}:{port}: {exc}") from None
    except (ConnectionFailed, TimeoutError) as exc:
        raise ConsoleError(502, f"{host}:{port} did not answer: {exc or 'timed out'}") from None


def check_error(code: ErrorCode, message: str | None) -> None:
    """Raise the Kafka error a response carries as a ConsoleError with that error's status."""
    if code == ErrorCode.none:
        return
    # librdkafka numbers its errors with Kafka's codes: the page gets the status any other Kafka error gets.
    name = code.name.upper()
    raise ConsoleError(kafka_error_status(KafkaError(int(code))), f"{name}: {message or name}")


def _replica(state: Any) -> QuorumReplica:
    return QuorumReplica(node_id=int(state.replica_id), log_end_offset=int(state.log_end_offset),
                         last_fetch_ms=int(state.last_fetch_timestamp),
                         last_caught_up_ms=int(state.last_caught_up_timestamp))
