"""What broker-side schema validation costs: produce throughput of 1 KB records into a topic with
`confluent.value.schema.validation=true`, as a ratio to the same records into a topic without it.

One Moldau broker with its schema registry (`schema.registry.listeners`). For each format (Avro by default; JSON
Schema and Protobuf on request) the schema of an order record is registered under both topics' subjects through
confluent-kafka's registry client; N records in Confluent's wire format (magic byte, the registered schema id, for
Protobuf the message indexes, then about 1000 bytes of data; 1000 distinct records repeated) are written to a file,
one per line (records holding a newline byte are skipped), and kcat produces the file (`kcat -P -l`,
linger.ms=5, batch.size=1000000, acks=1) into a fresh 1-partition topic with validation and into one without,
REPEAT times with the order alternating, after one uncounted warm-up run per format and codec. The medians and
their ratio are printed, for throughput and for the broker's CPU time per record (user + system, from /proc; less
moved by other load on the machine than wall time; its ratio is plain over validated, so that both ratios read
"share of the plain figure kept"). Every run is read back and counted: a refused or lost record fails the run.

Run from the repository root:  python -m bench.schema_validation [--quick] [--records N] [--repeat N]
                                   [--codecs none,lz4] [--formats avro,json,protobuf]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
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
NOTE = "n" * (RECORD_BYTES - 40)
VALIDATED = {"confluent.value.schema.validation": "true"}
AVRO_ORDER = {"type": "record", "name": "Order", "namespace": "bench",
              "fields": [{"name": "id", "type": "long"}, {"name": "customer", "type": "string"},
                         {"name": "amount", "type": "double"}, {"name": "note", "type": "string"}]}
JSON_ORDER = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "bench.Order", "type": "object",
              "properties": {"id": {"type": "integer"}, "customer": {"type": "string"},
                             "amount": {"type": "number"}, "note": {"type": "string"}},
              "required": ["id", "customer", "amount", "note"]}
PROTOBUF_ORDER = """syntax = "proto3";
package bench;
message Order { int64 id = 1; string customer = 2; double amount = 3; string note = 4; }
"""


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _avro_body(i: int) -> bytes:
    out = io.BytesIO()
    schemaless_writer(out, parse_schema(AVRO_ORDER), {"id": i, "customer": f"customer-{i % 97}", "amount": i / 4,
                                                      "note": NOTE})
    return out.getvalue()


def _json_body(i: int) -> bytes:
    return json.dumps({"id": i, "customer": f"customer-{i % 97}", "amount": i / 4, "note": NOTE}).encode()


def _protobuf_body(i: int) -> bytes:
    # Message indexes [0] (the single byte 0), then Order: id (varint), customer and note (length-delimited),
    # amount (64-bit), encoded by hand as Confluent's serializer would.
    customer = f"customer-{i % 97}".encode()
    return (b"\x00\x08" + _varint(i) + b"\x12" + _varint(len(customer)) + customer + b"\x19" + struct.pack("<d", i / 4)
            + b"\x22" + _varint(len(NOTE)) + NOTE.encode())


@dataclass(frozen=True)
class Format:
    schema_type: str
    schema: str
    body: Callable[[int], bytes]


FORMATS = {
    "avro": Format("AVRO", json.dumps(AVRO_ORDER), _avro_body),
    "json": Format("JSON", json.dumps(JSON_ORDER), _json_body),
    "protobuf": Format("PROTOBUF", PROTOBUF_ORDER, _protobuf_body),
}


def write_lines(path: Path, schema_id: int, body: Callable[[int], bytes], count: int) -> int:
    """Write `count` wire-format records, one per line; returns the size of one record."""
    pool: list[bytes] = []
    i = 0
    while len(pool) < DISTINCT:
        record = struct.pack(">bI", 0, schema_id) + body(i)
        i += 1
        if b"\n" not in record:  # kcat splits lines at newline bytes
            pool.append(record)
    with path.open("wb") as f:
        for start in range(0, count, DISTINCT):
            f.write(b"".join(line + b"\n" for line in pool[: min(DISTINCT, count - start)]))
    return len(pool[0])


def register(url: str, subject: str, schema_format: Format) -> int:
    client = SchemaRegistryClient({"url": url})
    deadline = time.monotonic() + 30
    while True:
        try:
            return int(client.register_schema(subject, Schema(schema_format.schema, schema_format.schema_type)))
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@contextlib.contextmanager
def topic_with(bootstrap: str, url: str, prefix: str, schema_format: Format, config: dict[str, Any]) -> Iterator[str]:
    topic = unique_topic(prefix)
    register(url, f"{topic}-value", schema_format)
    create_topic(bootstrap, topic, 1, config)
    try:
        yield topic
    finally:
        delete_topic(bootstrap, topic)


@dataclass(frozen=True)
class Run:
    broker: Broker
    url: str
    lines: Path
    count: int
    schema_format: Format

    def produce(self, codec: str, validate: bool) -> tuple[float, float]:
        """(seconds, broker CPU seconds) of one produce run."""
        broker = self.broker
        with topic_with(broker.bootstrap, self.url, f"schemas-{'on' if validate else 'off'}-{codec}",
                        self.schema_format, VALIDATED if validate else {}) as topic:
            cpu = cpu_seconds(broker)
            seconds, _ = run_timed(["kcat", "-P", "-b", broker.bootstrap, "-t", topic, "-p", "0", "-l", "-X",
                                    "linger.ms=5", "-X", "batch.size=1000000", "-X", f"compression.codec={codec}",
                                    "-z", codec, str(self.lines)], timeout=300)
            cpu = cpu_seconds(broker) - cpu
            verify_count(broker.bootstrap, topic, self.count, timeout=120)
        return seconds, cpu


def measure(run: Run, name: str, codec: str, repeat: int) -> None:
    run.produce(codec, True)  # warm-up, not counted: a fresh broker's first run, the format's first records
    runs: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for _, validate in alternating((True, False), repeat):
        runs[validate].append(run.produce(codec, validate))
    rate = {side: run.count / statistics.median(s for s, _ in runs[side]) for side in runs}
    cpu = {side: statistics.median(c for _, c in runs[side]) * 1e6 / run.count for side in runs}
    print(f"{name:9} {codec:6} {rate[True]:16,.0f} {rate[False]:12,.0f} {rate[True] / rate[False]:6.2f}   "
          f"{cpu[True]:31.2f} {cpu[False]:6.2f} {cpu[False] / cpu[True]:6.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer records and repeats")
    parser.add_argument("--formats", default="avro", help="comma list of avro, json, protobuf")
    parser.add_argument("--codecs", default="none,lz4")
    parser.add_argument("--records", type=int, help="records per run (default 200000, quick 50000)")
    parser.add_argument("--repeat", type=int, help="alternating runs per side (default 3, quick 1)")
    args = parser.parse_args()
    count = args.records or (50_000 if args.quick else 200_000)
    repeat = args.repeat or (1 if args.quick else 3)
    url = f"http://127.0.0.1:{free_port()}"
    with running_broker("schemas", "moldau", overrides={"schema.registry.listeners": url}) as broker, \
            scratch_dir("schema-validation") as tmp:
        print(f"# schema validation cost, {count} records of about {RECORD_BYTES} B, kcat {kcat_version()}")
        print(f"{'format':9} {'codec':6} {'validated rec/s':>16} {'plain rec/s':>12} {'ratio':>6}   "
              f"{'broker CPU µs/record: validated':>31} {'plain':>6} {'ratio':>6}")
        for name in args.formats.split(","):
            schema_format = FORMATS[name]
            # One schema text has one id, whichever subject registers it.
            schema_id = register(url, f"bench-{name}-value", schema_format)
            lines = tmp / f"{name}-lines"
            write_lines(lines, schema_id, schema_format.body, count)
            for codec in args.codecs.split(","):
                measure(Run(broker, url, lines, count, schema_format), name, codec, repeat)


if __name__ == "__main__":
    main()
