"""Writing share groups to `__consumer_offsets`: the group (record type 11, ShareGroupMetadata) and each member
(type 10, ShareGroupMemberMetadata), for the handlers that create, change or delete share groups and for the
broker's sweep of silent members.

The live membership is the share manager's (`moldau.share`); what is written is that the group exists, its
epoch, the topics it may have share-partition state of (its members' subscriptions and the topics an
administrator set offsets of, less those whose offsets were deleted), and every member with its epoch and
subscription. So after a restart of its coordinator the group is still listed, described and deletable, its id
not taken by a classic or consumer group, DescribeShareGroupOffsets without topics still finds its topics, and
its members carry on with their epochs instead of rejoining, as with Kafka. A member that leaves or goes silent
gets a tombstone. A write is one batch, made before the answer, and waits for the in-sync replicas, as Kafka's
coordinator records do.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from moldau.coordinator.group.records import (
    Record,
    ShareGroupKey,
    ShareGroupValue,
    ShareMemberKey,
    ShareMemberValue,
)
from moldau.protocol.errors import ErrorCode
from moldau.server.services import BrokerServices
from moldau.share.group import ShareGroup

log = logging.getLogger(__name__)


def written_topics(broker: BrokerServices, group_id: str) -> tuple[str, ...]:
    """The topics last written for the share group (none if it was never written)."""
    written = broker.groups.coordinator.share_group(group_id)
    return () if written is None else written.topics


async def write_group(broker: BrokerServices, group_id: str, add: Iterable[str] = (),
                      remove: Iterable[str] = ()) -> ErrorCode:
    """Write what changed of the share group since it was last written: its epoch, its topics (grown by its
    members' subscriptions or `add`, shrunk by `remove` or by topics deleted from the cluster) and its members
    (ErrorCode.none when there is nothing to write)."""
    group = broker.share.describe(group_id)
    if group is None:
        return ErrorCode.none
    coordinator = broker.groups.coordinator
    written = coordinator.share_group(group_id)
    topics = set(() if written is None else written.topics) | group.subscribed_topics() | set(add)
    existing = broker.image.topics_by_name
    value = ShareGroupValue(group.epoch, tuple(sorted(t for t in topics - set(remove) if t in existing)))
    records = member_records(group, coordinator.share_group_members(group_id))
    if value != written:
        records.append(Record(ShareGroupKey(group_id), value))
    if not records:
        return ErrorCode.none
    return await broker.groups.write_share_records(group_id, records)


async def write_expired(broker: BrokerServices) -> None:
    """Write the groups that lost members to expiry (tombstones for those members, the groups' new epochs); a
    group that cannot be written now (its coordinator moved, a write failed) is written with its next change."""
    for group_id in sorted(broker.share.take_expired_in()):
        error = await write_group(broker, group_id)
        if error != ErrorCode.none:
            log.debug("share group %s: expired members not written (%s)", group_id, error.name)


async def write_deletion(broker: BrokerServices, group_id: str) -> ErrorCode:
    """Write the share group's deletion (a tombstone for it and each member written), if it was ever written."""
    coordinator = broker.groups.coordinator
    if coordinator.share_group(group_id) is None:
        return ErrorCode.none
    records = [Record(ShareMemberKey(group_id, m), None) for m in sorted(coordinator.share_group_members(group_id))]
    records.append(Record(ShareGroupKey(group_id), None))
    return await broker.groups.write_share_records(group_id, records)


def member_records(group: ShareGroup, written: Mapping[str, ShareMemberValue]) -> list[Record]:
    """A record for each member new or changed since written, a tombstone for each written one gone."""
    records = [Record(ShareMemberKey(group.group_id, member_id), None)
               for member_id in sorted(written) if member_id not in group.members]
    for member_id, member in sorted(group.members.items()):
        value = ShareMemberValue(member.epoch, member.rack_id, member.client_id, member.client_host,
                                 member.subscribed_topics)
        if written.get(member_id) != value:
            records.append(Record(ShareMemberKey(group.group_id, member_id), value))
    return records
