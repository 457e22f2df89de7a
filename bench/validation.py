"""What record-level validation costs: produce throughput with every record walked, as a ratio to the same
broker with the walk switched off (the MOLDAU_DEBUG_SKIP_RECORD_WALK debug switch, never a user config).

For each codec (default none, lz4, zstd, gzip) kcat produces N 1 KB records (linger.ms=5, batch.size=1 MB)
into a fresh 1-partition topic, once on a broker with validation and once on one without, REPEAT times with
the order alternating; the medians and their ratio are printed. Both brokers run in the same session, so machine
noise falls on both sides. Every run is read back and counted: a lost record fails the run.

Run from the repository root:  python -m bench.validation [--quick] [--codecs none,lz4] [--records N]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

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

RECORD_BYTES = 1000
SKIP_WALK = {"MOLDAU_DEBUG_SKIP_RECORD_WALK": "1"}


def produce_seconds(bootstrap: str, lines: Path, count: int, codec: str) -> float:
    topic = unique_topic(f"validation-{codec}")
    create_topic(bootstrap, topic, 1)
    seconds, _ = run_timed(["kcat", "-P", "-b", bootstrap, "-t", topic, "-p", "0", "-l", "-X", "linger.ms=5",
                            "-X", "batch.size=1000000", "-X", f"compression.codec={codec}", "-z", codec,
                            str(lines)], timeout=300)
    verify_count(bootstrap, topic, count, timeout=120)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer records and repeats")
    parser.add_argument("--codecs", default="none,lz4,zstd,gzip")
    parser.add_argument("--records", type=int, help="records per run (default 200000, quick 50000)")
    parser.add_argument("--repeat", type=int, help="alternating runs per side (default 3, quick 1)")
    args = parser.parse_args()
    count = args.records or (50_000 if args.quick else 200_000)
    repeat = args.repeat or (1 if args.quick else 3)
    print(f"# record validation cost, {count} records of {RECORD_BYTES} B, kcat {kcat_version()}")
    print(f"{'codec':8} {'walk on rec/s':>14} {'walk off rec/s':>15} {'ratio':>6}")
    with (
        line_files("validation", {RECORD_BYTES: count}) as files,
        running_broker("walk on", "moldau") as on,
        running_broker("walk off", "moldau", SKIP_WALK) as off,
    ):
        for codec in args.codecs.split(","):
            seconds: dict[str, list[float]] = {"on": [], "off": []}
            for _, side in alternating(("on", "off"), repeat):
                broker = on if side == "on" else off
                seconds[side].append(produce_seconds(broker.bootstrap, files[RECORD_BYTES], count, codec))
            rate_on = count / statistics.median(seconds["on"])
            rate_off = count / statistics.median(seconds["off"])
            print(f"{codec:8} {rate_on:14,.0f} {rate_off:15,.0f} {rate_on / rate_off:6.2f}", flush=True)


if __name__ == "__main__":
    main()
