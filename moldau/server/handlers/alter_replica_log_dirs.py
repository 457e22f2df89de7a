"""AlterReplicaLogDirs (key 34): move replicas between this broker's log directories (KIP-113).

Each named partition is moved to the named directory while it keeps serving: a future log there copies the
current one and is swapped in once it has caught up (`moldau.replication.log_dir_mover`). The answer comes as
soon as the move has started; DescribeLogDirs shows the future replica and its offset lag until the swap.
Needs ALTER on the CLUSTER resource. Per partition, checked in this order as Kafka does: LOG_DIR_NOT_FOUND (not
an absolute path of one of this broker's `log.dirs`), KAFKA_STORAGE_ERROR (that directory is offline),
UNKNOWN_TOPIC_OR_PARTITION (no such partition in the metadata), REPLICA_NOT_AVAILABLE (the partition has no
replica on this broker yet; the directory is remembered for when it is created), KAFKA_STORAGE_ERROR (the
partition's own directory is offline, or the future log cannot be created).
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import CLUSTER_NAME, AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE


async def handle(ctx: RequestContext, request: Any) -> Any:
    wanted = [(d.path, t.name, int(p)) for d in request.dirs for t in d.topics for p in t.partitions]
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return _response(ctx, {(topic, p): ErrorCode.cluster_authorization_failed for _, topic, p in wanted})
    return _response(ctx, {(topic, p): _move(ctx, path, topic, p) for path, topic, p in wanted})


def _move(ctx: RequestContext, path: str, topic: str, partition: int) -> ErrorCode:
    try:
        ctx.broker.log_manager.check_log_dir(path)
        image_topic = ctx.broker.image.topics_by_name.get(topic)
        if image_topic is None or partition not in image_topic.partitions:
            return ErrorCode.unknown_topic_or_partition
        ctx.broker.log_dir_mover.alter(topic, partition, path)
    except KafkaError as exc:
        return exc.code
    return ErrorCode.none


def _response(ctx: RequestContext, outcomes: dict[tuple[str, int], ErrorCode]) -> Any:
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), code in outcomes.items():
        by_topic.setdefault(topic, []).append(
            make(ctx.nested("AlterReplicaLogDirPartitionResult"), partition_index=partition, error_code=code))
    results = tuple(make(ctx.nested("AlterReplicaLogDirTopicResult"), topic_name=topic, partitions=tuple(parts))
                    for topic, parts in by_topic.items())
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, results=results)


API = Api(key=34, name="AlterReplicaLogDirs", min_version=1, max_version=2, handle=handle)
