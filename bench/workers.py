"""Load-generator processes driven by the scenario scripts (confluent-kafka, one client per process).

Not a benchmark by itself. Each worker connects, prints ``ready``, waits for a ``go`` line on stdin,
does its work and prints one JSON line with its counts and its start/end wall-clock times in ns.
Example:  python -m bench.workers produce --bootstrap 127.0.0.1:9092 --topic t --count 100000 --size 100
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from array import array
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, Producer, TopicPartition

from bench.common import consumer_config

POLL_EVERY = 10_000
STAMP_DIGITS = 19


def announce_and_wait() -> None:
    """Tell the driver this worker is connected and block until it says go."""
    print("ready", flush=True)
    sys.stdin.readline()


def finish(**result: Any) -> None:
    """Print the worker's result for the driver."""
    print(json.dumps(result), flush=True)


class ErrorCounter:
    """Delivery callback counting successes and failures."""

    def __init__(self) -> None:
        self.delivered = 0
        self.errors = 0
        self.first_error = ""

    def __call__(self, err: KafkaError | None, _msg: Message) -> None:
        if err is None:
            self.delivered += 1
            return
        self.errors += 1
        self.first_error = self.first_error or str(err)


def make_producer(args: argparse.Namespace, counter: ErrorCounter, **extra: Any) -> Producer:
    """A producer whose delivery reports feed ``counter``; metadata is fetched before returning."""
    config = {
        "bootstrap.servers": args.bootstrap,
        "acks": args.acks,
        "compression.codec": "none",
        "on_delivery": counter,
        **extra,
    }
    producer = Producer(config)
    producer.list_topics(args.topic, timeout=30)
    return producer


def produce_blocking(producer: Producer, topic: str, value: bytes) -> None:
    """Enqueue one record, serving delivery reports while the local queue is full."""
    while True:
        try:
            producer.produce(topic, value)
            return
        except BufferError:
            producer.poll(0.001)


# --------------------------------------------------------------------------- throughput producer

# Large batches, a deep local queue, delivery reports only for failures.
THROUGHPUT_BATCHING: dict[str, Any] = {
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "delivery.report.only.error": True,
}


def run_produce(args: argparse.Namespace) -> None:
    """Produce ``count`` records as fast as the client allows, in large batches."""
    counter = ErrorCounter()
    producer = make_producer(args, counter, **THROUGHPUT_BATCHING)
    value = b"v" * args.size
    announce_and_wait()
    start = time.time_ns()
    for i in range(args.count):
        produce_blocking(producer, args.topic, value)
        if i % POLL_EVERY == 0:
            producer.poll(0)
    left = producer.flush(args.timeout)
    end = time.time_ns()
    finish(start_ns=start, end_ns=end, count=args.count, errors=counter.errors + left, error=counter.first_error)


# --------------------------------------------------------------------------- transactional producer


def run_txn_produce(args: argparse.Namespace) -> None:
    """Produce ``count`` records like ``produce``, in transactions of ``txn_records`` (0: idempotent, none).

    The transactional id is ``transactional_id``. Before ``ready`` (untimed) the producer gets its producer
    id (init_transactions) and sends one warm-up record (in a transaction of its own when transactional), so
    that neither getting the id nor connecting falls inside the timing; ``warmup`` in the result counts it.
    Each transaction is flushed before commit_transaction, so the commit times reported (ns, one
    per transaction) are those of EndTxn and its markers, not of sending the transaction's records.
    """
    counter = ErrorCounter()
    extra: dict[str, Any] = {"enable.idempotence": True}
    if args.txn_records:
        extra["transactional.id"] = args.transactional_id
    producer = make_producer(args, counter, **THROUGHPUT_BATCHING, **extra)
    value = b"t" * args.size
    if args.txn_records:
        producer.init_transactions(args.timeout)
        producer.begin_transaction()
    producer.produce(args.topic, value)
    producer.flush(args.timeout)
    if args.txn_records:
        producer.commit_transaction(args.timeout)
    per_txn = args.txn_records or args.count
    commits: list[int] = []
    left = 0
    announce_and_wait()
    start = time.time_ns()
    for first in range(0, args.count, per_txn):
        if args.txn_records:
            producer.begin_transaction()
        for i in range(first, min(args.count, first + per_txn)):
            produce_blocking(producer, args.topic, value)
            if i % POLL_EVERY == 0:
                producer.poll(0)
        left = producer.flush(args.timeout)
        if left:
            break
        if args.txn_records:
            began = time.perf_counter_ns()
            producer.commit_transaction(args.timeout)
            commits.append(time.perf_counter_ns() - began)
    end = time.time_ns()
    finish(
        start_ns=start, end_ns=end, count=args.count, errors=counter.errors + left, error=counter.first_error,
        commit_ns=commits, warmup=1,
    )  # fmt: skip


# --------------------------------------------------------------------------- throughput consumer


def assigned_consumer(args: argparse.Namespace, offset_of: Callable[[Consumer, int], int], **extra: Any) -> Consumer:
    """A consumer assigned (no group) to ``args.partitions`` of the topic at the offsets given."""
    consumer = Consumer({**consumer_config(args.bootstrap), "fetch.wait.max.ms": args.fetch_wait_ms, **extra})
    partitions = [int(p) for p in args.partitions.split(",")]
    consumer.assign([TopicPartition(args.topic, p, offset_of(consumer, p)) for p in partitions])
    return consumer


def count_batch(messages: list[Message]) -> tuple[int, str]:
    """Records in a consume() batch, and the first real error in it."""
    good, error = 0, ""
    for message in messages:
        err = message.error()
        if err is None:
            good += 1
        elif err.code() != KafkaError._PARTITION_EOF:
            error = error or str(err)
    return good, error


def run_consume(args: argparse.Namespace) -> None:
    """Read ``expect`` records from the beginning of the assigned partitions, prefetching up to 1M records."""
    consumer = assigned_consumer(args, lambda _c, _p: OFFSET_BEGINNING, **{"queued.min.messages": 1_000_000})
    announce_and_wait()
    start = time.time_ns()
    deadline = time.monotonic() + args.timeout
    got, error = 0, ""
    while got < args.expect and time.monotonic() < deadline:
        good, err = count_batch(consumer.consume(min(10_000, args.expect - got), 0.5))
        got, error = got + good, error or err
    end = time.time_ns()
    consumer.close()
    finish(start_ns=start, end_ns=end, count=got, error=error)


# --------------------------------------------------------------------------- latency


def stamped(size: int) -> bytes:
    """A value of ``size`` bytes starting with the current wall clock in ns."""
    return f"{time.time_ns():0{STAMP_DIGITS}d}".encode().ljust(size, b"x")


def run_latency_produce(args: argparse.Namespace) -> None:
    """Send ``rate`` stamped records per second for ``duration`` seconds, one request as soon as due."""
    counter = ErrorCounter()
    producer = make_producer(args, counter, **{"linger.ms": 0})
    total = int(args.rate * args.duration)
    announce_and_wait()
    start, sent = time.time_ns(), 0
    while sent < total:
        due = min(total, int((time.time_ns() - start) * args.rate / 1e9) + 1)
        for _ in range(due - sent):
            produce_blocking(producer, args.topic, stamped(args.size))
        sent = due
        producer.poll(0)
        time.sleep(0.0002)
    last_send = time.time_ns()
    left = producer.flush(args.timeout)
    errors = counter.errors + left
    finish(start_ns=start, end_ns=last_send, count=sent, errors=errors, error=counter.first_error)


def high_watermark(consumer: Consumer, topic: str, partition: int) -> int:
    """The partition's current end offset."""
    return int(consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)[1])


def collect_latencies(consumer: Consumer, args: argparse.Namespace) -> tuple[array[int], str]:
    """Latency in ns of each record until ``expect`` arrived or the time limit passed.

    poll() returns as soon as one record is there (consume() would wait to fill its batch).
    """
    latencies: array[int] = array("q")
    deadline, error = time.monotonic() + args.timeout, ""
    while len(latencies) < args.expect and time.monotonic() < deadline:
        message = consumer.poll(0.1)
        now = time.time_ns()
        if message is None:
            continue
        value, err = message.value(), message.error()
        if err is None and value is not None:
            latencies.append(now - int(value[:STAMP_DIGITS]))
        elif err is not None and err.code() != KafkaError._PARTITION_EOF:
            error = error or str(err)
    return latencies, error


def percentile(ordered: list[int], fraction: float) -> float:
    """Nearest-rank percentile of sorted data, in ms."""
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))
    return ordered[index] / 1e6


def run_latency_consume(args: argparse.Namespace) -> None:
    """Tail the partition from its end and report end-to-end latency percentiles."""
    consumer = assigned_consumer(args, lambda c, p: high_watermark(c, args.topic, p))
    announce_and_wait()
    start = time.time_ns()
    latencies, error = collect_latencies(consumer, args)
    end = time.time_ns()
    consumer.close()
    ordered = sorted(latencies[args.warmup :])
    summary = {f"p{name}": percentile(ordered, q) for name, q in (("50", 0.5), ("99", 0.99), ("99.9", 0.999))}
    summary["max"] = ordered[-1] / 1e6 if ordered else float("nan")
    finish(start_ns=start, end_ns=end, count=len(latencies), measured=len(ordered), error=error, **summary)


# --------------------------------------------------------------------------- small requests


def run_small(args: argparse.Namespace) -> None:
    """One record per produce request for ``duration`` seconds, at most ``window`` records outstanding.

    Waits in poll() (which returns at the first delivery report) instead of spinning, so that the
    client leaves the CPU to the broker.
    """
    counter = ErrorCounter()
    producer = make_producer(args, counter, **{"linger.ms": 0, "batch.num.messages": 1})
    value = b"s" * args.size
    announce_and_wait()
    start = time.time_ns()
    stop = start + int(args.duration * 1e9)
    while time.time_ns() < stop:
        for _ in range(args.window - len(producer)):
            produce_blocking(producer, args.topic, value)
        producer.poll(0.01)
    left = producer.flush(args.timeout)
    finish(
        start_ns=start, end_ns=time.time_ns(), count=counter.delivered, errors=counter.errors + left,
        error=counter.first_error,
    )  # fmt: skip


# --------------------------------------------------------------------------- command line

WORKERS: dict[str, Callable[[argparse.Namespace], None]] = {
    "produce": run_produce,
    "consume": run_consume,
    "latency-produce": run_latency_produce,
    "latency-consume": run_latency_consume,
    "small": run_small,
    "txn-produce": run_txn_produce,
}


def parser() -> argparse.ArgumentParser:
    """Options of every worker; each uses the ones it needs."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("worker", choices=sorted(WORKERS))
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--partitions", default="0", help="partitions to assign, comma separated")
    p.add_argument("--size", type=int, default=100, help="record value size in bytes")
    p.add_argument("--acks", default="1")
    p.add_argument("--count", type=int, default=0, help="records to produce")
    p.add_argument("--txn-records", type=int, default=0, help="records per transaction (0: no transactions)")
    p.add_argument("--transactional-id", default="bench-txn", help="transactional.id of a transactional producer")
    p.add_argument("--expect", type=int, default=0, help="records to consume")
    p.add_argument("--rate", type=float, default=1000.0, help="records per second")
    p.add_argument("--duration", type=float, default=5.0, help="seconds of load")
    p.add_argument("--window", type=int, default=1000, help="records outstanding at most")
    p.add_argument("--warmup", type=int, default=0, help="first records left out of the percentiles")
    p.add_argument("--fetch-wait-ms", type=int, default=500, help="consumer fetch.wait.max.ms")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds before giving up")
    return p


def main() -> None:
    args = parser().parse_args()
    WORKERS[args.worker](args)


if __name__ == "__main__":
    main()
