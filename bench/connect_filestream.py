"""Connect throughput: lines from a file through FileStreamSource -> topic -> FileStreamSink into another file,
beside a baseline doing the same with plain confluent-kafka clients, in the same run against the same broker.

One fresh Moldau broker; an input file of N lines of S bytes. Each round, alternating the two:

* connect: a `moldau connect standalone` worker process (StringConverter, offsets flushed every second) is
  started, a fresh one-partition topic created, and a FileStreamSink (that topic -> an output file) created
  through the REST API; once its consumer has joined its group and been assigned the partition (the group's
  initial rebalance delay is not throughput), the clock starts, a FileStreamSource (the input file -> the
  topic) is created, and the clock stops when the output file holds every line;
* baseline: one Python process reads the same file, produces every line to a fresh topic with the producer
  settings Connect's source uses (acks=all, idempotence, linger.ms=5), then consumes the topic from the
  beginning and appends each value as a line to an output file (fsync at the end), as the sink does.

Both are records/s over the whole trip (the baseline's produce and consume phases run one after the other,
Connect's concurrently). The ratio is connect / baseline. Run from the repository root:
    python -m bench.connect_filestream [--records 200000] [--size 100] [--repeat 3] [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from bench.common import create_topic, running_broker, scratch_dir
from tests.support.connect_worker import WorkerProcess

TIME_LIMIT_S = 600.0


def main() -> None:
    args = parse_args()
    records = 50_000 if args.quick else args.records
    rounds = 1 if args.quick else args.repeat
    with running_broker("moldau", "moldau") as broker, scratch_dir("connect") as tmp:
        source = tmp / "input.txt"
        write_input(source, records, args.size)
        expected_bytes = source.stat().st_size
        rates: dict[str, list[float]] = {"connect": [], "baseline": []}
        for round_number in range(rounds):
            for name in ("baseline", "connect") if round_number % 2 else ("connect", "baseline"):
                output = tmp / f"{name}-{round_number}.txt"
                run = connect_run if name == "connect" else baseline_run
                seconds = run(broker.bootstrap, source, output, expected_bytes, tmp / f"worker-{round_number}")
                rates[name].append(records / seconds)
                print(f"round {round_number + 1} {name}: {records / seconds:,.0f} records/s ({seconds:.2f} s)",
                      flush=True)
    connect, baseline = statistics.median(rates["connect"]), statistics.median(rates["baseline"])
    print(f"\n{records:,} lines of {args.size} B, median of {rounds}:")
    print(f"connect  {connect:,.0f} records/s")
    print(f"baseline {baseline:,.0f} records/s")
    print(f"ratio    {connect / baseline:.2f}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000, help="lines in the input file")
    parser.add_argument("--size", type=int, default=100, help="bytes per line, without the newline")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; the median is reported")
    parser.add_argument("--quick", action="store_true", help="50,000 lines, one round")
    return parser.parse_args()


def write_input(path: Path, records: int, size: int) -> None:
    with path.open("w") as out:
        for i in range(records):
            prefix = f"{i:09d} "
            out.write(prefix + "x" * max(0, size - len(prefix)) + "\n")


def wait_for_bytes(path: Path, expected: int, started: float) -> None:
    while not path.exists() or path.stat().st_size < expected:
        if time.monotonic() - started > TIME_LIMIT_S:
            raise RuntimeError(f"{path.name} has not every line after {TIME_LIMIT_S:.0f}s")
        time.sleep(0.05)


def connect_run(bootstrap: str, source: Path, output: Path, expected: int, directory: Path) -> float:
    worker = WorkerProcess(directory, bootstrap, {"offset.flush.interval.ms": "1000"})
    worker.start()
    try:
        topic = f"bench-connect-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, 1)
        create(worker, "sink", {"connector.class": "FileStreamSink", "file": str(output), "topics": topic})
        wait_assigned(worker, "sink", topic)
        started = time.monotonic()
        create(worker, "source", {"connector.class": "FileStreamSource", "file": str(source), "topic": topic})
        wait_for_bytes(output, expected, started)
        seconds = time.monotonic() - started
        if worker.stop() != 0:
            raise RuntimeError(f"the worker did not stop cleanly:\n{worker.log_tail()}")
        return seconds
    finally:
        worker.cleanup()


def create(worker: WorkerProcess, name: str, config: dict[str, str]) -> None:
    status, body = worker.request("POST", "/connectors", {"name": name, "config": config})
    if status != 201:
        raise RuntimeError(f"creating the {name} connector: {status} {body}")


def wait_assigned(worker: WorkerProcess, name: str, topic: str) -> None:
    """Until the sink task has been assigned a partition of `topic` (the connector's active topics say so)."""
    started = time.monotonic()
    while topic not in worker.request("GET", f"/connectors/{name}/topics")[1][name]["topics"]:
        if time.monotonic() - started > TIME_LIMIT_S:
            raise RuntimeError(f"the sink was not assigned {topic}:\n{worker.log_tail()}")
        time.sleep(0.05)


def baseline_run(bootstrap: str, source: Path, output: Path, expected: int, directory: Path) -> float:
    topic = f"bench-baseline-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    started = time.monotonic()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5})
    count = 0
    with source.open("rb") as lines:
        for line in lines:
            while True:
                try:
                    producer.produce(topic, value=line.rstrip(b"\n"))
                    break
                except BufferError:
                    producer.poll(0.1)
            count += 1
    if producer.flush(TIME_LIMIT_S):
        raise RuntimeError("baseline: records not acknowledged")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}", "enable.auto.commit": False})
    consumer.assign([CkTopicPartition(topic, 0, 0)])
    received = 0
    with output.open("w") as out:
        while received < count:
            if time.monotonic() - started > TIME_LIMIT_S:
                raise RuntimeError("baseline: not every record consumed")
            for message in consumer.consume(500, 0.2):
                if message.error() is None:
                    out.write(f"{(message.value() or b'').decode()}\n")
                    received += 1
        out.flush()
        os.fsync(out.fileno())
    consumer.close()
    wait_for_bytes(output, expected, started)
    return time.monotonic() - started


if __name__ == "__main__":
    main()
