"""DescribeLogDirs (key 35): this broker's log directories and the partitions stored in each (KIP-113).

The request names topics and partitions, or is null for all of them; only partitions this broker stores are
listed, under the directory that holds them. Each partition reports its size on disk, its offset lag and
whether it is a future replica: a partition being moved to another directory (AlterReplicaLogDirs) is listed
twice, under its current directory with lag 0 and under the target directory as the future replica, with how
far it trails the current log. A directory that cannot be read or is offline (docs/storage.md) reports
KAFKA_STORAGE_ERROR and no partitions. From v4 each directory also reports its file system's total and
usable bytes (KIP-827), -1 when unknown. v5 (whether a directory is cordoned, KIP-1066) is Kafka 4.3's and
is not served: ApiVersions advertises Kafka 4.2's ranges (docs/protocol.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.security.acl.model import CLUSTER_NAME, AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE
from moldau.storage.log_manager import LogDirDescription, PartitionDescription

Wanted = Callable[[str, int], bool]


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        # v3+ says so; older versions can only answer with no log directories, as Kafka does.
        return make(ctx.schema.response_type, throttle_time=NO_THROTTLE,
                    error_code=ErrorCode.cluster_authorization_failed, results=())
    wanted = _wanted(request.topics)
    results = tuple(_log_dir(ctx, d, wanted) for d in ctx.broker.log_manager.describe_log_dirs())
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, results=results)


def _wanted(topics: Any) -> Wanted:
    if topics is None:
        return lambda topic, partition: True
    requested = {(t.topic, p) for t in topics for p in t.partitions}
    return lambda topic, partition: (topic, partition) in requested


def _log_dir(ctx: RequestContext, log_dir: LogDirDescription, wanted: Wanted) -> Any:
    by_topic: dict[str, list[PartitionDescription]] = {}
    if log_dir.error == ErrorCode.none:
        for p in log_dir.partitions:
            if wanted(p.topic, p.partition):
                by_topic.setdefault(p.topic, []).append(p)
    partition_cls, topic_cls = ctx.nested("DescribeLogDirsPartition"), ctx.nested("DescribeLogDirsTopic")
    topics = tuple(
        make(topic_cls, name=name, partitions=tuple(
            make(partition_cls, partition_index=p.partition, partition_size=p.size_bytes,
                 offset_lag=p.offset_lag, is_future_key=p.is_future_key)
            for p in partitions))
        for name, partitions in by_topic.items()
    )
    return make(ctx.nested("DescribeLogDirsResult"), error_code=log_dir.error, log_dir=log_dir.path,
                topics=topics, total_bytes=log_dir.total_bytes, usable_bytes=log_dir.usable_bytes)


API = Api(key=35, name="DescribeLogDirs", min_version=1, max_version=4, handle=handle)
