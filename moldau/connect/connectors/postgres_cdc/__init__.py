"""Debezium-compatible PostgreSQL change data capture: a source connector that reads the write-ahead log
through logical replication (`pgoutput`) and writes Debezium's change events.

Modules, one concern each: `config` (Debezium's config names and validation), `pgoutput` (a pure decoder of
the pgoutput binary protocol), `types` (PostgreSQL types to Connect schemas and values), `envelope` (Debezium's
key, value, source and heartbeat shapes), `events` (decoded changes to create, update, delete and truncate
records), `offsets` (the stored offset and which LSN may be confirmed), `replication` (publication, slot and the
psycopg2 replication stream), `snapshot` (the initial consistent snapshot), `task` (the source task) and
`connector` (the connector class the plugin registry finds).
"""
