"""What connections cost the broker's memory, and whether hostile ones slow normal clients.

One Moldau node. After a warm-up produce, its RSS (VmRSS of /proc/PID/status) is the baseline; then IDLE
connections are opened and left silent, then STALLED ones that each announce a frame of 100 MiB, send 1000 bytes
of it and stop; RSS is read after each step and divided by the count. kcat produces N 1000 B records
(linger.ms=5, batch.size=1000000, so requests of about 1 MB) with no other connection open, and again with the
idle and stalled ones open, REPEAT times with the order alternating; the medians of records/s and of the
broker's CPU time per record (less disturbed by other load on the machine) and their ratios are printed.
Then every extra connection is closed and RSS is read again 5 s later (RSS is noted around the first loaded
run). Every run is read back and counted.

Run from the repository root:  python -m bench.connections [--quick] [--idle N] [--stalled N] [--records N]
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import statistics
import struct
import time
from dataclasses import dataclass
from pathlib import Path

from bench.common import (
    Broker,
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


@dataclass(frozen=True)
class Run:
    records_per_s: float
    cpu_us_per_record: float  # the broker's; unlike wall time, hardly moved by other load on the machine

ANNOUNCED = 100 * 2**20 - 1  # just under socket.request.max.bytes
SENT = 1000


def rss_mb(broker: Broker) -> float:
    with open(f"/proc/{broker.proc.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def settled_rss_mb(broker: Broker, seconds: float = 2.0) -> float:
    time.sleep(seconds)
    return rss_mb(broker)


def cpu_seconds(broker: Broker) -> float:
    """The broker's user + system CPU time so far."""
    fields = Path(f"/proc/{broker.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce_rate(broker: Broker, lines: Path, count: int) -> Run:
    topic = unique_topic("connections")
    create_topic(broker.bootstrap, topic, 1)
    cpu = cpu_seconds(broker)
    seconds, _ = run_timed(["kcat", "-P", "-b", broker.bootstrap, "-t", topic, "-p", "0", "-l", "-X", "linger.ms=5",
                            "-X", "batch.size=1000000", str(lines)], timeout=300)
    cpu = cpu_seconds(broker) - cpu
    verify_count(broker.bootstrap, topic, count, timeout=120)
    return Run(count / seconds, cpu * 1e6 / count)


def open_idle(broker: Broker, count: int) -> list[socket.socket]:
    return [socket.create_connection(("127.0.0.1", broker.port), timeout=10) for _ in range(count)]


def open_stalled(broker: Broker, count: int) -> list[socket.socket]:
    sockets = open_idle(broker, count)
    for sock in sockets:
        sock.sendall(struct.pack(">i", ANNOUNCED) + b"x" * SENT)
    return sockets


def close_all(sockets: list[socket.socket]) -> None:
    for sock in sockets:
        sock.close()


def loaded_rate(broker: Broker, lines: Path, count: int, idle: int, stalled: int,
                figures: dict[str, float]) -> Run:
    """Produce with `idle` and `stalled` connections open. The first time, note RSS in `figures`: before they
    open, with the idle ones, with the stalled ones too, and 5 s after they all closed."""
    first = not figures
    if first:
        figures["before"] = rss_mb(broker)
    idle_socks = open_idle(broker, idle)
    if first:
        figures["idle"] = settled_rss_mb(broker)
    stalled_socks = open_stalled(broker, stalled)
    if first:
        figures["stalled"] = settled_rss_mb(broker)
    try:
        return produce_rate(broker, lines, count)
    finally:
        close_all(idle_socks + stalled_socks)
        if first:
            figures["closed"] = settled_rss_mb(broker, 5.0)


def raise_open_file_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(needed, soft)), hard))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer connections, records and repeats")
    parser.add_argument("--idle", type=int, help="idle connections (default 3000, quick 1000)")
    parser.add_argument("--stalled", type=int, help="stalled half-frame connections (default 500, quick 200)")
    parser.add_argument("--records", type=int, help="records per produce run (default 200000, quick 50000)")
    parser.add_argument("--repeat", type=int, help="alternating produce runs per side (default 3, quick 1)")
    args = parser.parse_args()
    idle = args.idle or (1000 if args.quick else 3000)
    stalled = args.stalled or (200 if args.quick else 500)
    count = args.records or (50_000 if args.quick else 200_000)
    repeat = args.repeat or (1 if args.quick else 3)
    raise_open_file_limit(idle + stalled + 256)
    print(f"# connection memory, {idle} idle and {stalled} stalled connections; produce of {count} records of "
          f"{RECORD_BYTES} B, kcat {kcat_version()}")
    with line_files("connections", {RECORD_BYTES: count}) as files, running_broker("connections", "moldau") as broker:
        lines = files[RECORD_BYTES]
        produce_rate(broker, lines, count)  # warm-up
        time.sleep(2)
        rates: dict[str, list[Run]] = {"alone": [], "loaded": []}
        figures: dict[str, float] = {}
        for _, side in alternating(("alone", "loaded"), repeat):
            if side == "alone":
                rates["alone"].append(produce_rate(broker, lines, count))
            else:
                rates["loaded"].append(loaded_rate(broker, lines, count, idle, stalled, figures))
    baseline, closed = figures["before"], figures["closed"]
    per_idle_kb = (figures["idle"] - baseline) * 1024 / idle
    per_stalled_kb = (figures["stalled"] - figures["idle"]) * 1024 / stalled
    rows = [("RSS before they open", baseline, ""),
            (f"RSS with {idle} idle", figures["idle"], f"{per_idle_kb:6.1f} KB each"),
            (f"RSS with {stalled} stalled more", figures["stalled"], f"{per_stalled_kb:6.1f} KB each"),
            ("RSS 5 s after all closed", closed, f"{closed - baseline:+6.0f} MB vs baseline")]
    for label, mb, note in rows:
        print(f"{label:32}{mb:6.0f} MB   {note}")
    for what, key in (("produce records/s", "records_per_s"), ("broker CPU µs/record", "cpu_us_per_record")):
        pairs = [(getattr(a, key), getattr(b, key)) for a, b in zip(rates["alone"], rates["loaded"], strict=True)]
        alone = statistics.median(a for a, _ in pairs)
        loaded = statistics.median(b for _, b in pairs)
        rounds = ", ".join(f"{a:,.1f}/{b:,.1f}" for a, b in pairs)
        print(f"{what}: alone {alone:,.1f}, with the connections open {loaded:,.1f}: ratio of medians "
              f"{loaded / alone:.2f}, median of per-round ratios {statistics.median(b / a for a, b in pairs):.2f}\n"
              f"  rounds (alone/loaded): {rounds}")

if __name__ == "__main__":
    main()
