"""What broker-side recompression costs: produce throughput into a topic whose compression.type differs from
the producer's codec, as a ratio to the same producer writing into a topic that keeps batches as sent.

For each producer codec (default lz4) kcat produces N 1 KB records (linger.ms=5, batch.size=1 MB) into a fresh
1-partition topic with compression.type=producer (the matching path: batches stored as they came) and into one
with compression.type=TARGET (default zstd: every batch decompressed and compressed again), REPEAT times with
the order alternating, on one broker; the medians and their ratio are printed. Every run is read back and
counted: a lost record fails the run.

Then, in process (no broker, no client: the produce path's own work on one batch), the same comparison per
batch of 1,000 records of 1 KB: the matching path's record walk (decompress and check every record) against
recompression followed by that walk, median of 30, as records/s and their ratio.

Run from the repository root:  python -m bench.recompression [--quick] [--codecs lz4,gzip] [--target zstd]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder

from bench.common import (
    alternating,
    create_topic,
    kcat_version,
    line_files,
    run_timed,
    running_broker,
    unique_topic,
    verify_count,
)
from moldau.protocol.compression import CODECS, Compression
from moldau.protocol.recompression import recompress
from moldau.protocol.record_batch import BatchHeader, split_batches
from moldau.protocol.record_validation import validate_batch_records

RECORD_BYTES = 1000


def produce_seconds(bootstrap: str, lines: Path, count: int, codec: str, stored_as: str) -> float:
    topic = unique_topic(f"recompress-{codec}-{stored_as}")
    create_topic(bootstrap, topic, 1, {"compression.type": stored_as})
    seconds, _ = run_timed(["kcat", "-P", "-b", bootstrap, "-t", topic, "-p", "0", "-l", "-X", "linger.ms=5",
                            "-X", "batch.size=1000000", "-X", f"compression.codec={codec}", "-z", codec,
                            str(lines)], timeout=300)
    verify_count(bootstrap, topic, count, timeout=120)
    return seconds


def in_process(codec: str, target: str, rounds: int = 30, records: int = 1000) -> tuple[float, float]:
    """Records/s of the produce path's work on one batch: as sent (walk only) and recompressed (then walked)."""
    builder = DefaultRecordBatchBuilder(2, CODECS["lz4" if codec == "lz4" else codec], False, -1, -1, -1, 1 << 24)
    for i in range(records):
        builder.append(i, 1_700_000_000_000 + i, None, (b"%08d" % i) * (RECORD_BYTES // 8), [])
    batches = split_batches(bytes(builder.build()))
    goal = Compression(target)

    def walk(found: list[tuple[BatchHeader, memoryview]]) -> None:
        for header, view in found:
            validate_batch_records(view, header, from_client=True)

    timings: dict[str, list[float]] = {"as sent": [], "recompressed": []}
    for _ in range(rounds):
        start = time.perf_counter()
        walk(batches)
        timings["as sent"].append(time.perf_counter() - start)
        start = time.perf_counter()
        walk(recompress(batches, goal) or batches)
        timings["recompressed"].append(time.perf_counter() - start)
    return records / statistics.median(timings["as sent"]), records / statistics.median(timings["recompressed"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer records and repeats")
    parser.add_argument("--codecs", default="lz4", help="the producer's codecs")
    parser.add_argument("--target", default="zstd", help="the topic's compression.type")
    parser.add_argument("--records", type=int, help="records per run (default 200000, quick 50000)")
    parser.add_argument("--repeat", type=int, help="alternating runs per side (default 3, quick 1)")
    args = parser.parse_args()
    count = args.records or (50_000 if args.quick else 200_000)
    repeat = args.repeat or (1 if args.quick else 3)
    print(f"# recompression cost, {count} records of {RECORD_BYTES} B into a {args.target} topic, "
          f"kcat {kcat_version()}")
    print(f"{'producer':8} {'as sent rec/s':>14} {'recompressed rec/s':>19} {'ratio':>6}")
    with line_files("recompression", {RECORD_BYTES: count}) as files, running_broker("broker", "moldau") as broker:
        for codec in args.codecs.split(","):
            seconds: dict[str, list[float]] = {"producer": [], args.target: []}
            for _, stored_as in alternating(("producer", args.target), repeat):
                seconds[stored_as].append(produce_seconds(broker.bootstrap, files[RECORD_BYTES], count, codec,
                                                          stored_as))
            as_sent = count / statistics.median(seconds["producer"])
            recompressed = count / statistics.median(seconds[args.target])
            print(f"{codec:8} {as_sent:14,.0f} {recompressed:19,.0f} {recompressed / as_sent:6.2f}", flush=True)
    print(f"# in process, one batch of 1000 records of {RECORD_BYTES} B into a {args.target} topic")
    print(f"{'producer':8} {'as sent rec/s':>14} {'recompressed rec/s':>19} {'ratio':>6}")
    for codec in args.codecs.split(","):
        as_sent, recompressed = in_process(codec, args.target)
        print(f"{codec:8} {as_sent:14,.0f} {recompressed:19,.0f} {recompressed / as_sent:6.2f}", flush=True)


if __name__ == "__main__":
    main()
