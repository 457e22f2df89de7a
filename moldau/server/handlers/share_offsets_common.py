"""What DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets share: finding the share
group (coordinated here, not a consumer group), and the partitions of the topics they name.

A share group need not exist, nor have members, for its offsets to be set: Kafka lets an administrator set them
before the group is used. So a group id this broker coordinates that is no consumer group is treated as a share
group, with or without members; its share-partition state is durable in the share coordinator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.share_group_records import written_topics

if TYPE_CHECKING:
    from moldau.metadata.image import TopicImage
    from moldau.share.group import ShareGroup


def check_share_group(ctx: RequestContext, group_id: str) -> ShareGroup | None:
    """The share group if it has members or had them since this broker started (None: not known here).
    Raises KafkaError: INVALID_GROUP_ID, NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE, or GROUP_ID_NOT_FOUND for
    a classic or consumer group."""
    if not group_id:
        raise KafkaError(ErrorCode.invalid_group_id, "group id can't be empty")
    groups = ctx.broker.groups.coordinator
    groups.shard(group_id)
    if groups.find_group(group_id) is not None or groups.find_consumer_group(group_id) is not None:
        raise KafkaError(ErrorCode.group_id_not_found, f"group {group_id} is not a share group")
    return ctx.broker.share.describe(group_id)


def check_empty(ctx: RequestContext, group_id: str) -> None:
    """Offsets change only while the group has no members (NON_EMPTY_GROUP otherwise), as in Kafka."""
    group = check_share_group(ctx, group_id)
    if group is not None and group.members:
        raise KafkaError(ErrorCode.non_empty_group,
                         f"share group {group_id} has {len(group.members)} members; its offsets change only "
                         "while it is empty")


def readable_topic(ctx: RequestContext, name: str, operation: AclOperation) -> TopicImage:
    """The topic, if the principal may `operation` it; raises KafkaError (TOPIC_AUTHORIZATION_FAILED first, so
    an unauthorised principal cannot learn which topics exist, then UNKNOWN_TOPIC_OR_PARTITION)."""
    if not ctx.authorize(operation, ResourceType.TOPIC, name):
        raise KafkaError(ErrorCode.topic_authorization_failed, f"{ctx.principal} may not {operation.name} {name}")
    topic = ctx.broker.image.topics_by_name.get(name)
    if topic is None:
        raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topic '{name}' does not exist")
    return topic


def known_topics(ctx: RequestContext, group_id: str) -> list[str]:
    """The topics the group has share-partitions of, as far as this broker knows: the topics written with the
    group (`share_group_records`), its members' subscriptions, share-partitions held here, and the state the
    share coordinator keeps here."""
    names: set[str] = set(written_topics(ctx.broker, group_id))
    group = ctx.broker.share.describe(group_id)
    if group is not None:
        names.update(group.subscribed_topics())
    names.update(topic for g, topic, _ in ctx.broker.share.partitions if g == group_id)
    by_id = ctx.broker.image.topics_by_id
    for shard in ctx.broker.share_state.partitions.shards.values():
        names.update(t.name for key in shard.snapshots if key.group_id == group_id
                     and (t := by_id.get(key.topic_id)) is not None)
    return sorted(n for n in names if n in ctx.broker.image.topics_by_name)
