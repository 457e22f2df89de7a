"""Transactional client processes for tests, run as `python -m tests.support.txn_processor <mode> ...`.

`process`: a confluent-kafka consume-transform-produce loop with exactly-once semantics. A read_committed group
member reads the input; each batch's transforms (value `T(<input value>)`, same key) go to the output in one
transaction together with the consumed offsets (`send_offsets_to_transaction`). With `--stop-after N
--stop-at produced|offsets`, the N+1st transaction stops half done (its records acknowledged, and with `offsets`
its offsets sent too), prints `MID-TXN ...` and waits to be killed. Without, it runs until the committed
positions reach the input's end and prints `DONE`.

`abandon`: begins a transaction, produces records and has them acknowledged, prints `OPEN` and waits to be
killed: a producer that dies with its transaction open.

Progress goes to stdout one line at a time (flushed), for the test to follow.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition


def say(line: str) -> None:
    print(line, flush=True)


def process(args: argparse.Namespace) -> None:
    producer = Producer({"bootstrap.servers": args.bootstrap, "transactional.id": args.txn_id, "linger.ms": 5,
                         "transaction.timeout.ms": 60000})
    # Fences an earlier incarnation and aborts its open transaction before the group's offsets are read.
    producer.init_transactions(30)
    consumer = Consumer({
        "bootstrap.servers": args.bootstrap, "group.id": args.group, "group.instance.id": f"{args.txn_id}-member",
        "isolation.level": "read_committed", "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "enable.metrics.push": False,
    })
    partitions = len(consumer.list_topics(args.input, timeout=10).topics[args.input].partitions)
    ends = {p: consumer.get_watermark_offsets(TopicPartition(args.input, p), timeout=10)[1]
            for p in range(partitions)}
    consumer.subscribe([args.input])
    say(f"STARTED ends={sorted(ends.items())}")
    committed_txns = 0
    while True:
        batch = consumer.consume(num_messages=args.batch, timeout=0.5)
        for msg in batch:
            error = msg.error()
            if error is not None:
                raise RuntimeError(f"consume error: {error}")
        assignment = consumer.assignment()
        if batch:
            producer.begin_transaction()
            for msg in batch:
                producer.produce(args.output, key=msg.key(), value=b"T(" + (msg.value() or b"") + b")")
                producer.poll(0)
            stopping = args.stop_after is not None and committed_txns == args.stop_after
            if stopping and args.stop_at == "produced":
                producer.flush(30)
                say(f"MID-TXN produced={len(batch)}")
                time.sleep(3600)
            consumed: dict[int, int] = {}
            for msg in batch:
                partition, offset = msg.partition(), msg.offset()
                assert partition is not None and offset is not None
                consumed[partition] = max(consumed.get(partition, 0), offset + 1)
            offsets = [TopicPartition(args.input, p, offset) for p, offset in sorted(consumed.items())]
            producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
            if stopping:
                producer.flush(30)
                say(f"MID-TXN produced={len(batch)} offsets-sent")
                time.sleep(3600)
            producer.commit_transaction(30)
            committed_txns += 1
            say(f"COMMITTED {committed_txns} records={len(batch)}")
        if len(assignment) == partitions and not batch:
            committed = consumer.committed(assignment, timeout=10)
            if all(tp.offset >= ends[tp.partition] for tp in committed):
                say("DONE")
                consumer.close()
                return


def abandon(args: argparse.Namespace) -> None:
    producer = Producer({"bootstrap.servers": args.bootstrap, "transactional.id": args.txn_id, "linger.ms": 5,
                         "transaction.timeout.ms": args.timeout_ms})
    producer.init_transactions(30)
    producer.begin_transaction()
    failures: list[Any] = []
    for i in range(args.count):
        producer.produce(args.topic, partition=args.partition, value=f"abandoned-{i}".encode(),
                         on_delivery=lambda err, _msg: failures.append(err) if err is not None else None)
    producer.flush(30)
    if failures:
        raise RuntimeError(f"produce failed: {failures[:3]}")
    say("OPEN")
    time.sleep(3600)


def main() -> None:
    parser = argparse.ArgumentParser(prog="txn_processor")
    modes = parser.add_subparsers(dest="mode", required=True)
    p = modes.add_parser("process")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--txn-id", required=True)
    p.add_argument("--batch", type=int, default=50)
    p.add_argument("--stop-after", type=int)
    p.add_argument("--stop-at", choices=["produced", "offsets"], default="produced")
    a = modes.add_parser("abandon")
    a.add_argument("--bootstrap", required=True)
    a.add_argument("--topic", required=True)
    a.add_argument("--partition", type=int, default=0)
    a.add_argument("--txn-id", required=True)
    a.add_argument("--timeout-ms", type=int, required=True)
    a.add_argument("--count", type=int, default=5)
    args = parser.parse_args()
    process(args) if args.mode == "process" else abandon(args)


if __name__ == "__main__":
    main()
