"""The CDC pipeline end to end: changes in one PostgreSQL database (a snapshot, then inserts, updates and deletes)
reach a second database's table (and a file) through Moldau, with Debezium's PostgreSQL connector config on one
side and the Confluent JDBC sink's on the other, and stay consistent when the worker is killed with kill -9
mid-stream."""

from __future__ import annotations

import json
import random
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg2
import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.connect_worker import WorkerProcess, read_lines, wait_for
from tests.support.postgres import PostgresServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

JSON = "org.apache.kafka.connect.json.JsonConverter"


def rows(url: str, table: str) -> list[tuple[Any, ...]]:
    with psycopg2.connect(url) as conn, conn.cursor() as cur:
        try:
            cur.execute(f"select id, name, email from {table} order by id")
        except psycopg2.errors.UndefinedTable:
            return []
        return list(cur.fetchall())


def execute(url: str, *statements: str) -> None:
    conn = psycopg2.connect(url)
    try:
        with conn, conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
    finally:
        conn.close()


@pytest.fixture
def databases(postgres: PostgresServer) -> Iterator[tuple[str, str, str]]:
    tag = uuid.uuid4().hex[:8]
    source, target = postgres.create_database(f"shop_{tag}"), postgres.create_database(f"copy_{tag}")
    execute(source, "create table customers (id int primary key, name text not null, email text)",
            *(f"insert into customers values ({i}, 'name {i}', 'c{i}@example.com')" for i in range(1, 21)))
    yield source, target, tag


def cdc_config(postgres: PostgresServer, source_db: str, tag: str) -> dict[str, str]:
    return {"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": "127.0.0.1", "database.port": str(postgres.port), "database.user": "postgres",
            "database.password": "", "database.dbname": source_db, "topic.prefix": f"shop{tag}",
            "plugin.name": "pgoutput", "slot.name": f"slot_{tag}", "publication.name": f"pub_{tag}",
            "table.include.list": "public.customers", "snapshot.mode": "initial", "heartbeat.interval.ms": "1000"}


def sink_config(postgres: PostgresServer, target_db: str, tag: str) -> dict[str, str]:
    return {"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
            "connection.url": f"jdbc:postgresql://127.0.0.1:{postgres.port}/{target_db}",
            "connection.user": "postgres", "connection.password": "", "topics": f"shop{tag}.public.customers",
            "table.name.format": "customers", "insert.mode": "upsert", "pk.mode": "record_key", "pk.fields": "id",
            "delete.enabled": "true", "auto.create": "true", "auto.evolve": "true",
            "transforms": "unwrap", "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
            "transforms.unwrap.drop.tombstones": "false", "transforms.unwrap.delete.handling.mode": "none"}


def test_changes_flow_into_another_database_and_survive_a_worker_crash(
        postgres: PostgresServer, shared_broker: BrokerProcess, databases: tuple[str, str, str],
        tmp_path: Path) -> None:
    source, target, tag = databases
    # A standalone worker keeps connector configs in memory: they come from files, read again at every start.
    files = []
    changes_file = tmp_path / "changes.txt"
    file_sink = {"connector.class": "FileStreamSink", "file": str(changes_file),
                 "topics": f"shop{tag}.public.customers", "transforms": "unwrap",
                 "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState"}
    for name, config in ((f"cdc-{tag}", cdc_config(postgres, source.rsplit("/", 1)[1], tag)),
                         (f"sink-{tag}", sink_config(postgres, target.rsplit("/", 1)[1], tag)),
                         (f"file-{tag}", file_sink)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"name": name, "config": config}))
        files.append(path)
    # After the kill below, the sinks' new consumers join their groups once the killed ones' sessions expired.
    worker = WorkerProcess(tmp_path / "worker", shared_broker.bootstrap,
                           {"key.converter": JSON, "value.converter": JSON, "consumer.session.timeout.ms": "6000"},
                           connector_files=files)
    worker.start()
    try:
        wait_for(lambda: rows(target, "customers") == rows(source, "customers"), 90, "the snapshot to arrive")

        execute(source, "insert into customers values (100, 'new', 'n@example.com')",
                "update customers set email = 'changed@example.com' where id = 3",
                "delete from customers where id = 5")
        wait_for(lambda: rows(target, "customers") == rows(source, "customers"), 60, "the changes to arrive")
        # The same changes, as rows, in a file too.
        wait_for(lambda: any(line.startswith("Struct{id=100,") for line in read_lines(changes_file)), 30,
                 "the new row in the file")

        # Changes keep coming while the worker is killed and started again: afterwards both sides agree.
        stop = threading.Event()
        rng = random.Random(7)

        def write() -> None:
            next_id = 200
            while not stop.is_set():
                roll = rng.random()
                if roll < 0.5:
                    execute(source, f"insert into customers values ({next_id}, 'n{next_id}', null)")
                    next_id += 1
                elif roll < 0.8:
                    execute(source, f"update customers set name = 'u{rng.random()}' where id = {rng.randrange(1, 21)}")
                else:
                    execute(source, f"delete from customers where id = {rng.randrange(1, next_id)}")
                stop.wait(0.01)

        writer = threading.Thread(target=write)
        writer.start()
        try:
            stop.wait(2)
            worker.kill()
            stop.wait(1)
            worker.start()
            stop.wait(2)
        finally:
            stop.set()
            writer.join()
        try:
            wait_for(lambda: rows(target, "customers") == rows(source, "customers"), 120,
                     "the copy to agree after the crash")
        except AssertionError:
            left, right = set(rows(source, "customers")), set(rows(target, "customers"))
            statuses = [worker.request("GET", f"/connectors/{n}/status")[1] for n in (f"cdc-{tag}", f"sink-{tag}")]
            raise AssertionError(f"only in the source: {sorted(left - right)[:5]}; only in the copy: "
                                 f"{sorted(right - left)[:5]}; statuses: {statuses}\n{worker.log_tail(40)}") from None
    finally:
        worker.stop()
