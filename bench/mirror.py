"""Mirror throughput and lag: MirrorMaker 2's source connector (Moldau's, one task, in a standalone Connect
worker process) copying a topic between two Moldau brokers, against a plain copy with the same client library
in the same run (one process: a confluent-kafka consumer reading the source, a producer writing the target with
the worker's producer settings: acks=all, idempotence, linger.ms=5).

Throughput: RECORDS records of 1 KB (keys and a header) are written to a 4-partition topic on the source; then
each copier copies them into its own topic on the target, REPEAT times with the order alternating. The rate
counts from the first record seen on the target to the last (so process and connector start-up are left out),
read from the target's end offsets every 50 ms. Medians in MB/s and records/s, and the mirror's share of the
plain copy's rate. Every run checks that the target holds exactly RECORDS records.

The same connector also runs with exactly-once delivery (KIP-618: a distributed worker with
`exactly.once.source.support=enabled`, one transaction per poll): its last record counts once the source offsets
committed with it in its transaction reach the end of every partition (the target's end offsets also count
transaction markers), and the run checks that a read_committed consumer reads exactly RECORDS records. Its
share of the at-least-once mirror's rate is printed too.

Lag: a producer writes RATE records/s of 1 KB for SECONDS, each carrying its send time; a consumer on the target
takes receive time minus send time for every record; p50 and p99 for the mirror and for the plain copy.

Run from the repository root:  python -m bench.mirror [--quick] [--records N] [--repeat N] [--rate R]
                                   [--seconds S]
(`python -m bench.mirror copy ...` is the plain copier the benchmark starts; not run by hand.)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from bench.common import alternating, consumer_config, create_topic, running_broker
from tests.support.connect_worker import WorkerProcess

SIZE = 1000
PARTITIONS = 4
PRODUCER = {"acks": "all", "enable.idempotence": True, "linger.ms": 5}
BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"


def fill(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000})
    payload = b"x" * (SIZE - 30)
    for i in range(count):
        while True:
            try:
                producer.produce(topic, key=str(i).encode(), value=payload, partition=i % PARTITIONS,
                                 headers=[("h", b"1")])
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120) != 0:
        raise RuntimeError("fill: records not delivered")


def end_offsets(consumer: Consumer, topic: str) -> int:
    return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS))


def watch_copy(bootstrap: str, topic: str, expected: int, timeout_s: float) -> float:
    """Seconds from the first record on `topic` to the last of `expected`."""
    consumer = Consumer(consumer_config(bootstrap))
    try:
        deadline = time.monotonic() + timeout_s
        first = None
        while time.monotonic() < deadline:
            try:
                count = end_offsets(consumer, topic)
            except Exception:
                count = 0  # the topic is not there yet
            now = time.monotonic()
            if count > 0 and first is None:
                first = now
            if count >= expected:
                if count != expected:
                    raise RuntimeError(f"{topic}: {count} records, expected {expected}")
                assert first is not None
                return max(now - first, 1e-3)
            time.sleep(0.05)
        raise RuntimeError(f"{topic}: copy not done within {timeout_s:.0f}s")
    finally:
        consumer.close()


# --------------------------------------------------------------------------- the plain copier


def plain_copy(source: str, target: str, topic: str, remote: str) -> None:
    """Copy `topic` to `remote` until killed, partition by partition, keys, headers and timestamps kept."""
    consumer = Consumer(consumer_config(source))
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    producer = Producer({"bootstrap.servers": target, **PRODUCER})
    print("ready", flush=True)
    while True:
        for message in consumer.consume(1000, 0.1):
            if message.error() is not None:
                continue
            while True:
                try:
                    producer.produce(remote, key=message.key(), value=message.value(),
                                     partition=message.partition() or 0, headers=message.headers(),
                                     timestamp=message.timestamp()[1])
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.poll(0)


def start_plain(source: str, target: str, topic: str, remote: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-m", "bench.mirror", "copy", source, target, topic, remote],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        raise RuntimeError("the plain copier did not start")
    return proc


def stop(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.wait()


def mirror_connector(name: str, source: str, target: str, topic: str) -> dict[str, str]:
    return {"name": name, "connector.class": "MirrorSourceConnector", "source.cluster.alias": "src",
            "target.cluster.alias": "dst", "source.cluster.bootstrap.servers": source,
            "target.cluster.bootstrap.servers": target, "topics": topic, "tasks.max": "1",
            "key.converter": BYTES, "value.converter": BYTES, "replication.factor": "1",
            "offset-syncs.topic.replication.factor": "1", "sync.topic.acls.enabled": "false"}


def start_mirror(worker: WorkerProcess, source: str, target: str, topic: str) -> str:
    name = f"mirror-{uuid.uuid4().hex[:6]}"
    deadline = time.monotonic() + 60
    while True:
        status, body = worker.request("POST", "/connectors",
                                      {"name": name, "config": mirror_connector(name, source, target, topic)})
        if status == 201:
            return name
        if status != 409 or time.monotonic() > deadline:  # 409: a distributed worker's group is rebalancing
            raise RuntimeError(f"creating the mirror connector: {status} {body}")
        time.sleep(0.2)


# --------------------------------------------------------------------------- the exactly-once mirror


def eos_worker_settings() -> dict[str, str]:
    run = uuid.uuid4().hex[:8]
    return {"group.id": f"bench-eos-{run}", "config.storage.topic": f"bench-eos-configs-{run}",
            "offset.storage.topic": f"bench-eos-offsets-{run}", "status.storage.topic": f"bench-eos-status-{run}",
            "config.storage.replication.factor": "1", "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1", "offset.storage.partitions": "1",
            "status.storage.partitions": "1", "offset.flush.interval.ms": "1000",
            "exactly.once.source.support": "enabled"}


def watch_transactional_copy(target: str, worker: WorkerProcess, name: str, topic: str, expected: int,
                             timeout_s: float) -> float:
    """Seconds from the first record on the remote topic to the commit of the transaction holding the last one:
    the one whose source offsets, committed with the records, reach the end of every source partition."""
    remote = f"src.{topic}"
    last = {p: len(range(p, expected, PARTITIONS)) - 1 for p in range(PARTITIONS)}
    watermarks = Consumer(consumer_config(target))
    offsets = Consumer({**consumer_config(target), "isolation.level": "read_committed"})
    offsets.assign([TopicPartition(worker.properties["offset.storage.topic"], 0, OFFSET_BEGINNING)])
    reached: dict[int, int] = {}
    first = None
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for message in offsets.consume(1000, 0.05):
                key, value = message.key(), message.value()
                if message.error() is not None or key is None or value is None:
                    continue
                connector, partition = json.loads(key)
                if connector == name and partition["topic"] == topic:
                    reached[partition["partition"]] = json.loads(value)["offset"]
            now = time.monotonic()
            if first is None:
                try:
                    if end_offsets(watermarks, remote) > 0:
                        first = now
                except Exception:
                    pass  # the remote topic is not there yet
            if first is not None and all(reached.get(p, -1) >= offset for p, offset in last.items()):
                elapsed = max(now - first, 1e-3)
                count = count_committed(target, remote)
                if count != expected:
                    raise RuntimeError(f"{remote}: {count} committed records, expected {expected}")
                return elapsed
        raise RuntimeError(f"{remote}: copy not done within {timeout_s:.0f}s")
    finally:
        watermarks.close()
        offsets.close()


def count_committed(bootstrap: str, topic: str) -> int:
    """The records a read_committed consumer reads of `topic`, to its last stable offsets."""
    consumer = Consumer({**consumer_config(bootstrap), "isolation.level": "read_committed",
                         "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        count, done = 0, set[int | None]()
        while len(done) < PARTITIONS:
            for message in consumer.consume(10_000, 1.0):
                error = message.error()
                if error is None:
                    count += 1
                elif error.code() == KafkaError._PARTITION_EOF:
                    done.add(message.partition())
        return count
    finally:
        consumer.close()


# --------------------------------------------------------------------------- throughput


def throughput(source: str, target: str, worker: WorkerProcess, eos_worker: WorkerProcess, records: int,
               repeat: int) -> dict[str, list[float]]:
    seconds: dict[str, list[float]] = {"mirror": [], "mirror_eos": [], "plain": []}
    for _, kind in alternating(["mirror", "mirror_eos", "plain"], repeat):
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        create_topic(source, topic, PARTITIONS)
        fill(source, topic, records)
        if kind == "mirror":
            name = start_mirror(worker, source, target, topic)
            seconds[kind].append(watch_copy(target, f"src.{topic}", records, 600))
            worker.request("DELETE", f"/connectors/{name}")
        elif kind == "mirror_eos":
            name = start_mirror(eos_worker, source, target, topic)
            seconds[kind].append(watch_transactional_copy(target, eos_worker, name, topic, records, 600))
            eos_worker.request("DELETE", f"/connectors/{name}")
        else:
            remote = f"copy.{topic}"
            create_topic(target, remote, PARTITIONS)
            proc = start_plain(source, target, topic, remote)
            try:
                seconds[kind].append(watch_copy(target, remote, records, 600))
            finally:
                stop(proc)
        print(f"  {kind}: {records / seconds[kind][-1]:,.0f} records/s", flush=True)
    return seconds


# --------------------------------------------------------------------------- lag


def timed_load(bootstrap: str, topic: str, rate: int, count: int) -> int:
    """Write `count` records at `rate` records/s, each value starting with its send time in ns; the count sent."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
    pad = b"x" * (SIZE - 20)
    sent, start = 0, time.monotonic()
    while sent < count:
        due = min(count, int((time.monotonic() - start) * rate) + 1)
        while sent < due:
            producer.produce(topic, value=b"%019d" % time.time_ns() + pad, partition=sent % PARTITIONS)
            sent += 1
        producer.poll(0)
        time.sleep(0.001)
    if producer.flush(60) != 0:
        raise RuntimeError(f"{topic}: records not delivered")
    return sent


def measure_lag(target: str, remote: str, expected: int, timeout_s: float) -> list[float]:
    consumer = Consumer(consumer_config(target))
    lags: list[float] = []
    deadline = time.monotonic() + timeout_s
    assigned = False
    try:
        while len(lags) < expected and time.monotonic() < deadline:
            if not assigned:
                if remote in consumer.list_topics(timeout=5).topics:
                    consumer.assign([TopicPartition(remote, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
                    assigned = True
                else:
                    time.sleep(0.05)
                    continue
            for message in consumer.consume(1000, 0.1):
                value = message.value()
                if message.error() is None and value is not None:
                    lags.append((time.time_ns() - int(value[:19])) / 1e6)
    finally:
        consumer.close()
    if len(lags) != expected:
        raise RuntimeError(f"{remote}: {len(lags)} records received, expected {expected}")
    return lags


def lag_once(kind: str, source: str, target: str, worker: WorkerProcess, rate: int, seconds: float) -> list[float]:
    topic = f"lag-{uuid.uuid4().hex[:8]}"
    create_topic(source, topic, PARTITIONS)
    remote = f"src.{topic}" if kind == "mirror" else f"copy.{topic}"
    name, proc = None, None
    if kind == "mirror":
        name = start_mirror(worker, source, target, topic)
    else:
        create_topic(target, remote, PARTITIONS)
        proc = start_plain(source, target, topic, remote)
    try:
        time.sleep(2)  # the copier is up and idle before the load starts
        expected = int(rate * seconds)
        received: list[list[float]] = []

        def read() -> None:
            received.append(measure_lag(target, remote, expected, seconds + 120))

        reader = threading.Thread(target=read)
        reader.start()
        sent = timed_load(source, topic, rate, expected)
        reader.join()
    finally:
        if name is not None:
            worker.request("DELETE", f"/connectors/{name}")
        if proc is not None:
            stop(proc)
    if sent != expected or not received:
        raise RuntimeError(f"{kind}: sent {sent} records, expected {expected}; received {len(received)} runs")
    return received[0]


def lag(source: str, target: str, worker: WorkerProcess, rate: int, seconds: float) -> dict[str, list[float]]:
    return {kind: lag_once(kind, source, target, worker, rate, seconds) for kind in ("mirror", "plain")}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode")
    copy = sub.add_parser("copy")
    for name in ("source", "target", "topic", "remote"):
        copy.add_argument(name)
    parser.add_argument("--quick", action="store_true", help="fewer records, one round, a short lag run")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rate", type=int, default=10_000, help="records/s of 1 KB in the lag run")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the lag run")
    args = parser.parse_args()
    if args.mode == "copy":
        plain_copy(args.source, args.target, args.topic, args.remote)
        return
    if args.quick:
        args.records, args.repeat, args.seconds, args.rate = 50_000, 1, 5.0, 5_000
    with running_broker("source", "moldau") as source, running_broker("target", "moldau") as target, \
            tempfile.TemporaryDirectory(prefix="bench-mirror-") as tmp:
        worker = WorkerProcess(Path(tmp), target.bootstrap, {"offset.flush.interval.ms": "1000"})
        eos_worker = WorkerProcess(Path(tmp) / "eos", target.bootstrap, eos_worker_settings(), mode="distributed")
        worker.start()
        eos_worker.start(timeout_s=60)
        try:
            print(f"throughput: {args.records:,} records of {SIZE} B, {args.repeat} rounds each", flush=True)
            seconds = throughput(source.bootstrap, target.bootstrap, worker, eos_worker, args.records, args.repeat)
            print(f"lag: {args.rate:,} records/s of {SIZE} B for {args.seconds:.0f} s", flush=True)
            lags = lag(source.bootstrap, target.bootstrap, worker, args.rate, args.seconds)
        finally:
            worker.stop()
            eos_worker.stop()
    rates = {kind: args.records / statistics.median(values) for kind, values in seconds.items()}
    summary = {
        "records": args.records, "record_bytes": SIZE, "repeat": args.repeat,
        "mirror_mb_s": round(rates["mirror"] * SIZE / 1e6, 1), "plain_mb_s": round(rates["plain"] * SIZE / 1e6, 1),
        "mirror_share_of_plain": round(rates["mirror"] / rates["plain"], 2),
        "mirror_eos_mb_s": round(rates["mirror_eos"] * SIZE / 1e6, 1),
        "mirror_eos_share_of_mirror": round(rates["mirror_eos"] / rates["mirror"], 2),
        "lag_rate_mb_s": round(args.rate * SIZE / 1e6, 1),
        "mirror_lag_ms_p50": round(percentile(lags["mirror"], 0.5), 1),
        "mirror_lag_ms_p99": round(percentile(lags["mirror"], 0.99), 1),
        "plain_lag_ms_p50": round(percentile(lags["plain"], 0.5), 1),
        "plain_lag_ms_p99": round(percentile(lags["plain"], 0.99), 1),
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
