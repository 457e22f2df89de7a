"""The PostgreSQL change data capture source (Debezium's PostgresConnector) in a real `moldau connect` worker,
against the shared PostgreSQL server and broker: snapshot then stream, Debezium's envelope, transactions,
schema changes, tables without a primary key, TOASTed values, table, schema and column filters, message key
columns, transaction metadata, bad configs, crash recovery without loss, and heartbeats that let an idle slot
advance."""

from __future__ import annotations

import json
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg2
import pytest
from confluent_kafka import Consumer

from tests.support.broker_process import BrokerProcess
from tests.support.connect_worker import WorkerProcess, running_worker, wait_for
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.slow

JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
WORKER_PROPERTIES = {"key.converter": JSON_CONVERTER, "value.converter": JSON_CONVERTER,
                     "key.converter.schemas.enable": "true", "value.converter.schemas.enable": "true"}

Messages = list[dict[str, Any]]


@pytest.fixture(scope="module")
def worker(shared_broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    with running_worker(tmp_path_factory.mktemp("cdc-worker"), shared_broker.bootstrap, WORKER_PROPERTIES) as proc:
        yield proc


class Database:
    """A fresh database on the shared server, with autocommit SQL and the names one connector uses."""

    def __init__(self, postgres: PostgresServer) -> None:
        self.tag = uuid.uuid4().hex[:10]
        self.name = f"cdc_{self.tag}"
        self.url = postgres.create_database(self.name)
        self.port = postgres.port
        self.prefix = f"srv{self.tag}"
        self.slot = f"slot_{self.tag}"
        self.conn = psycopg2.connect(self.url)
        self.conn.autocommit = True

    def sql(self, statement: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self.conn.cursor() as cur:
            cur.execute(statement, args)
            return cur.fetchall() if cur.description else []

    def connector_config(self, **extra: str) -> dict[str, str]:
        return {"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "tasks.max": "1",
                "database.hostname": "127.0.0.1", "database.port": str(self.port), "database.user": "postgres",
                "database.dbname": self.name, "topic.prefix": self.prefix, "plugin.name": "pgoutput",
                "slot.name": self.slot, "publication.name": f"pub_{self.tag}", **extra}

    def slot_state(self) -> tuple[str | None, bool]:
        rows = self.sql("SELECT confirmed_flush_lsn::text, active FROM pg_replication_slots WHERE slot_name = %s",
                        (self.slot,))
        return (rows[0][0], rows[0][1]) if rows else (None, False)

    def close(self) -> None:
        wait_for(lambda: not self.slot_state()[1], 30, "the slot to be released")
        self.sql("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = %s",
                 (self.slot,))
        self.conn.close()


@pytest.fixture
def db(postgres: PostgresServer) -> Iterator[Database]:
    database = Database(postgres)
    yield database
    database.close()


def lsn_value(text: str) -> int:
    high, low = text.split("/")
    return (int(high, 16) << 32) | int(low, 16)


class TopicReader:
    """Reads every topic whose name starts with `prefix` from the beginning, decoding JSON keys and values.

    A topic created later makes the group rebalance, and with no committed offsets the consumer reads the
    others from the beginning again: a record already read (the same topic, partition and offset) is skipped,
    so only copies the connector wrote count twice."""

    def __init__(self, bootstrap: str, prefix: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"cdc-test-{uuid.uuid4().hex}",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  "topic.metadata.refresh.interval.ms": 500})
        self.consumer.subscribe([f"^{prefix.replace('.', '[.]')}.*"])
        self.messages: Messages = []
        self._seen: set[tuple[str | None, int | None, int | None]] = set()

    def read_until(self, done: Callable[[Messages], Any], timeout_s: float = 60.0,
                   what: str = "records") -> Messages:
        def check() -> bool:
            for message in self.consumer.consume(500, 0.2):
                position = (message.topic(), message.partition(), message.offset())
                if message.error() or position in self._seen:
                    continue
                self._seen.add(position)
                key, value = message.key(), message.value()
                self.messages.append({"topic": message.topic(), "key": json.loads(key) if key else None,
                                      "value": json.loads(value) if value else None})
            return bool(done(self.messages))
        wait_for(check, timeout_s, what)
        return self.messages

    def close(self) -> None:
        self.consumer.close()


def payloads(messages: Messages, topic: str) -> list[dict[str, Any] | None]:
    return [m["value"]["payload"] if m["value"] else None for m in messages if m["topic"] == topic]


def changes(messages: Messages, topic: str) -> list[dict[str, Any]]:
    return [p for p in payloads(messages, topic) if p is not None]


def start_connector(worker: WorkerProcess, name: str, config: dict[str, str]) -> None:
    status, body = worker.request("POST", "/connectors", {"name": name, "config": config})
    assert status == 201, body

    def running() -> bool:
        code, state = worker.request("GET", f"/connectors/{name}/status")
        if code == 200 and state["tasks"] and state["tasks"][0]["state"] == "FAILED":
            raise AssertionError(state["tasks"][0].get("trace"))
        return code == 200 and bool(state["tasks"]) and state["tasks"][0]["state"] == "RUNNING"
    wait_for(running, 30, f"connector {name} to run")


def delete_connector(worker: WorkerProcess, name: str) -> None:
    assert worker.request("DELETE", f"/connectors/{name}")[0] == 204


def test_snapshot_then_inserts_updates_deletes(worker: WorkerProcess, db: Database,
                                               shared_broker: BrokerProcess) -> None:
    db.sql("CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, balance numeric(10,2), "
           "born date, seen timestamptz, doc jsonb, ref uuid)")
    db.sql("INSERT INTO customers VALUES (1, 'ann', 10.50, '1990-01-02', '2024-05-06 07:08:09.123456+00', "
           "'{\"a\": 1}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'), (2, 'bob', NULL, NULL, NULL, NULL, NULL)")
    topic = f"{db.prefix}.public.customers"
    reader = TopicReader(shared_broker.bootstrap, db.prefix)
    start_connector(worker, f"cdc-{db.tag}", db.connector_config())
    try:
        snapshot = reader.read_until(lambda m: len(changes(m, topic)) >= 2)
        reads = changes(snapshot, topic)
        assert [r["op"] for r in reads] == ["r", "r"]
        assert [r["source"]["snapshot"] for r in reads] == ["true", "last"]
        first = reads[0]
        assert first["before"] is None
        assert first["after"] == {"id": 1, "name": "ann", "balance": "BBo=", "born": 7306,
                                  "seen": "2024-05-06T07:08:09.123456Z", "doc": '{"a": 1}',
                                  "ref": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"}
        message = next(m for m in snapshot if m["topic"] == topic)
        assert message["key"] == {"schema": {"type": "struct", "optional": False, "name": f"{topic}.Key",
                                             "fields": [{"type": "int32", "optional": False, "field": "id"}]},
                                  "payload": {"id": 1}}
        value_schema = message["value"]["schema"]
        assert value_schema["name"] == f"{topic}.Envelope"
        assert [f["field"] for f in value_schema["fields"]] == ["before", "after", "source", "op", "ts_ms",
                                                                "transaction"]
        fields = {f["field"]: f for f in value_schema["fields"][1]["fields"]}
        assert value_schema["fields"][1]["name"] == f"{topic}.Value"
        assert fields["balance"]["name"] == "org.apache.kafka.connect.data.Decimal"
        assert fields["born"]["name"] == "io.debezium.time.Date"
        assert fields["seen"]["name"] == "io.debezium.time.ZonedTimestamp"
        assert fields["doc"]["name"] == "io.debezium.data.Json"
        assert fields["ref"]["name"] == "io.debezium.data.Uuid"
        assert value_schema["fields"][2]["name"] == "io.debezium.connector.postgresql.Source"

        db.sql("INSERT INTO customers (id, name) VALUES (3, 'cy')")
        db.sql("UPDATE customers SET name = 'bobby' WHERE id = 2")
        db.sql("DELETE FROM customers WHERE id = 1")
        streamed = reader.read_until(lambda m: len(payloads(m, topic)) >= 6)
        create, update, delete, tombstone = payloads(streamed, topic)[2:6]
        assert create is not None and update is not None and delete is not None
        assert create["op"] == "c" and create["before"] is None and create["after"]["name"] == "cy"
        assert update["op"] == "u" and update["before"] is None and update["after"]["name"] == "bobby"
        assert delete["op"] == "d" and delete["after"] is None and delete["before"]["id"] == 1
        assert tombstone is None
        keys = [m["key"]["payload"] for m in streamed if m["topic"] == topic][2:6]
        assert keys == [{"id": 3}, {"id": 2}, {"id": 1}, {"id": 1}]
        for change in (create, update, delete):
            source = change["source"]
            assert source["connector"] == "postgresql" and source["name"] == db.prefix
            assert source["db"] == db.name and source["schema"] == "public" and source["table"] == "customers"
            assert source["snapshot"] == "false" and isinstance(source["txId"], int)
            assert isinstance(source["lsn"], int) and isinstance(change["ts_ms"], int)
        assert len({c["source"]["txId"] for c in (create, update, delete)}) == 3
        assert create["source"]["lsn"] < update["source"]["lsn"] < delete["source"]["lsn"]

        def stored() -> Any:
            return worker.request("GET", f"/connectors/cdc-{db.tag}/offsets")[1]["offsets"]
        offsets = wait_for(lambda: (o := stored()) and "lsn_commit" in o[0]["offset"] and o, 30, "offsets")
        assert offsets[0]["partition"] == {"server": db.prefix}
        assert offsets[0]["offset"]["lsn"] == delete["source"]["lsn"]
        assert offsets[0]["offset"]["txId"] == delete["source"]["txId"]
    finally:
        reader.close()
        delete_connector(worker, f"cdc-{db.tag}")


def test_transaction_schema_change_no_key_and_truncate(worker: WorkerProcess, db: Database,
                                                       shared_broker: BrokerProcess) -> None:
    db.sql("CREATE TABLE orders (id int PRIMARY KEY, total int)")
    db.sql("CREATE TABLE lines (order_id int, item text)")  # no primary key
    reader = TopicReader(shared_broker.bootstrap, db.prefix)
    start_connector(worker, f"cdc-{db.tag}", db.connector_config(**{"snapshot.mode": "never",
                                                                     "skipped.operations": "none"}))
    orders, lines = f"{db.prefix}.public.orders", f"{db.prefix}.public.lines"
    try:
        with db.conn.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute("INSERT INTO orders VALUES (1, 5)")
            cur.execute("INSERT INTO lines VALUES (1, 'pen'), (1, 'ink')")
            cur.execute("COMMIT")
        got = reader.read_until(lambda m: len(changes(m, orders)) >= 1 and len(changes(m, lines)) >= 2)
        tx_ids = {c["source"]["txId"] for c in changes(got, orders) + changes(got, lines)}
        assert len(tx_ids) == 1
        assert [m["key"] for m in got if m["topic"] == lines] == [None, None]

        db.sql("ALTER TABLE orders ADD COLUMN note text")
        db.sql("INSERT INTO orders VALUES (2, 7, 'rush')")
        got = reader.read_until(lambda m: len(changes(m, orders)) >= 2)
        assert changes(got, orders)[1]["after"] == {"id": 2, "total": 7, "note": "rush"}
        schema = next(m for m in reversed(got) if m["topic"] == orders)["value"]["schema"]
        assert "note" in [f["field"] for f in schema["fields"][1]["fields"]]

        # Without a key PostgreSQL refuses updates and deletes unless the identity is FULL.
        db.sql("ALTER TABLE lines REPLICA IDENTITY FULL")
        db.sql("UPDATE lines SET item = 'ink2' WHERE item = 'ink'")
        db.sql("DELETE FROM lines WHERE item = 'ink2'")
        db.sql("TRUNCATE lines")
        got = reader.read_until(lambda m: len(payloads(m, lines)) >= 6)
        full_update, full_delete, tombstone, truncate = payloads(got, lines)[2:6]
        assert full_update is not None and full_delete is not None
        assert full_update["before"] == {"order_id": 1, "item": "ink"}
        assert full_update["after"] == {"order_id": 1, "item": "ink2"}
        assert full_delete["op"] == "d" and full_delete["before"] == {"order_id": 1, "item": "ink2"}
        assert tombstone is None
        assert truncate is not None and truncate["op"] == "t" and truncate["before"] is None
        assert truncate["after"] is None
    finally:
        reader.close()
        delete_connector(worker, f"cdc-{db.tag}")


def test_toasted_values_and_include_list(worker: WorkerProcess, db: Database,
                                         shared_broker: BrokerProcess) -> None:
    db.sql("CREATE TABLE docs (id int PRIMARY KEY, title text, body text)")
    db.sql("CREATE TABLE docs_full (id int PRIMARY KEY, title text, body text)")
    db.sql("ALTER TABLE docs_full REPLICA IDENTITY FULL")
    db.sql("CREATE TABLE ignored (id int PRIMARY KEY)")
    # Random text does not compress, so it is stored out of line (TOASTed).
    big = "".join(uuid.uuid4().hex for _ in range(2000))
    for table in ("docs", "docs_full"):
        db.sql(f"INSERT INTO {table} VALUES (1, 'v1', %s)", (big,))
    reader = TopicReader(shared_broker.bootstrap, db.prefix)
    start_connector(worker, f"cdc-{db.tag}", db.connector_config(**{"table.include.list": r"public\.docs.*"}))
    docs, docs_full = f"{db.prefix}.public.docs", f"{db.prefix}.public.docs_full"
    try:
        reader.read_until(lambda m: changes(m, docs) and changes(m, docs_full))
        db.sql("INSERT INTO ignored VALUES (1)")
        for table in ("docs", "docs_full"):
            db.sql(f"UPDATE {table} SET title = 'v2' WHERE id = 1")
        got = reader.read_until(lambda m: len(changes(m, docs)) >= 2 and len(changes(m, docs_full)) >= 2)
        assert changes(got, docs)[0]["after"]["body"] == big
        plain = changes(got, docs)[1]
        assert plain["op"] == "u" and plain["after"]["title"] == "v2"
        assert plain["after"]["body"] == "__debezium_unavailable_value"
        full = changes(got, docs_full)[1]
        assert full["after"] == {"id": 1, "title": "v2", "body": big}
        assert full["before"] == {"id": 1, "title": "v1", "body": big}
        assert not any(m["topic"].endswith(".ignored") for m in got)
    finally:
        reader.close()
        delete_connector(worker, f"cdc-{db.tag}")


def test_schema_and_column_lists_and_message_key_columns(worker: WorkerProcess, db: Database,
                                                         shared_broker: BrokerProcess) -> None:
    db.sql("CREATE SCHEMA inventory")
    db.sql("CREATE SCHEMA archive")
    db.sql("CREATE TABLE inventory.users (id int PRIMARY KEY, email text, ssn text, tenant int NOT NULL)")
    db.sql("ALTER TABLE inventory.users REPLICA IDENTITY FULL")
    db.sql("CREATE TABLE inventory.events (id int PRIMARY KEY, tenant int NOT NULL, kind text)")
    db.sql("CREATE TABLE archive.users (id int PRIMARY KEY)")
    db.sql("INSERT INTO inventory.users VALUES (1, 'a@example.com', '078-05-1120', 7)")
    # A user that may not read the column left out: the snapshot must not select it.
    user = f"cdc_{db.tag}"
    db.sql(f"CREATE ROLE {user} LOGIN REPLICATION")
    db.sql(f"GRANT USAGE ON SCHEMA inventory TO {user}")
    db.sql(f"GRANT SELECT (id, email, tenant) ON inventory.users TO {user}")
    db.sql(f"GRANT SELECT ON inventory.events TO {user}")
    db.sql(f"CREATE PUBLICATION pub_{db.tag} FOR ALL TABLES")  # creating it needs a superuser
    reader = TopicReader(shared_broker.bootstrap, db.prefix)
    name = f"cdc-{db.tag}"
    start_connector(worker, name, db.connector_config(**{
        "database.user": user, "publication.autocreate.mode": "disabled",
        "schema.include.list": "INVENTORY",  # Debezium's lists ignore case
        "column.exclude.list": r"inventory\.users\.ssn",
        "message.key.columns": r"inventory\.events:tenant,kind"}))
    users, events = f"{db.prefix}.inventory.users", f"{db.prefix}.inventory.events"
    try:
        reader.read_until(lambda m: changes(m, users), what="the snapshot")
        db.sql("INSERT INTO archive.users VALUES (1)")
        db.sql("INSERT INTO inventory.events VALUES (1, 7, 'login')")
        db.sql("UPDATE inventory.users SET email = 'b@example.com' WHERE id = 1")
        db.sql("DELETE FROM inventory.users WHERE id = 1")
        got = reader.read_until(lambda m: len(changes(m, users)) >= 3 and changes(m, events))
        first, second = {"id": 1, "email": "a@example.com", "tenant": 7}, {"id": 1, "email": "b@example.com",
                                                                            "tenant": 7}
        assert [(c["op"], c["before"], c["after"]) for c in changes(got, users)] == [
            ("r", None, first), ("u", first, second), ("d", second, None)]
        user_messages = [m for m in got if m["topic"] == users]
        assert {json.dumps(m["key"]["payload"]) for m in user_messages} == {'{"id": 1}'}  # the key keeps its column
        after = next(f for f in user_messages[0]["value"]["schema"]["fields"] if f["field"] == "after")
        assert [f["field"] for f in after["fields"]] == ["id", "email", "tenant"]
        [event] = [m for m in got if m["topic"] == events]
        assert event["key"]["payload"] == {"tenant": 7, "kind": "login"}
        assert event["value"]["payload"]["after"] == {"id": 1, "tenant": 7, "kind": "login"}
        assert not any(".archive." in m["topic"] for m in got)
    finally:
        reader.close()
        delete_connector(worker, name)
        db.sql(f"DROP OWNED BY {user}")
        db.sql(f"DROP ROLE {user}")


def test_transaction_metadata(worker: WorkerProcess, db: Database, shared_broker: BrokerProcess) -> None:
    db.sql("CREATE TABLE a (id int PRIMARY KEY)")
    db.sql("CREATE TABLE b (id int PRIMARY KEY)")
    reader = TopicReader(shared_broker.bootstrap, db.prefix)
    name = f"cdc-{db.tag}"
    start_connector(worker, name, db.connector_config(**{"provide.transaction.metadata": "true",
                                                         "snapshot.mode": "never"}))
    transactions, a, b = f"{db.prefix}.transaction", f"{db.prefix}.public.a", f"{db.prefix}.public.b"
    try:
        with db.conn.cursor() as cur:  # one transaction over two tables, then one delete
            cur.execute("BEGIN; INSERT INTO a VALUES (1), (2); INSERT INTO b VALUES (1); COMMIT")
        db.sql("DELETE FROM a WHERE id = 1")
        got = reader.read_until(lambda m: len(payloads(m, transactions)) >= 4 and len(changes(m, a)) >= 3)
        boundaries = payloads(got, transactions)
        assert [(t["status"], t["event_count"]) for t in boundaries if t] == [("BEGIN", None), ("END", 3),
                                                                               ("BEGIN", None), ("END", 1)]
        first, second = boundaries[1], boundaries[3]
        assert first and second and first["id"] != second["id"]
        assert first["data_collections"] == [{"data_collection": "public.a", "event_count": 2},
                                             {"data_collection": "public.b", "event_count": 1}]
        insert_a1, insert_a2, delete = changes(got, a)
        [insert_b] = changes(got, b)
        assert str(insert_a1["source"]["txId"]) == first["id"] and str(delete["source"]["txId"]) == second["id"]
        assert [c["transaction"] for c in (insert_a1, insert_a2, insert_b, delete)] == [
            {"id": first["id"], "total_order": 1, "data_collection_order": 1},
            {"id": first["id"], "total_order": 2, "data_collection_order": 2},
            {"id": first["id"], "total_order": 3, "data_collection_order": 1},
            {"id": second["id"], "total_order": 1, "data_collection_order": 1}]
        key = next(m["key"] for m in got if m["topic"] == transactions)
        assert key["schema"]["name"] == "io.debezium.connector.common.TransactionMetadataKey"
    finally:
        reader.close()
        delete_connector(worker, name)


def test_rows_written_during_the_snapshot_arrive_exactly_once(worker: WorkerProcess, db: Database,
                                                               shared_broker: BrokerProcess) -> None:
    """The slot's exported snapshot splits the rows exactly: each is either read (op r) or streamed (op c)."""
    db.sql("CREATE TABLE ticks (id int PRIMARY KEY)")
    db.sql("INSERT INTO ticks SELECT generate_series(1, 2000)")
    total = 4000
    writer_conn = psycopg2.connect(db.url)
    writer_conn.autocommit = True

    def write() -> None:
        with writer_conn.cursor() as cur:
            for row_id in range(2001, total + 1):
                cur.execute("INSERT INTO ticks VALUES (%s)", (row_id,))

    topic = f"{db.prefix}.public.ticks"
    reader = TopicReader(shared_broker.bootstrap, db.prefix)
    writer = threading.Thread(target=write)
    writer.start()
    try:
        start_connector(worker, f"cdc-{db.tag}", db.connector_config(**{"max.batch.size": "100"}))
        writer.join()
        got = reader.read_until(lambda m: len(changes(m, topic)) >= total, 120, "every row")
        counts = Counter(c["after"]["id"] for c in changes(got, topic))
        assert set(counts) == set(range(1, total + 1)) and set(counts.values()) == {1}
        ops = Counter(c["op"] for c in changes(got, topic))
        assert ops["r"] >= 2000 and ops["r"] + ops["c"] == total
        assert [c["source"]["snapshot"] for c in changes(got, topic) if c["op"] == "r"][-1] == "last"
    finally:
        writer.join()
        writer_conn.close()
        reader.close()
        delete_connector(worker, f"cdc-{db.tag}")


def test_a_table_dropped_before_its_changes_are_read(worker: WorkerProcess, db: Database,
                                                      shared_broker: BrokerProcess) -> None:
    """Changes of a table dropped while the connector was away still come out (from the Relation message)."""
    db.sql("CREATE TABLE keep (id int PRIMARY KEY)")
    reader = TopicReader(shared_broker.bootstrap, db.prefix)
    config = db.connector_config(**{"snapshot.mode": "never"})
    start_connector(worker, f"cdc-{db.tag}", config)
    try:
        wait_for(lambda: db.slot_state()[0], 30, "the slot")
        delete_connector(worker, f"cdc-{db.tag}")
        wait_for(lambda: not db.slot_state()[1], 30, "the slot to be released")
        db.sql("CREATE TABLE gone (id int PRIMARY KEY, v text)")
        db.sql("INSERT INTO gone VALUES (1, 'a')")
        db.sql("DROP TABLE gone")
        db.sql("INSERT INTO keep VALUES (1)")
        start_connector(worker, f"cdc-{db.tag}", config)
        # Two topics: the consumer may see either first.
        got = reader.read_until(lambda m: changes(m, f"{db.prefix}.public.keep") and
                                changes(m, f"{db.prefix}.public.gone"))
        [gone] = changes(got, f"{db.prefix}.public.gone")
        assert gone["after"] == {"id": 1, "v": "a"} and gone["op"] == "c"
    finally:
        reader.close()
        delete_connector(worker, f"cdc-{db.tag}")


def test_a_paused_task_whose_replication_connection_timed_out_carries_on(worker: WorkerProcess, db: Database,
                                                                         shared_broker: BrokerProcess) -> None:
    """A paused task does not poll, so it answers no keepalives and the server drops its replication connection
    after `wal_sender_timeout`; on resume the task reconnects and goes on, without repeating or losing rows."""
    db.sql(f"ALTER DATABASE {db.name} SET wal_sender_timeout = '1s'")
    db.sql("CREATE TABLE ticks (id int PRIMARY KEY)")
    name = f"cdc-{db.tag}"
    topic = f"{db.prefix}.public.ticks"
    reader = TopicReader(shared_broker.bootstrap, db.prefix)
    start_connector(worker, name, db.connector_config(**{"snapshot.mode": "never"}))
    try:
        db.sql("INSERT INTO ticks VALUES (1)")
        reader.read_until(lambda m: len(changes(m, topic)) >= 1)
        assert worker.request("PUT", f"/connectors/{name}/pause")[0] == 202
        wait_for(lambda: not db.slot_state()[1], 30, "the server to drop the idle replication connection")
        db.sql("INSERT INTO ticks VALUES (2)")
        assert worker.request("PUT", f"/connectors/{name}/resume")[0] == 202
        got = reader.read_until(lambda m: len(changes(m, topic)) >= 2)
        db.sql("INSERT INTO ticks VALUES (3)")
        got = reader.read_until(lambda m: len(changes(m, topic)) >= 3)
        assert [c["after"]["id"] for c in changes(got, topic)] == [1, 2, 3]
        status = worker.request("GET", f"/connectors/{name}/status")[1]
        assert status["tasks"][0]["state"] == "RUNNING"
    finally:
        reader.close()
        delete_connector(worker, name)


def test_a_graceful_restart_resumes_without_snapshot_or_duplicates(worker: WorkerProcess, db: Database,
                                                                    shared_broker: BrokerProcess) -> None:
    """Recreated under the same name, the connector resumes from its stored offset: `initial` does not snapshot
    again and nothing is repeated; `always` snapshots again at its next start."""
    db.sql("CREATE TABLE ticks (id int PRIMARY KEY)")
    db.sql("INSERT INTO ticks VALUES (1), (2)")
    name, topic = f"cdc-{db.tag}", f"{db.prefix}.public.ticks"
    reader = TopicReader(shared_broker.bootstrap, db.prefix)
    try:
        start_connector(worker, name, db.connector_config())
        db.sql("INSERT INTO ticks VALUES (3)")
        reader.read_until(lambda m: len(changes(m, topic)) >= 3)
        delete_connector(worker, name)
        wait_for(lambda: not db.slot_state()[1], 30, "the slot to be released")
        db.sql("INSERT INTO ticks VALUES (4)")
        start_connector(worker, name, db.connector_config())
        db.sql("INSERT INTO ticks VALUES (5)")
        got = reader.read_until(lambda m: len(changes(m, topic)) >= 5)
        assert [(c["op"], c["after"]["id"]) for c in changes(got, topic)] == [
            ("r", 1), ("r", 2), ("c", 3), ("c", 4), ("c", 5)]
        delete_connector(worker, name)
        wait_for(lambda: not db.slot_state()[1], 30, "the slot to be released")
        start_connector(worker, name, db.connector_config(**{"snapshot.mode": "always"}))
        got = reader.read_until(lambda m: len(changes(m, topic)) >= 10)
        assert [(c["op"], c["after"]["id"]) for c in changes(got, topic)][5:] == [
            ("r", 1), ("r", 2), ("r", 3), ("r", 4), ("r", 5)]
    finally:
        reader.close()
        delete_connector(worker, name)


def test_publication_autocreate_modes(worker: WorkerProcess, db: Database, shared_broker: BrokerProcess) -> None:
    db.sql("CREATE TABLE wanted (id int PRIMARY KEY)")
    db.sql("CREATE TABLE other (id int PRIMARY KEY)")
    name = f"cdc-{db.tag}"
    disabled = db.connector_config(**{"publication.autocreate.mode": "disabled"})
    assert worker.request("POST", "/connectors", {"name": name, "config": disabled})[0] == 201
    status = wait_for(lambda: (s := worker.request("GET", f"/connectors/{name}/status")[1])["tasks"] and
                      s["tasks"][0]["state"] == "FAILED" and s, 30, "the task to fail")
    assert f"publication 'pub_{db.tag}' does not exist" in status["tasks"][0]["trace"]
    delete_connector(worker, name)

    reader = TopicReader(shared_broker.bootstrap, db.prefix)
    try:
        start_connector(worker, name, db.connector_config(**{"publication.autocreate.mode": "filtered",
                                                              "table.include.list": r"public\.wanted"}))
        published = db.sql("SELECT tablename FROM pg_publication_tables WHERE pubname = %s", (f"pub_{db.tag}",))
        assert published == [("wanted",)]
        db.sql("INSERT INTO other VALUES (1)")
        db.sql("INSERT INTO wanted VALUES (1)")
        got = reader.read_until(lambda m: changes(m, f"{db.prefix}.public.wanted"))
        assert {m["topic"] for m in got} == {f"{db.prefix}.public.wanted"}
    finally:
        reader.close()
        delete_connector(worker, name)


@pytest.mark.parametrize(("override", "field"), [
    ({"topic.prefix": ""}, "topic.prefix"),
    ({"plugin.name": "decoderbufs"}, "plugin.name"),
    ({"table.include.list": "public.a", "table.exclude.list": "public.b"}, "table.exclude.list"),
    ({"schema.include.list": "a", "schema.exclude.list": "b"}, "schema.exclude.list"),
    ({"column.include.list": "public.a.x", "column.exclude.list": "public.a.y"}, "column.exclude.list"),
    ({"message.key.columns": "public.a"}, "message.key.columns"),
    ({"tasks.max": "2"}, "tasks.max"),
    ({"snapshot.mode": "sometimes"}, "snapshot.mode"),
    ({"database.port": "no"}, "database.port"),
])
def test_bad_config_is_a_400_naming_the_field(worker: WorkerProcess, override: dict[str, str], field: str) -> None:
    config = {"connector.class": "PostgresCdcSource", "database.hostname": "127.0.0.1",
              "database.user": "postgres", "database.dbname": "x", "topic.prefix": "p", **override}
    status, body = worker.request("POST", "/connectors", {"name": f"bad-{uuid.uuid4().hex[:6]}", "config": config})
    assert status == 400 and body["error_code"] == 400 and field in body["message"], body
    status, infos = worker.request("PUT", "/connector-plugins/PostgresCdcSource/config/validate", config)
    assert status == 200 and infos["error_count"] >= 1
    failing = [c["value"]["name"] for c in infos["configs"] if c["value"]["errors"]]
    assert field in failing


def test_heartbeats_advance_the_slot_when_no_captured_table_changes(worker: WorkerProcess, db: Database,
                                                                    shared_broker: BrokerProcess) -> None:
    db.sql("CREATE TABLE captured (id int PRIMARY KEY)")
    db.sql("CREATE TABLE noisy (id serial PRIMARY KEY, pad text)")
    reader = TopicReader(shared_broker.bootstrap, "__debezium-heartbeat." + db.prefix)
    start_connector(worker, f"cdc-{db.tag}", db.connector_config(
        **{"table.exclude.list": r"public\.noisy", "heartbeat.interval.ms": "200"}))
    try:
        start = lsn_value(wait_for(lambda: db.slot_state()[0], 30, "the slot"))
        for _ in range(20):
            db.sql("INSERT INTO noisy (pad) SELECT repeat('x', 100) FROM generate_series(1, 200)")
        written = lsn_value(db.sql("SELECT pg_current_wal_lsn()::text")[0][0])
        assert written > start
        wait_for(lambda: lsn_value(db.slot_state()[0] or "0/0") >= written, 60,
                 "confirmed_flush_lsn to pass the excluded table's changes")
        beats = reader.read_until(lambda m: len(m) >= 2)
        assert beats[0]["topic"] == f"__debezium-heartbeat.{db.prefix}"
        assert beats[0]["key"]["payload"] == {"serverName": db.prefix}
        assert isinstance(beats[0]["value"]["payload"]["ts_ms"], int)
    finally:
        reader.close()
        delete_connector(worker, f"cdc-{db.tag}")


def test_worker_killed_mid_stream_loses_nothing(shared_broker: BrokerProcess, db: Database,
                                                tmp_path: Path) -> None:
    db.sql("CREATE TABLE events (id int PRIMARY KEY, body text)")
    db.sql("INSERT INTO events SELECT g, 'before' FROM generate_series(1, 300) g")
    total = 3000
    connector_file = tmp_path / "cdc.json"
    connector_file.write_text(json.dumps({"name": "cdc-crash", "config": db.connector_config()}))
    proc = WorkerProcess(tmp_path / "worker", shared_broker.bootstrap, WORKER_PROPERTIES, [connector_file])
    topic = f"{db.prefix}.public.events"
    reader = TopicReader(shared_broker.bootstrap, db.prefix)
    writer_conn = psycopg2.connect(db.url)
    writer_conn.autocommit = True

    def write() -> None:
        with writer_conn.cursor() as cur:
            for start in range(301, total + 1, 30):
                cur.execute("INSERT INTO events SELECT g, 'streamed' FROM generate_series(%s, %s) g",
                            (start, min(start + 29, total)))

    try:
        proc.start()
        reader.read_until(lambda m: len(changes(m, topic)) >= 300, what="the snapshot")
        writer = threading.Thread(target=write)
        writer.start()
        reader.read_until(lambda m: len(changes(m, topic)) >= 600, what="streamed rows")
        proc.kill()
        writer.join()
        proc.start()
        every_id = set(range(1, total + 1))
        got = reader.read_until(lambda m: {c["after"]["id"] for c in changes(m, topic)} >= every_id, 120,
                                "every row after the restart")
        counts = Counter(c["after"]["id"] for c in changes(got, topic))
        duplicates = sum(n - 1 for n in counts.values())
        print(f"rows {total}, records {sum(counts.values())}, exact duplicates {duplicates}")
        assert set(counts) == every_id
        assert proc.stop() == 0, proc.log_tail()
    finally:
        reader.close()
        writer_conn.close()
        proc.cleanup()
