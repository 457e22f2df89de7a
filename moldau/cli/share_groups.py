"""The share-group side of `moldau groups` (KIP-932): listing groups of every type, describing a share group
(members, assignments, start offsets, in-flight records, lag) and setting its start offsets.

confluent-kafka's AdminClient has no share-group calls yet, so these go as kio requests through the same `Session`
as `moldau transactions`: ListGroups v5 to every broker (it lists the groups each coordinates), FindCoordinator for
the group, then ShareGroupDescribe, DescribeShareGroupOffsets and AlterShareGroupOffsets to its coordinator.

kio reads the field types of its entities at run time, so this module must not postpone annotations.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import kio.schema.alter_share_group_offsets.v0.request as alter_req
import kio.schema.describe_configs.v4.request as dc_req
import kio.schema.describe_share_group_offsets.v1.request as offsets_req
import kio.schema.find_coordinator.v4.request as fc_req
import kio.schema.incremental_alter_configs.v1.request as iac_req
import kio.schema.list_groups.v5.request as lg_req
import kio.schema.share_group_describe.v1.request as sgd_req
from kio.static.primitive import i8

from moldau.cli.common import CliError
from moldau.cli.transactions_session import Address, Session, error_name, run_session
from moldau.protocol import share_offsets_response
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode

GROUP_KEY_TYPE = 0
GROUP_RESOURCE = i8(32)  # ConfigResource GROUP
OP_SET, OP_DELETE = i8(0), i8(1)
# DescribeConfigs' ConfigSource numbers, as Kafka's tools name them.
SOURCES = {1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
           4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 8: "GROUP_CONFIG"}


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    group_type: str  # classic, consumer or share
    state: str


@dataclass(frozen=True, slots=True)
class SharePartitionView:
    topic: str
    partition: int
    start_offset: int  # -1: the group has not started on it
    lag: int  # -1: not known
    in_flight: int  # records acquired, or available again after a delivery; -1: not known


@dataclass(frozen=True, slots=True)
class ShareGroupView:
    group_id: str
    state: str
    epoch: int
    coordinator: tuple[int, Address]
    members: tuple[Any, ...]  # ShareGroupDescribe members
    partitions: tuple[SharePartitionView, ...]


def list_all_groups(bootstrap: str, states: Sequence[str] = ()) -> list[ListedGroup]:
    """Every group of every broker, of every type, optionally only in some states (case-insensitive)."""
    return run_session(bootstrap, lambda session: _list(session, tuple(states)))


async def _list(session: Session, states: tuple[str, ...]) -> list[ListedGroup]:
    cluster = await session.metadata(())
    found: dict[str, ListedGroup] = {}
    for address in cluster.brokers.values():
        response = await session.send(address, make(lg_req.ListGroupsRequest, states_filter=states,
                                                    types_filter=()))
        if response.error_code != ErrorCode.none:
            raise CliError(f"cannot list groups: {error_name(response.error_code)}")
        for g in response.groups:
            found[g.group_id] = ListedGroup(g.group_id, g.group_type.lower() or "classic", g.group_state)
    return sorted(found.values(), key=lambda g: g.group_id)


async def _coordinator(session: Session, group: str) -> tuple[int, Address]:
    response = await session.send_any(make(fc_req.FindCoordinatorRequest, key_type=GROUP_KEY_TYPE,
                                           coordinator_keys=(group,)))
    (found,) = response.coordinators
    if found.error_code != ErrorCode.none:
        raise CliError(f"cannot find the coordinator of group '{group}': {error_name(found.error_code)}")
    return found.node_id, (found.host, found.port)


def describe_share_group(bootstrap: str, group: str) -> ShareGroupView:
    return run_session(bootstrap, lambda session: _describe(session, group))


async def _describe(session: Session, group: str) -> ShareGroupView:
    node, address = await _coordinator(session, group)
    (described,) = (await session.send(address, make(sgd_req.ShareGroupDescribeRequest, group_ids=(group,),
                                                     include_authorized_operations=False))).groups
    if described.error_code != ErrorCode.none:
        raise CliError(f"cannot describe share group '{group}': {error_name(described.error_code)}"
                       + (f" ({described.error_message})" if described.error_message else ""))
    # Read as Moldau's v1 response, which has the in-flight count (a tagged field other brokers leave out).
    (offsets,) = (await session.send(address, make(offsets_req.DescribeShareGroupOffsetsRequest, groups=(
        make(offsets_req.DescribeShareGroupOffsetsRequestGroup, group_id=group, topics=None),)),
        share_offsets_response.DescribeShareGroupOffsetsResponse)).groups
    partitions: list[SharePartitionView] = []
    if offsets.error_code == ErrorCode.none:
        partitions = [SharePartitionView(t.topic_name, p.partition_index, p.start_offset, p.lag, p.in_flight_count)
                      for t in offsets.topics for p in t.partitions if p.error_code == ErrorCode.none]
    elif offsets.error_code != ErrorCode.group_id_not_found:
        raise CliError(f"cannot describe the offsets of share group '{group}': {error_name(offsets.error_code)}")
    return ShareGroupView(group, described.group_state, described.group_epoch, (node, address),
                          tuple(described.members), tuple(sorted(partitions, key=lambda p: (p.topic, p.partition))))


def alter_share_offsets(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Set the start offsets (AlterShareGroupOffsets); raises CliError naming every partition refused."""
    run_session(bootstrap, lambda session: _alter(session, group, offsets))


async def _alter(session: Session, group: str, offsets: dict[tuple[str, int], int]) -> None:
    _, address = await _coordinator(session, group)
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic.setdefault(topic, []).append(make(alter_req.AlterShareGroupOffsetsRequestPartition,
                                                   partition_index=partition, start_offset=offset))
    response = await session.send(address, make(alter_req.AlterShareGroupOffsetsRequest, group_id=group, topics=tuple(
        make(alter_req.AlterShareGroupOffsetsRequestTopic, topic_name=t, partitions=tuple(ps))
        for t, ps in by_topic.items())))
    if response.error_code == ErrorCode.non_empty_group:
        raise CliError(f"offsets can only be reset while share group '{group}' is empty, but it has members "
                       "(NON_EMPTY_GROUP)")
    if response.error_code != ErrorCode.none:
        raise CliError(f"cannot reset offsets of share group '{group}': {error_name(response.error_code)}")
    errors = [f"{t.topic_name}:{p.partition_index} {error_name(p.error_code)}" for t in response.responses
              for p in t.partitions if p.error_code != ErrorCode.none]
    if errors:
        raise CliError(f"cannot reset offsets of share group '{group}': {'; '.join(errors)}")


def group_configs(bootstrap: str, group: str) -> list[tuple[str, str | None, str]]:
    """(name, value, source) of every group config of the group (DescribeConfigs on the GROUP resource)."""
    return run_session(bootstrap, lambda session: _group_configs(session, group))


async def _group_configs(session: Session, group: str) -> list[tuple[str, str | None, str]]:
    (result,) = (await session.send_any(make(dc_req.DescribeConfigsRequest, resources=(
        make(dc_req.DescribeConfigsResource, resource_type=GROUP_RESOURCE, resource_name=group,
             configuration_keys=None),), include_synonyms=False, include_documentation=False))).results
    if result.error_code != ErrorCode.none:
        raise CliError(f"cannot describe the configs of group '{group}': {error_name(result.error_code)}"
                       + (f" ({result.error_message})" if result.error_message else ""))
    return [(c.name, c.value, SOURCES.get(c.config_source, str(c.config_source))) for c in result.configs]


def alter_group_configs(bootstrap: str, group: str, settings: list[tuple[str, str]], removals: list[str]) -> None:
    """Set and remove group configs (IncrementalAlterConfigs); raises CliError with the broker's reason."""
    run_session(bootstrap, lambda session: _alter_configs(session, group, settings, removals))


async def _alter_configs(session: Session, group: str, settings: list[tuple[str, str]], removals: list[str]
                         ) -> None:
    configs = tuple([make(iac_req.AlterableConfig, name=k, config_operation=OP_SET, value=v) for k, v in settings]
                    + [make(iac_req.AlterableConfig, name=k, config_operation=OP_DELETE, value=None)
                       for k in removals])
    (result,) = (await session.send_any(make(iac_req.IncrementalAlterConfigsRequest, resources=(
        make(iac_req.AlterConfigsResource, resource_type=GROUP_RESOURCE, resource_name=group, configs=configs),),
        validate_only=False))).responses
    if result.error_code != ErrorCode.none:
        raise CliError(f"cannot change the configs of group '{group}': {error_name(result.error_code)}"
                       + (f" ({result.error_message})" if result.error_message else ""))


# The same requests on a session the caller already holds (the web console, in the broker's event loop).
async def list_groups_in(session: Session, states: Sequence[str] = ()) -> list[ListedGroup]:
    return await _list(session, tuple(states))


async def describe_share_group_in(session: Session, group: str) -> ShareGroupView:
    return await _describe(session, group)


async def alter_share_offsets_in(session: Session, group: str, offsets: dict[tuple[str, int], int]) -> None:
    await _alter(session, group, offsets)
