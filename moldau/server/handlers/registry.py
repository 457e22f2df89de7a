"""The APIs each kind of listener serves. ApiVersions advertises exactly these ranges.

Client listeners serve the client APIs. Controller listeners serve what nodes send each other (the quorum's
Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch and FetchSnapshot; BrokerRegistration, BrokerHeartbeat and
AllocateProducerIds) and the admin requests brokers forward to the active controller.
"""

from __future__ import annotations

from moldau.server.handlers import (
    allocate_producer_ids,
    alter_configs,
    alter_partition,
    alter_partition_reassignments,
    api_versions,
    begin_quorum_epoch,
    broker_heartbeat,
    broker_registration,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_partitions,
    create_topics,
    delete_groups,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_quorum,
    elect_leaders,
    end_quorum_epoch,
    fetch,
    fetch_snapshot,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    quorum_fetch,
    sync_group,
    vote,
)
from moldau.server.handlers.api import Api

APIS: dict[int, Api] = {
    api.key: api
    for api in (
        produce.API,
        fetch.API,
        list_offsets.API,
        metadata.API,
        offset_commit.API,
        offset_fetch.API,
        find_coordinator.API,
        join_group.API,
        heartbeat.API,
        leave_group.API,
        sync_group.API,
        describe_groups.API,
        list_groups.API,
        api_versions.API,
        create_topics.API,
        delete_topics.API,
        delete_records.API,
        init_producer_id.API,
        offset_for_leader_epoch.API,
        describe_configs.API,
        alter_configs.API,
        describe_log_dirs.API,
        create_partitions.API,
        delete_groups.API,
        incremental_alter_configs.API,
        alter_partition_reassignments.API,
        list_partition_reassignments.API,
        offset_delete.API,
        describe_cluster.API,
        consumer_group_heartbeat.API,
        consumer_group_describe.API,
        describe_quorum.API,
        elect_leaders.API,
    )
}

CONTROLLER_APIS: dict[int, Api] = {
    api.key: api
    for api in (
        api_versions.API,
        quorum_fetch.API,
        vote.API,
        begin_quorum_epoch.API,
        end_quorum_epoch.API,
        describe_quorum.API,
        fetch_snapshot.API,
        broker_registration.API,
        broker_heartbeat.API,
        allocate_producer_ids.API,
        alter_partition.API,
        create_topics.API,
        delete_topics.API,
        create_partitions.API,
        alter_configs.API,
        incremental_alter_configs.API,
        alter_partition_reassignments.API,
        list_partition_reassignments.API,
        describe_cluster.API,
        elect_leaders.API,
    )
}
