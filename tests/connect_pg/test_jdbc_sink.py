"""The PostgreSQL (JDBC) sink in a real `moldau connect standalone` worker: records produced with
confluent-kafka to a real broker, converted by JsonConverter with schemas, written to a real PostgreSQL
database (one per test) with Confluent's JDBC sink configs."""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg2
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.support.broker_process import BrokerProcess
from tests.support.clients import ck_produce
from tests.support.connect_worker import WorkerProcess, running_worker, wait_for
from tests.support.postgres import PostgresServer

JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"
JDBC_SINK = "io.confluent.connect.jdbc.JdbcSinkConnector"


@pytest.fixture(scope="module")
def worker(shared_broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    with running_worker(tmp_path_factory.mktemp("connect-jdbc-sink"), shared_broker.bootstrap,
                        {"offset.flush.interval.ms": "200"}) as proc:
        yield proc


class Database:
    """One test's database: its JDBC URL for the connector and a psycopg2 connection for checks."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.jdbc_url = "jdbc:" + url.replace("postgresql://postgres@", "postgresql://") + "?user=postgres"

    def run(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with psycopg2.connect(self.url) as connection, connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall() if cursor.description else []
        connection.close()
        return rows

    def rows(self, table: str, order: str = "1") -> list[tuple[Any, ...]]:
        rows = self.run(f"SELECT * FROM {table} ORDER BY {order}")
        return [tuple(bytes(v) if isinstance(v, memoryview) else v for v in row) for row in rows]

    def wait_rows(self, table: str, expected: list[tuple[Any, ...]], order: str = "1") -> None:
        def matches() -> bool:
            try:
                return self.rows(table, order) == expected
            except psycopg2.errors.UndefinedTable:
                return False
        try:
            wait_for(matches, 60, f"rows of {table}")
        except AssertionError:
            raise AssertionError(f"{table}: {self._rows_or_error(table, order)} != {expected}") from None

    def _rows_or_error(self, table: str, order: str) -> Any:
        try:
            return self.rows(table, order)
        except psycopg2.Error as exc:
            return exc

    def column_types(self, table: str, schema: str = "public") -> dict[str, str]:
        return dict(self.run("SELECT column_name, data_type FROM information_schema.columns WHERE table_schema=%s "
                             "AND table_name=%s", (schema, table)))

    def primary_key(self, table: str) -> list[str]:
        rows = self.run("SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND "
                        "a.attnum = ANY(i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary "
                        "ORDER BY a.attname", (table,))
        return [str(r[0]) for r in rows]


@pytest.fixture
def db(postgres: PostgresServer) -> Database:
    return Database(postgres.create_database(f"sink_{uuid.uuid4().hex[:10]}"))


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


# --- records ---------------------------------------------------------------------------------------------

def field(field_name: str, type_: str, optional: bool = False, **extra: Any) -> dict[str, Any]:
    return {"field": field_name, "type": type_, "optional": optional, **extra}


def struct_schema(*fields: dict[str, Any], name: str = "row") -> dict[str, Any]:
    return {"type": "struct", "name": name, "optional": False, "fields": list(fields)}


def envelope(schema: dict[str, Any], payload: Any) -> bytes:
    return json.dumps({"schema": schema, "payload": payload}).encode()


ID_KEY = struct_schema(field("id", "int32"), name="key")
ID_NAME = struct_schema(field("id", "int32"), field("name", "string", True))


def keyed(id_: int, name: str | None) -> dict[str, Any]:
    """A record with a struct key {id} and value {id, name} (a tombstone when name is None)."""
    value = None if name is None else envelope(ID_NAME, {"id": id_, "name": name})
    return {"key": envelope(ID_KEY, {"id": id_}), "value": value}


def sink_config(db: Database, topic: str, **extra: str) -> dict[str, str]:
    return {"connector.class": JDBC_SINK, "tasks.max": "1", "topics": topic, "connection.url": db.jdbc_url,
            "key.converter": JSON_CONVERTER, "value.converter": JSON_CONVERTER, **extra}


def start(worker: WorkerProcess, name: str, config: dict[str, str]) -> None:
    status, body = worker.request("PUT", f"/connectors/{name}/config", config)
    assert status == 201, body


def delete(worker: WorkerProcess, name: str) -> None:
    assert worker.request("DELETE", f"/connectors/{name}")[0] == 204


def task_status(worker: WorkerProcess, name: str) -> dict[str, Any]:
    status, body = worker.request("GET", f"/connectors/{name}/status")
    assert status == 200, body
    tasks: list[dict[str, Any]] = body["tasks"]
    return tasks[0] if tasks else {}


def wait_task_failed(worker: WorkerProcess, name: str) -> str:
    found = wait_for(lambda: task_status(worker, name).get("state") == "FAILED" and task_status(worker, name),
                     60, f"task of {name} failed")
    return str(found["trace"])


def replay_from_the_start(worker: WorkerProcess, name: str) -> None:
    """Stop the connector, forget its committed offsets (KIP-875) and resume it: it reads its topics again."""
    assert worker.request("PUT", f"/connectors/{name}/stop")[0] == 204
    status, body = worker.request("DELETE", f"/connectors/{name}/offsets")
    assert status == 200, body
    assert worker.request("PUT", f"/connectors/{name}/resume")[0] == 202


# --- tests -------------------------------------------------------------------------------------------------

def test_insert_creates_the_table_from_the_schema_of_a_dotted_topic(
        worker: WorkerProcess, shared_broker: BrokerProcess, db: Database) -> None:
    table = unique("customers")
    topic = f"dbserver1.public.{table}"
    schema = struct_schema(
        field("id", "int64"), field("name", "string", True), field("active", "boolean"),
        field("score", "double", True), field("small", "int16", True), field("photo", "bytes", True),
        field("balance", "bytes", True, name="org.apache.kafka.connect.data.Decimal", parameters={"scale": "2"}),
        field("born", "int32", True, name="org.apache.kafka.connect.data.Date"),
        field("seen", "int64", True, name="org.apache.kafka.connect.data.Timestamp"),
        field("at", "int32", True, name="org.apache.kafka.connect.data.Time"))
    payloads = [{"id": 1, "name": "Ada", "active": True, "score": 1.5, "small": 7,
                 "photo": base64.b64encode(b"\x00\x01").decode(), "balance": base64.b64encode(b"\x30\x39").decode(),
                 "born": 365, "seen": 86_400_123, "at": 3_600_000},
                {"id": 2, "name": None, "active": False, "score": None, "small": None, "photo": None,
                 "balance": None, "born": None, "seen": None, "at": None}]
    ck_produce(shared_broker.bootstrap, topic, [{"value": envelope(schema, p)} for p in payloads])
    name = unique("insert")
    start(worker, name, sink_config(db, topic, **{"auto.create": "true", "key.converter": STRING_CONVERTER}))
    db.wait_rows(f'public."{table}"', [
        (1, "Ada", True, 1.5, 7, b"\x00\x01", decimal.Decimal("123.45"), datetime.date(1971, 1, 1),
         datetime.datetime(1970, 1, 2, 0, 0, 0, 123000), datetime.time(1, 0)),
        (2, None, False, None, None, None, None, None, None, None)])
    assert db.column_types(table) == {
        "id": "bigint", "name": "text", "active": "boolean", "score": "double precision", "small": "smallint",
        "photo": "bytea", "balance": "numeric", "born": "date", "seen": "timestamp without time zone",
        "at": "time without time zone"}
    assert db.run("SELECT is_nullable FROM information_schema.columns WHERE table_name=%s AND column_name='id'",
                  (table,)) == [("NO",)]
    delete(worker, name)


def test_upsert_with_a_struct_key_leaves_one_row_per_key_after_a_replay(
        worker: WorkerProcess, shared_broker: BrokerProcess, db: Database) -> None:
    topic = unique("people")
    ck_produce(shared_broker.bootstrap, topic, [keyed(1, "a"), keyed(2, "b"), keyed(1, "a2"), keyed(3, "c"),
                                                keyed(2, "b2"), keyed(1, "a3")])
    name = unique("upsert")
    start(worker, name, sink_config(db, topic, **{"insert.mode": "upsert", "pk.mode": "record_key",
                                                  "auto.create": "true"}))
    expected = [(1, "a3"), (2, "b2"), (3, "c")]
    db.wait_rows(topic, expected)
    assert db.primary_key(topic) == ["id"]
    versions = db.run(f'SELECT id, xmin::text FROM "{topic}" ORDER BY id')
    replay_from_the_start(worker, name)
    ck_produce(shared_broker.bootstrap, topic, [keyed(4, "after the replay")])
    db.wait_rows(topic, [*expected, (4, "after the replay")])
    # The replayed records were written again (new row versions), and left the same rows.
    rewritten = db.run(f'SELECT id, xmin::text FROM "{topic}" WHERE id < 4 ORDER BY id')
    assert all(before != after for before, after in zip(versions, rewritten, strict=True)), (versions, rewritten)
    delete(worker, name)


def test_upsert_with_a_primitive_key_names_its_column_with_pk_fields(
        worker: WorkerProcess, shared_broker: BrokerProcess, db: Database) -> None:
    topic = unique("tags")
    schema = struct_schema(field("label", "string"))
    records = [{"key": key, "value": envelope(schema, {"label": label})}
               for key, label in [("k1", "one"), ("k2", "two"), ("k1", "uno")]]
    ck_produce(shared_broker.bootstrap, topic, records)
    name = unique("primitive")
    start(worker, name, sink_config(db, topic, **{
        "insert.mode": "upsert", "pk.mode": "record_key", "pk.fields": "tag_id", "auto.create": "true",
        "key.converter": STRING_CONVERTER}))
    db.wait_rows(topic, [("k1", "uno"), ("k2", "two")])
    assert db.primary_key(topic) == ["tag_id"]
    replay_from_the_start(worker, name)
    ck_produce(shared_broker.bootstrap, topic, [{"key": "k3", "value": envelope(schema, {"label": "three"})}])
    db.wait_rows(topic, [("k1", "uno"), ("k2", "two"), ("k3", "three")])
    delete(worker, name)


def test_upsert_where_every_column_is_a_key_does_nothing_on_conflict(
        worker: WorkerProcess, shared_broker: BrokerProcess, db: Database) -> None:
    topic = unique("pairs")
    schema = struct_schema(field("a", "int32"), field("b", "string"))
    pairs = [(1, "x"), (2, "y"), (1, "x"), (2, "z"), (2, "y")]
    ck_produce(shared_broker.bootstrap, topic, [{"value": envelope(schema, {"a": a, "b": b})} for a, b in pairs])
    name = unique("allkeys")
    start(worker, name, sink_config(db, topic, **{"insert.mode": "upsert", "pk.mode": "record_value",
                                                  "auto.create": "true", "key.converter": STRING_CONVERTER}))
    db.wait_rows(topic, [(1, "x"), (2, "y"), (2, "z")], order="a, b")
    assert db.primary_key(topic) == ["a", "b"]
    delete(worker, name)


def test_record_value_pk_mode_keys_rows_by_the_named_value_field(
        worker: WorkerProcess, shared_broker: BrokerProcess, db: Database) -> None:
    topic = unique("orders")
    schema = struct_schema(field("order_id", "string"), field("qty", "int32"))
    ck_produce(shared_broker.bootstrap, topic, [{"value": envelope(schema, {"order_id": o, "qty": q})}
                                                for o, q in [("o1", 1), ("o2", 5), ("o1", 3)]])
    name = unique("recval")
    start(worker, name, sink_config(db, topic, **{"insert.mode": "upsert", "pk.mode": "record_value",
                                                  "pk.fields": "order_id", "auto.create": "true",
                                                  "key.converter": STRING_CONVERTER}))
    db.wait_rows(topic, [("o1", 3), ("o2", 5)])
    assert db.primary_key(topic) == ["order_id"]
    delete(worker, name)


def test_update_mode_changes_existing_rows_only(worker: WorkerProcess, shared_broker: BrokerProcess,
                                                db: Database) -> None:
    topic = unique("accounts")
    db.run(f'CREATE TABLE "{topic}" (id INT PRIMARY KEY, name TEXT); INSERT INTO "{topic}" VALUES (1, \'old\'), '
           "(2, 'kept')")
    ck_produce(shared_broker.bootstrap, topic, [keyed(1, "new"), keyed(3, "absent"), keyed(1, "newer")])
    name = unique("update")
    start(worker, name, sink_config(db, topic, **{"insert.mode": "update", "pk.mode": "record_key"}))
    ck_produce(shared_broker.bootstrap, topic, [keyed(2, "last")])
    db.wait_rows(f'"{topic}"', [(1, "newer"), (2, "last")])
    delete(worker, name)


def test_tombstones_delete_rows_when_delete_is_enabled(worker: WorkerProcess, shared_broker: BrokerProcess,
                                                       db: Database) -> None:
    topic = unique("sessions")
    ck_produce(shared_broker.bootstrap, topic, [keyed(1, "a"), keyed(2, "b"), keyed(3, "c"), keyed(2, None),
                                                keyed(3, None), keyed(3, "c again")])
    name = unique("deletes")
    start(worker, name, sink_config(db, topic, **{"insert.mode": "upsert", "pk.mode": "record_key",
                                                  "delete.enabled": "true", "auto.create": "true"}))
    db.wait_rows(topic, [(1, "a"), (3, "c again")])
    ck_produce(shared_broker.bootstrap, topic, [keyed(1, None), keyed(4, "d")])
    db.wait_rows(topic, [(3, "c again"), (4, "d")])
    delete(worker, name)


def test_auto_evolve_adds_optional_columns_and_refuses_required_ones(
        worker: WorkerProcess, shared_broker: BrokerProcess, db: Database) -> None:
    topic = unique("evolving")
    name = unique("evolve")
    ck_produce(shared_broker.bootstrap, topic, [keyed(1, "v1")])
    start(worker, name, sink_config(db, topic, **{"insert.mode": "upsert", "pk.mode": "record_key",
                                                  "auto.create": "true", "auto.evolve": "true"}))
    db.wait_rows(topic, [(1, "v1")])
    wider = struct_schema(field("id", "int32"), field("name", "string", True), field("email", "string", True),
                          field("level", "int32", False, default=3))
    ck_produce(shared_broker.bootstrap, topic, [
        {"key": envelope(ID_KEY, {"id": 2}), "value": envelope(wider, {"id": 2, "name": "v2", "email": "e@x"})}])
    db.wait_rows(topic, [(1, "v1", None, 3), (2, "v2", "e@x", 3)])
    required = struct_schema(field("id", "int32"), field("name", "string", True), field("must", "string"))
    ck_produce(shared_broker.bootstrap, topic, [
        {"key": envelope(ID_KEY, {"id": 3}), "value": envelope(required, {"id": 3, "name": "v3", "must": "m"})}])
    trace = wait_task_failed(worker, name)
    assert "must" in trace and "not optional" in trace, trace
    delete(worker, name)


def test_kafka_pk_mode_keys_rows_by_topic_partition_and_offset(
        worker: WorkerProcess, shared_broker: BrokerProcess, db: Database) -> None:
    topic = unique("events")
    schema = struct_schema(field("what", "string"))
    ck_produce(shared_broker.bootstrap, topic, [{"value": envelope(schema, {"what": w})} for w in ("x", "y")])
    name = unique("kafkapk")
    start(worker, name, sink_config(db, topic, **{"pk.mode": "kafka", "auto.create": "true",
                                                  "key.converter": STRING_CONVERTER}))
    db.wait_rows(topic, [(topic, 0, 0, "x"), (topic, 0, 1, "y")], order="__connect_offset")
    assert db.primary_key(topic) == ["__connect_offset", "__connect_partition", "__connect_topic"]
    delete(worker, name)


@pytest.mark.parametrize(("changes", "field_at_fault"), [
    ({"delete.enabled": "true", "pk.mode": "record_value"}, "delete.enabled"),
    ({"connection.url": "jdbc:mysql://127.0.0.1:3306/shop"}, "connection.url"),
    ({"insert.mode": "upsert"}, "pk.mode"),
])
def test_a_bad_config_is_a_400_naming_the_field(worker: WorkerProcess, db: Database, changes: dict[str, str],
                                                field_at_fault: str) -> None:
    name = unique("bad")
    status, body = worker.request("PUT", f"/connectors/{name}/config", {**sink_config(db, "t"), **changes})
    assert status == 400, body
    assert body["error_code"] == 400 and f"{field_at_fault}:" in body["message"], body
    assert worker.request("GET", f"/connectors/{name}")[0] == 404


def test_schemaless_values_fail_the_task_with_a_clear_error(
        worker: WorkerProcess, shared_broker: BrokerProcess, db: Database) -> None:
    topic = unique("schemaless")
    ck_produce(shared_broker.bootstrap, topic, [{"value": b'{"id": 1}'}])
    name = unique("noschema")
    start(worker, name, sink_config(db, topic, **{"auto.create": "true", "key.converter": STRING_CONVERTER,
                                                  "value.converter.schemas.enable": "false"}))
    assert "needs records with a schema" in wait_task_failed(worker, name)
    delete(worker, name)


def test_a_row_the_table_refuses_fails_the_task_and_a_restart_after_the_fix_writes_it(
        worker: WorkerProcess, shared_broker: BrokerProcess, db: Database) -> None:
    topic = unique("ledger")
    db.run(f'CREATE TABLE "{topic}" (id INT PRIMARY KEY, name INT)')
    ck_produce(shared_broker.bootstrap, topic, [keyed(1, "not a number")])
    name = unique("mismatch")
    start(worker, name, sink_config(db, topic, **{"insert.mode": "upsert", "pk.mode": "record_key"}))
    trace = wait_task_failed(worker, name)
    assert "invalid input syntax for type integer" in trace, trace
    db.run(f'ALTER TABLE "{topic}" ALTER COLUMN name TYPE TEXT')
    assert worker.request("POST", f"/connectors/{name}/tasks/0/restart")[0] == 204
    db.wait_rows(f'"{topic}"', [(1, "not a number")])
    wait_for(lambda: task_status(worker, name).get("state") == "RUNNING", 30, "task running again")
    delete(worker, name)


def debezium_event(op: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> bytes:
    row = {"type": "struct", "name": "dbserver1.public.customers.Value", "optional": True,
           "fields": [field("id", "int32"), field("name", "string", True)]}
    schema = {"type": "struct", "name": "dbserver1.public.customers.Envelope", "optional": False, "fields": [
        {**row, "field": "before"}, {**row, "field": "after"},
        {"field": "source", "type": "struct", "name": "io.debezium.connector.postgresql.Source", "optional": False,
         "fields": [field("table", "string")]},
        field("op", "string"), field("ts_ms", "int64", True)]}
    return envelope(schema, {"before": before, "after": after, "source": {"table": "customers"}, "op": op,
                             "ts_ms": 1})


def test_debezium_change_events_through_extract_new_record_state(
        worker: WorkerProcess, shared_broker: BrokerProcess, db: Database) -> None:
    topic = unique("dbserver1.public.customers")

    def key(i: int) -> bytes:
        return envelope(ID_KEY, {"id": i})

    ck_produce(shared_broker.bootstrap, topic, [
        {"key": key(1), "value": debezium_event("c", None, {"id": 1, "name": "a"})},
        {"key": key(2), "value": debezium_event("c", None, {"id": 2, "name": "b"})},
        {"key": key(1), "value": debezium_event("u", {"id": 1, "name": "a"}, {"id": 1, "name": "a2"})},
        {"key": key(2), "value": debezium_event("d", {"id": 2, "name": "b"}, None)},
        {"key": key(2), "value": None},
    ])
    name = unique("debezium")
    start(worker, name, sink_config(db, topic, **{
        "insert.mode": "upsert", "pk.mode": "record_key", "delete.enabled": "true", "auto.create": "true",
        "table.name.format": "customers",
        "transforms": "unwrap", "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
        "transforms.unwrap.drop.tombstones": "false", "transforms.unwrap.add.fields": "op"}))
    db.wait_rows("customers", [(1, "a2", "u")])
    assert db.column_types("customers") == {"id": "integer", "name": "text", "__op": "text"}
    delete(worker, name)


def terminate_sink_connections(db: Database) -> int:
    """Kill the database sessions of the sink (every other session on the test's database)."""
    rows = db.run("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
                  "AND pid <> pg_backend_pid()")
    return len(rows)


def test_a_lost_connection_is_retried_on_a_new_one(worker: WorkerProcess, shared_broker: BrokerProcess,
                                                   db: Database) -> None:
    topic = unique("resilient")
    ck_produce(shared_broker.bootstrap, topic, [keyed(1, "a")])
    name = unique("retry")
    start(worker, name, sink_config(db, topic, **{"insert.mode": "upsert", "pk.mode": "record_key",
                                                  "auto.create": "true", "retry.backoff.ms": "100"}))
    db.wait_rows(topic, [(1, "a")])
    assert terminate_sink_connections(db) == 1
    ck_produce(shared_broker.bootstrap, topic, [keyed(2, "b"), keyed(1, "a2")])
    db.wait_rows(topic, [(1, "a2"), (2, "b")])
    assert task_status(worker, name)["state"] == "RUNNING"
    assert "retries left" in worker.log_tail(400)
    delete(worker, name)


def test_with_max_retries_zero_a_lost_connection_fails_the_task(
        worker: WorkerProcess, shared_broker: BrokerProcess, db: Database) -> None:
    topic = unique("fragile")
    ck_produce(shared_broker.bootstrap, topic, [keyed(1, "a")])
    name = unique("noretry")
    start(worker, name, sink_config(db, topic, **{"insert.mode": "upsert", "pk.mode": "record_key",
                                                  "auto.create": "true", "max.retries": "0"}))
    db.wait_rows(topic, [(1, "a")])
    assert terminate_sink_connections(db) == 1
    ck_produce(shared_broker.bootstrap, topic, [keyed(2, "b")])
    assert "Exceeded max.retries (0)" in wait_task_failed(worker, name)
    assert worker.request("POST", f"/connectors/{name}/tasks/0/restart")[0] == 204
    db.wait_rows(topic, [(1, "a"), (2, "b")])
    delete(worker, name)


def test_unquoted_identifiers_fold_to_lower_case_and_still_evolve(
        worker: WorkerProcess, shared_broker: BrokerProcess, db: Database) -> None:
    topic = unique("Mixed")
    first = struct_schema(field("Id", "int32"), field("Name", "string", True))
    second = struct_schema(field("Id", "int32"), field("Name", "string", True), field("Email", "string", True))
    ck_produce(shared_broker.bootstrap, topic, [{"value": envelope(first, {"Id": 1, "Name": "a"})}])
    name = unique("unquoted")
    start(worker, name, sink_config(db, topic, **{
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "Id", "auto.create": "true",
        "auto.evolve": "true", "quote.sql.identifiers": "never", "key.converter": STRING_CONVERTER}))
    db.wait_rows(topic.lower(), [(1, "a")])
    ck_produce(shared_broker.bootstrap, topic, [{"value": envelope(second, {"Id": 2, "Name": "b", "Email": "e"})},
                                                {"value": envelope(first, {"Id": 1, "Name": "a2"})}])
    db.wait_rows(topic.lower(), [(1, "a2", None), (2, "b", "e")])
    assert db.column_types(topic.lower()) == {"id": "integer", "name": "text", "email": "text"}
    delete(worker, name)


def test_avro_records_from_the_schema_registry(worker: WorkerProcess, shared_broker: BrokerProcess,
                                               db: Database) -> None:
    topic = unique("readings")
    avro_schema = json.dumps({"type": "record", "name": "Reading", "namespace": "iot", "fields": [
        {"name": "sensor", "type": "string"}, {"name": "value", "type": ["null", "double"], "default": None},
        {"name": "total", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}]})
    serialize = AvroSerializer(SchemaRegistryClient({"url": shared_broker.registry_url}), avro_schema)
    at = datetime.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.UTC)
    context = SerializationContext(topic, MessageField.VALUE)
    ck_produce(shared_broker.bootstrap, topic, [
        {"key": sensor, "value": serialize({"sensor": sensor, "value": value, "total": decimal.Decimal(total),
                                            "at": at}, context)}
        for sensor, value, total in [("t1", None, "12.34"), ("t2", 2.5, "0.01"), ("t1", 1.5, "99.99")]])
    name = unique("avro")
    start(worker, name, sink_config(db, topic, **{
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "sensor", "auto.create": "true",
        "key.converter": STRING_CONVERTER, "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url": shared_broker.registry_url}))
    naive = at.replace(tzinfo=None)
    db.wait_rows(topic, [("t1", 1.5, decimal.Decimal("99.99"), naive), ("t2", 2.5, decimal.Decimal("0.01"), naive)])
    assert db.column_types(topic) == {"sensor": "text", "value": "double precision", "total": "numeric",
                                      "at": "timestamp without time zone"}
    delete(worker, name)
