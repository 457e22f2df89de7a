"""Reading, altering and resetting a sink connector's committed consumer offsets (its group
`connect-<name>`), and reading the cluster id, through confluent-kafka's admin client; deleting the offsets of
some partitions (OffsetDelete, which that client lacks) through Moldau's own protocol client."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import kio.schema.find_coordinator.v4.request as fc_req
import kio.schema.offset_delete.v0.request as od_req
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from moldau.cli.command_config import to_authenticator, to_client_security
from moldau.cli.common import bootstrap_addresses
from moldau.connect.errors import ConnectException
from moldau.connect.worker.sink_runner import group_id
from moldau.connect.worker.worker_config import WorkerConfig
from moldau.net.client import ConnectionFailed, ConnectionPool
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode

__all__ = ["alter_sink_offsets", "cluster_id", "delete_sink_offsets", "reset_sink_offsets", "sink_offsets"]

TIMEOUT_S = 10.0
GROUP_KEY_TYPE = 0  # FindCoordinator's key type for groups
# Answers that mean the coordinator is moving or loading: asked again until TIMEOUT_S.
_RETRIABLE = frozenset({ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
                        ErrorCode.coordinator_load_in_progress})


def sink_offsets(worker: WorkerConfig, connector: str) -> list[dict[str, Any]]:
    """KIP-875's shape: `{"partition": {"kafka_topic", "kafka_partition"}, "offset": {"kafka_offset"}}`."""
    admin = AdminClient(worker.client_config("admin"))
    futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id(connector))],
                                                request_timeout=TIMEOUT_S)
    try:
        result = next(iter(futures.values())).result(TIMEOUT_S)
    except KafkaException:
        return []
    offsets = []
    for tp in sorted(result.topic_partitions or [], key=lambda p: (p.topic, p.partition)):
        if tp.offset >= 0:
            offsets.append({"partition": {"kafka_topic": tp.topic, "kafka_partition": tp.partition},
                            "offset": {"kafka_offset": tp.offset}})
    return offsets


def cluster_id(worker: WorkerConfig) -> str | None:
    """The cluster's id, or None when no broker answers."""
    admin = AdminClient(worker.client_config("admin"))
    try:
        return admin.list_topics(timeout=TIMEOUT_S).cluster_id
    except KafkaException:
        return None


def alter_sink_offsets(worker: WorkerConfig, connector: str, offsets: list[tuple[str, int, int]]) -> None:
    """Set the committed offsets (topic, partition, offset) of the connector's group."""
    if not offsets:
        return
    admin = AdminClient(worker.client_config("admin"))
    partitions = [TopicPartition(topic, partition, offset) for topic, partition, offset in offsets]
    futures = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id(connector), partitions)],
                                                 request_timeout=TIMEOUT_S)
    for future in futures.values():
        future.result(TIMEOUT_S)


def reset_sink_offsets(worker: WorkerConfig, connector: str) -> None:
    """Forget every committed offset of the connector's group (by deleting the group, empty once stopped)."""
    admin = AdminClient(worker.client_config("admin"))
    futures = admin.delete_consumer_groups([group_id(connector)], request_timeout=TIMEOUT_S)
    for future in futures.values():
        try:
            future.result(TIMEOUT_S)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.GROUP_ID_NOT_FOUND:
                raise


def delete_sink_offsets(worker: WorkerConfig, connector: str, partitions: Sequence[tuple[str, int]]) -> None:
    """Forget the committed offsets of `partitions` (topic, partition) in the connector's group, so its consumer
    starts them from its `auto.offset.reset` (KIP-875's null sink offset). A group without offsets has nothing
    to forget. Raises ConnectException."""
    if partitions:
        asyncio.run(_delete_offsets(worker, group_id(connector), partitions))


async def _delete_offsets(worker: WorkerConfig, group: str, partitions: Sequence[tuple[str, int]]) -> None:
    security = worker.security_properties()
    pool = ConnectionPool("connect-offsets", to_client_security(security), to_authenticator(security))
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    request = make(od_req.OffsetDeleteRequest, group_id=group, topics=tuple(
        make(od_req.OffsetDeleteRequestTopic, name=topic, partitions=tuple(
            make(od_req.OffsetDeleteRequestPartition, partition_index=p) for p in numbers))
        for topic, numbers in topics.items()))
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while True:
            coordinator = await _coordinator(pool, worker.bootstrap_servers, group)
            if coordinator is not None:
                response = await pool.request(*coordinator, request, TIMEOUT_S)
                code = ErrorCode(response.error_code)
                if code not in _RETRIABLE:
                    break
            if time.monotonic() >= deadline:
                raise ConnectException(f"cannot delete the offsets of group {group}: its coordinator is not "
                                       "available")
            await asyncio.sleep(0.2)
    except (ConnectionFailed, TimeoutError) as exc:
        raise ConnectException(f"cannot delete the offsets of group {group}: {exc or 'timed out'}") from None
    finally:
        pool.close()
    if code == ErrorCode.group_id_not_found:
        return  # nothing was ever committed
    failed = [f"{t.name}-{p.partition_index}: {ErrorCode(p.error_code).name}" for t in response.topics
              for p in t.partitions if p.error_code != ErrorCode.none]
    if code != ErrorCode.none or failed:
        raise ConnectException(f"cannot delete the offsets of group {group}: "
                               f"{', '.join(failed) if failed else code.name}")


async def _coordinator(pool: ConnectionPool, bootstrap: str, group: str) -> tuple[str, int] | None:
    """The group coordinator's address; None while it is moving or loading. Raises ConnectException."""
    request = make(fc_req.FindCoordinatorRequest, key_type=GROUP_KEY_TYPE, coordinator_keys=(group,))
    failure: Exception = ConnectionFailed(f"no bootstrap server in {bootstrap!r}")
    for host, port in bootstrap_addresses(bootstrap):
        try:
            (found,) = (await pool.request(host, port, request, TIMEOUT_S)).coordinators
        except (ConnectionFailed, TimeoutError) as exc:
            failure = exc
            continue
        code = ErrorCode(found.error_code)
        if code in _RETRIABLE:
            return None
        if code != ErrorCode.none:
            raise ConnectException(f"cannot find the coordinator of group {group}: {code.name}")
        return found.host, found.port
    raise failure
