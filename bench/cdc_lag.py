"""Change data capture lag: from a PostgreSQL commit to the change being readable, through Moldau and raw.

One run starts its own PostgreSQL (`wal_level=logical`), Moldau broker and `moldau connect` worker, and
inserts rows into a table at a fixed rate (default 500 rows/s for 20 s), one autocommitted INSERT per row.
Each row carries `clock_timestamp()` taken inside its transaction, a few microseconds before its commit.

* raw (the baseline): a psycopg2 `LogicalReplicationConnection` reads the same pgoutput stream from its own
  slot, in this process, with nothing else in the path; lag = arrival of the Insert message - the row's time.
* moldau: the PostgreSQL CDC source connector (Debezium's envelope, JSON with schemas) writes each change to
  a topic; a confluent-kafka consumer reads it; lag = arrival at the consumer - the row's time.

* broker hop: a producer with the worker's producer settings and a consumer like the one above, timestamps
  at the same rate, no PostgreSQL: the part of the moldau lag that is the broker round trip.

The phases run one after the other on the same machine, with the same rate. Reports p50, p99 and max lag in
ms, the achieved rate of each phase, the Moldau/raw ratios, the lag up to the connector building the event
(its envelope `ts_ms`, ms resolution), and the moldau lag minus the broker hop. Run from the repository root:
    python -m bench.cdc_lag [--rate 500] [--seconds 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg2
import psycopg2.extras
from confluent_kafka import Consumer, Message, Producer

from bench.common import running_broker
from moldau.connect.connectors.postgres_cdc import pgoutput
from tests.support.connect_worker import WorkerProcess, wait_for
from tests.support.postgres import PostgresServer

JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
DECODED: list[float] = []  # commit to the connector building the envelope (its ts_ms), ms


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def write_rows(url: str, first_id: int, rate: int, seconds: float) -> float:
    """Insert rate*seconds rows at a steady pace; the achieved rows/s."""
    conn = psycopg2.connect(url)
    conn.autocommit = True
    total = int(rate * seconds)
    start = time.monotonic()
    with conn.cursor() as cur:
        for n in range(total):
            delay = start + n / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            cur.execute("INSERT INTO ticks (id, pad) VALUES (%s, %s)", (first_id + n, "x" * 100))
    elapsed = time.monotonic() - start
    conn.close()
    return total / elapsed


def row_time(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def raw_phase(url: str, ids: range, rate: int, seconds: float) -> tuple[list[float], float]:
    """Lag of the bare psycopg2 replication reader, on its own slot."""
    dsn = psycopg2.extensions.parse_dsn(url)
    conn = psycopg2.connect(connection_factory=psycopg2.extras.LogicalReplicationConnection,
                            options="-c TimeZone=UTC", **dsn)
    cur = conn.cursor()
    cur.create_replication_slot("bench_raw", output_plugin="pgoutput")
    cur.start_replication(slot_name="bench_raw", decode=False,
                          options={"proto_version": "1", "publication_names": "bench_pub"})
    lags: list[float] = []
    wanted = set(ids)
    achieved: list[float] = []
    writer = threading.Thread(target=lambda: achieved.append(write_rows(url, ids.start, rate, seconds)))
    writer.start()
    deadline = time.monotonic() + seconds + 60
    while wanted and time.monotonic() < deadline:
        message = cur.read_message()
        if message is None:
            import select
            select.select([cur], [], [], 0.05)
            continue
        decoded = pgoutput.decode(bytes(message.payload))
        if isinstance(decoded, pgoutput.Insert):
            arrived = time.time()
            row_id, committed = decoded.new[0], decoded.new[1]
            assert isinstance(row_id, str) and isinstance(committed, str)
            lags.append((arrived - row_time(committed)) * 1000)
            wanted.discard(int(row_id))
            cur.send_feedback(flush_lsn=message.data_start)
    writer.join()
    conn.close()
    if wanted:
        raise RuntimeError(f"raw reader missed {len(wanted)} rows")
    return lags, achieved[0]


def moldau_phase(url: str, port: int, dbname: str, bootstrap: str, work: Path, ids: range, rate: int,
                 seconds: float) -> tuple[list[float], float]:
    """Lag through the CDC source connector, the broker and a consumer."""
    worker = WorkerProcess(work / "worker", bootstrap, {
        "key.converter": JSON_CONVERTER, "value.converter": JSON_CONVERTER, "offset.flush.interval.ms": "1000"})
    prefix = f"bench{uuid.uuid4().hex[:6]}"
    config = {"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "tasks.max": "1",
              "database.hostname": "127.0.0.1", "database.port": str(port), "database.user": "postgres",
              "database.dbname": dbname, "topic.prefix": prefix, "slot.name": "bench_moldau",
              "publication.name": "bench_pub", "publication.autocreate.mode": "disabled", "snapshot.mode": "never"}
    worker.start()
    try:
        status, body = worker.request("POST", "/connectors", {"name": "cdc-bench", "config": config})
        assert status == 201, body
        wait_for(lambda: _slot_active(url, "bench_moldau"), 60, "the connector's slot")
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{prefix}",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.wait.max.ms": 10,
                             "topic.metadata.refresh.interval.ms": 200})
        consumer.subscribe([f"^{prefix}[.].*"])
        _warm_up(url, consumer, -ids.start)
        lags: list[float] = []
        decoded_lags = DECODED
        wanted = set(ids)
        achieved: list[float] = []
        writer = threading.Thread(target=lambda: achieved.append(write_rows(url, ids.start, rate, seconds)))
        writer.start()
        deadline = time.monotonic() + seconds + 60
        while wanted and time.monotonic() < deadline:
            for message in received(consumer):
                value = message.value()
                if message.error() or not value:
                    continue
                arrived = time.time()
                payload = json.loads(value)["payload"]
                after = payload["after"]
                lags.append((arrived - row_time(after["committed_at"])) * 1000)
                decoded_lags.append(payload["ts_ms"] - row_time(after["committed_at"]) * 1000)
                wanted.discard(after["id"])
        writer.join()
        consumer.close()
        if wanted:
            raise RuntimeError(f"moldau path missed {len(wanted)} rows:\n{worker.log_tail()}")
        return lags, achieved[0]
    finally:
        worker.stop()
        worker.cleanup()


def received(consumer: Consumer) -> list[Message]:
    """The records that have arrived, as soon as there is one. consume(n, timeout) would wait until it has n
    records or the timeout passed: at 500 rows/s, consume(1000, 0.05) adds up to 50 ms to each row's lag (the
    figures before this was fixed showed p50 29 ms / p99 55 ms for the broker hop; poll() gives 4 ms / 9 ms)."""
    first = consumer.poll(0.05)
    return [] if first is None else [first, *consumer.consume(1000, 0)]


def broker_hop_phase(bootstrap: str, rate: int, seconds: float) -> tuple[list[float], float]:
    """The broker hop alone: a producer with the worker's settings (acks=all, idempotent, linger.ms=5) sends
    timestamps at the same rate to a consumer configured as in the moldau phase; lag = receipt - send."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    topic = f"bench-hop-{uuid.uuid4().hex[:6]}"
    producer.produce(topic, b"warm-up")
    producer.flush()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 10,
                         "topic.metadata.refresh.interval.ms": 200})
    consumer.subscribe([f"^{topic}"])
    while not any(m.value() == b"warm-up" for m in consumer.consume(10, 0.1) if not m.error()):
        pass
    total = int(rate * seconds)
    achieved: list[float] = []

    def send() -> None:
        start = time.monotonic()
        for n in range(total):
            delay = start + n / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            producer.produce(topic, repr(time.time()).encode())
            producer.poll(0)
        producer.flush()
        achieved.append(total / (time.monotonic() - start))

    sender = threading.Thread(target=send)
    sender.start()
    lags: list[float] = []
    deadline = time.monotonic() + seconds + 60
    while len(lags) < total and time.monotonic() < deadline:
        for message in received(consumer):
            if not message.error():
                lags.append((time.time() - float(message.value() or b"0")) * 1000)
    sender.join()
    consumer.close()
    return lags, achieved[0]


def _warm_up(url: str, consumer: Consumer, row_id: int) -> None:
    """One row through the whole path first, so the topic exists and the consumer has its partition before
    the measured rows start (topic creation and the group join are not change capture lag)."""
    conn = psycopg2.connect(url)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("INSERT INTO ticks (id, pad) VALUES (%s, 'warm-up')", (row_id,))
    conn.close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for message in consumer.consume(100, 0.1):
            value = message.value()
            if not message.error() and value and json.loads(value)["payload"]["after"]["id"] == row_id:
                return
    raise RuntimeError("the warm-up row never arrived")


def _slot_active(url: str, slot: str) -> bool:
    conn = psycopg2.connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,))
            row = cur.fetchone()
            return bool(row and row[0])
    finally:
        conn.close()


def summary(name: str, lags: list[float], rate: float) -> dict[str, Any]:
    return {"path": name, "rows": len(lags), "rows/s": rate, "p50": statistics.median(lags),
            "p99": percentile(lags, 0.99), "max": max(lags)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=500, help="rows inserted per second")
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds of inserts per phase")
    args = parser.parse_args()
    server = PostgresServer()
    server.start()
    try:
        url = server.create_database("bench")
        conn = psycopg2.connect(url)
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE ticks (id int PRIMARY KEY, committed_at timestamptz NOT NULL "
                        "DEFAULT clock_timestamp(), pad text)")
            cur.execute("CREATE PUBLICATION bench_pub FOR TABLE ticks")
        conn.close()
        total = int(args.rate * args.seconds)
        raw_lags, raw_rate = raw_phase(url, range(1, total + 1), args.rate, args.seconds)
        with running_broker("moldau", "moldau") as broker, tempfile.TemporaryDirectory(prefix="bench-cdc-") as tmp:
            moldau_lags, moldau_rate = moldau_phase(url, server.port, "bench", broker.bootstrap, Path(tmp),
                                                    range(total + 1, 2 * total + 1), args.rate, args.seconds)
            hop_lags, hop_rate = broker_hop_phase(broker.bootstrap, args.rate, args.seconds)
    finally:
        server.stop()
    raw, moldau = summary("raw psycopg2", raw_lags, raw_rate), summary("moldau", moldau_lags, moldau_rate)
    hop = summary("broker hop", hop_lags, hop_rate)
    print(f"{'path':<14}{'rows':>7}{'rows/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}")
    for row in (raw, moldau, hop):
        print(f"{row['path']:<14}{row['rows']:>7}{row['rows/s']:>9.0f}{row['p50']:>9.1f}{row['p99']:>9.1f}"
              f"{row['max']:>9.1f}")
    print(f"moldau, commit to the connector's envelope ts_ms: p50 {statistics.median(DECODED):.1f} ms, "
          f"p99 {percentile(DECODED, 0.99):.1f} ms")
    print(f"ratio moldau/raw: p50 {moldau['p50'] / raw['p50']:.1f}x, p99 {moldau['p99'] / raw['p99']:.1f}x")
    print(f"moldau minus broker hop: p50 {moldau['p50'] - hop['p50']:.1f} ms, p99 {moldau['p99'] - hop['p99']:.1f} ms")


if __name__ == "__main__":
    main()
