"""PostgreSQL sink throughput: rows/s from a topic into a table through Moldau's JDBC sink, against the same
rows written straight to PostgreSQL with psycopg2.

One run starts its own PostgreSQL, Moldau broker and `moldau connect` worker, and produces N records (default
100,000) with distinct struct keys and a 5-field struct value (JsonConverter with schemas) to a topic first.

* baseline: this process writes the same rows, already as Python tuples, with the statement the sink uses
  (`INSERT ... ON CONFLICT (id) DO UPDATE`, psycopg2's `execute_values`), in batches of the size the worker
  hands the task (500), one transaction per batch.
* moldau: the JDBC sink (`insert.mode=upsert`, `pk.mode=record_key`, `auto.create=true`) consumes the topic
  from the start; the time runs from creating the connector until the table holds N rows, so it includes
  the worker consuming, converting JSON and building rows.

Reports the rates and the ratios moldau/baseline, the median of `--repeat` rounds; the moldau rate both from
creating the connector (including the consumer joining its group) and from the first row in the table to the
last (the steady rate). Run from the repository
root:
    python -m bench.jdbc_sink [--rows 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg2
from confluent_kafka import Producer
from psycopg2.extras import execute_values

from bench.common import running_broker
from tests.support.connect_worker import WorkerProcess, wait_for
from tests.support.postgres import PostgresServer

JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
BATCH = 500  # the worker's largest batch per put()
KEY_SCHEMA = {"type": "struct", "name": "key", "optional": False,
              "fields": [{"field": "id", "type": "int64", "optional": False}]}
VALUE_SCHEMA = {"type": "struct", "name": "row", "optional": False, "fields": [
    {"field": "id", "type": "int64", "optional": False}, {"field": "name", "type": "string", "optional": True},
    {"field": "email", "type": "string", "optional": True}, {"field": "score", "type": "double", "optional": True},
    {"field": "active", "type": "boolean", "optional": False}]}
COLUMNS = "id BIGINT NOT NULL, name TEXT NULL, email TEXT NULL, score DOUBLE PRECISION NULL, active BOOLEAN NOT NULL"


def row(n: int) -> tuple[Any, ...]:
    return n, f"customer {n}", f"c{n}@example.com", n / 7, n % 2 == 0


def produce(bootstrap: str, topic: str, rows: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20})
    for n in range(rows):
        id_, name, email, score, active = row(n)
        key = json.dumps({"schema": KEY_SCHEMA, "payload": {"id": id_}}).encode()
        value = json.dumps({"schema": VALUE_SCHEMA, "payload": {"id": id_, "name": name, "email": email,
                                                                 "score": score, "active": active}}).encode()
        while True:
            try:
                producer.produce(topic, value, key)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(60) == 0


def count(url: str, table: str) -> int:
    with psycopg2.connect(url) as conn, conn.cursor() as cur:
        cur.execute(f'SELECT count(*) FROM "{table}"')
        found = cur.fetchone()
    conn.close()
    return int(found[0]) if found else 0


def baseline(url: str, rows: int) -> float:
    """Rows/s of the same upserts written directly, one transaction per batch."""
    table = f"direct_{uuid.uuid4().hex[:8]}"
    conn = psycopg2.connect(url)
    with conn.cursor() as cur:
        cur.execute(f'CREATE TABLE "{table}" ({COLUMNS}, PRIMARY KEY(id))')
    conn.commit()
    data = [row(n) for n in range(rows)]
    statement = (f'INSERT INTO "{table}" ("id", "name", "email", "score", "active") VALUES %s ON CONFLICT ("id") '
                 'DO UPDATE SET "name"=EXCLUDED."name", "email"=EXCLUDED."email", "score"=EXCLUDED."score", '
                 '"active"=EXCLUDED."active"')
    start = time.perf_counter()
    for first in range(0, rows, BATCH):
        with conn.cursor() as cur:
            execute_values(cur, statement, data[first:first + BATCH], page_size=BATCH)
        conn.commit()
    elapsed = time.perf_counter() - start
    conn.close()
    return rows / elapsed


def through_moldau(worker: WorkerProcess, url: str, topic: str, rows: int) -> tuple[float, float]:
    """(rows/s from creating the connector, rows/s from the first row in the table to the last)."""
    table = f"sink_{uuid.uuid4().hex[:8]}"
    name = f"bench-{table}"
    config = {"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "tasks.max": "1",
              "topics": topic, "connection.url": "jdbc:" + url, "table.name.format": table,
              "key.converter": JSON_CONVERTER, "value.converter": JSON_CONVERTER, "insert.mode": "upsert",
              "pk.mode": "record_key", "auto.create": "true"}
    start = time.perf_counter()
    status, body = worker.request("PUT", f"/connectors/{name}/config", config)
    assert status == 201, body
    first: list[tuple[float, int]] = []

    def all_there() -> bool:
        try:
            found = count(url, table)
        except psycopg2.errors.UndefinedTable:
            return False
        if found and not first:
            first.append((time.perf_counter(), found))
        return found >= rows
    wait_for(all_there, 600, f"{rows} rows in {table}")
    end = time.perf_counter()
    assert worker.request("DELETE", f"/connectors/{name}")[0] == 204
    first_at, first_count = first[0]
    steady = (rows - first_count) / (end - first_at) if end > first_at else float("nan")
    return rows / (end - start), steady


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    postgres = PostgresServer()
    postgres.start()
    try:
        url = postgres.create_database("bench")
        with running_broker("moldau", "moldau") as broker, tempfile.TemporaryDirectory() as work:
            topic = f"customers-{uuid.uuid4().hex[:6]}"
            produce(broker.bootstrap, topic, args.rows)
            worker = WorkerProcess(Path(work) / "worker", broker.bootstrap)
            worker.start()
            try:
                direct, moldau, steady = [], [], []
                for _ in range(args.repeat):
                    direct.append(baseline(url, args.rows))
                    total, running = through_moldau(worker, url, topic, args.rows)
                    moldau.append(total)
                    steady.append(running)
            finally:
                worker.stop()
                worker.cleanup()
    finally:
        postgres.stop()
    d, m, r = statistics.median(direct), statistics.median(moldau), statistics.median(steady)
    print(f"rows={args.rows} rounds={args.repeat}")
    print(f"baseline (psycopg2 direct):       {d:>9,.0f} rows/s   rounds: {_rounds(direct)}")
    print(f"moldau, from connector creation:  {m:>9,.0f} rows/s   rounds: {_rounds(moldau)}")
    print(f"moldau, first row to last:        {r:>9,.0f} rows/s   rounds: {_rounds(steady)}")
    print(f"moldau/baseline: {m / d:.3f} (from creation), {r / d:.3f} (first row to last)")


def _rounds(values: list[float]) -> str:
    return ", ".join(f"{x:,.0f}" for x in values)


if __name__ == "__main__":
    main()
