"""The one list of the APIs this broker serves. ApiVersions advertises exactly these ranges."""

from __future__ import annotations

from moldau.server.handlers import (
    alter_configs,
    api_versions,
    create_partitions,
    create_topics,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_log_dirs,
    fetch,
    incremental_alter_configs,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
)
from moldau.server.handlers.api import Api

APIS: dict[int, Api] = {
    api.key: api
    for api in (
        produce.API,
        fetch.API,
        list_offsets.API,
        metadata.API,
        api_versions.API,
        create_topics.API,
        delete_topics.API,
        delete_records.API,
        init_producer_id.API,
        describe_configs.API,
        alter_configs.API,
        describe_log_dirs.API,
        create_partitions.API,
        incremental_alter_configs.API,
        describe_cluster.API,
    )
}
