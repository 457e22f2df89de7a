"""What broker-side schema validation costs: produce throughput of 1 KB Avro records into a topic with
`confluent.value.schema.validation=true`, as a ratio to the same records into a topic without it.

One Moldau broker with its schema registry (`schema.registry.listeners`). The Avro schema is registered under both
topics' subjects through confluent-kafka's registry client; N records in Confluent's wire format (magic byte, the
registered schema id, Avro binary of about 1000 bytes, 1000 distinct records repeated) are written to a file, one
per line (the records are chosen to hold no newline byte), and kcat produces the file (`kcat -P -l`, linger.ms=5,
batch.size=1000000, acks=1) into a fresh 1-partition topic with validation and into one without, REPEAT times
with the order alternating, after one uncounted warm-up run per codec. The medians and their ratio are printed,
for throughput and for the broker's CPU time per record (user + system, from /proc; less moved by other load on
the machine than wall time; its ratio is plain over validated, so that both ratios read "share of the plain
figure kept"). Every run is read back and counted: a refused or lost record fails the run.

Run from the repository root:  python -m bench.schema_validation [--quick] [--records N] [--repeat N]
                                                                 [--codecs none,lz4]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from fastavro import parse_schema, schemaless_writer

from bench.common import (
    Broker,
    alternating,
    create_topic,
    delete_topic,
    kcat_version,
    run_timed,
    running_broker,
    scratch_dir,
    unique_topic,
    verify_count,
)
from bench.connections import cpu_seconds
from moldau.net.ports import free_port

RECORD_BYTES = 1000
DISTINCT = 1000
ORDER = {"type": "record", "name": "Order", "namespace": "bench",
         "fields": [{"name": "id", "type": "long"}, {"name": "customer", "type": "string"},
                    {"name": "amount", "type": "double"}, {"name": "note", "type": "string"}]}
VALIDATED = {"confluent.value.schema.validation": "true"}


def avro_lines(path: Path, schema_id: int, count: int) -> int:
    """Write `count` wire-format records, one per line; returns the size of one record."""
    parsed = parse_schema(ORDER)
    pool: list[bytes] = []
    i = 0
    while len(pool) < DISTINCT:
        out = io.BytesIO()
        out.write(struct.pack(">bI", 0, schema_id))
        schemaless_writer(out, parsed, {"id": i, "customer": f"customer-{i % 97}", "amount": i * 0.25,
                                        "note": "n" * (RECORD_BYTES - 40)})
        i += 1
        if b"\n" not in out.getvalue():  # kcat splits lines at newline bytes
            pool.append(out.getvalue())
    with path.open("wb") as f:
        for start in range(0, count, DISTINCT):
            f.write(b"".join(line + b"\n" for line in pool[: min(DISTINCT, count - start)]))
    return len(pool[0])


def register(url: str, subject: str) -> int:
    client = SchemaRegistryClient({"url": url})
    deadline = time.monotonic() + 30
    while True:
        try:
            return int(client.register_schema(subject, Schema(json.dumps(ORDER), "AVRO")))
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@contextlib.contextmanager
def topic_with(bootstrap: str, url: str, prefix: str, config: dict[str, Any]) -> Iterator[str]:
    topic = unique_topic(prefix)
    register(url, f"{topic}-value")
    create_topic(bootstrap, topic, 1, config)
    try:
        yield topic
    finally:
        delete_topic(bootstrap, topic)


def produce_run(broker: Broker, url: str, lines: Path, count: int, codec: str, validate: bool) -> tuple[float, float]:
    """(seconds, broker CPU seconds) of one produce run."""
    with topic_with(broker.bootstrap, url, f"schemas-{'on' if validate else 'off'}-{codec}",
                    VALIDATED if validate else {}) as topic:
        cpu = cpu_seconds(broker)
        seconds, _ = run_timed(["kcat", "-P", "-b", broker.bootstrap, "-t", topic, "-p", "0", "-l", "-X",
                                "linger.ms=5", "-X", "batch.size=1000000", "-X", f"compression.codec={codec}", "-z",
                                codec, str(lines)], timeout=300)
        cpu = cpu_seconds(broker) - cpu
        verify_count(broker.bootstrap, topic, count, timeout=120)
    return seconds, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer records and repeats")
    parser.add_argument("--codecs", default="none,lz4")
    parser.add_argument("--records", type=int, help="records per run (default 200000, quick 50000)")
    parser.add_argument("--repeat", type=int, help="alternating runs per side (default 3, quick 1)")
    args = parser.parse_args()
    count = args.records or (50_000 if args.quick else 200_000)
    repeat = args.repeat or (1 if args.quick else 3)
    url = f"http://127.0.0.1:{free_port()}"
    with running_broker("schemas", "moldau", overrides={"schema.registry.listeners": url}) as broker, \
            scratch_dir("schema-validation") as tmp:
        schema_id = register(url, "bench-warmup-value")  # one schema text, one id for every subject
        lines = tmp / "avro-lines"
        size = avro_lines(lines, schema_id, count)
        print(f"# schema validation cost, {count} Avro records of {size} B, kcat {kcat_version()}")
        print(f"{'codec':8} {'validated rec/s':>16} {'plain rec/s':>12} {'ratio':>6}   "
              f"{'broker CPU µs/record: validated':>31} {'plain':>6} {'ratio':>6}")
        for codec in args.codecs.split(","):
            produce_run(broker, url, lines, count, codec, True)  # warm-up, not counted: a fresh broker's first run
            runs: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
            for _, validate in alternating((True, False), repeat):
                runs[validate].append(produce_run(broker, url, lines, count, codec, validate))
            rate = {side: count / statistics.median(s for s, _ in runs[side]) for side in runs}
            cpu = {side: statistics.median(c for _, c in runs[side]) * 1e6 / count for side in runs}
            print(f"{codec:8} {rate[True]:16,.0f} {rate[False]:12,.0f} {rate[True] / rate[False]:6.2f}   "
                  f"{cpu[True]:31.2f} {cpu[False]:6.2f} {cpu[False] / cpu[True]:6.2f}", flush=True)


if __name__ == "__main__":
    main()
