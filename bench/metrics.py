"""What metrics cost, and how fast `/metrics` answers on a broker with many partitions and groups.

1. Produce throughput with metrics on, as a ratio to metrics off, in one run: two brokers, one with its console
   listener on and scraped every SCRAPE_INTERVAL_S (far more often than Prometheus' usual 15 to 60 s), one with
   `console.listeners` empty. kcat produces N 1 KB records (linger.ms=5, batch.size=1 MB) into a fresh
   1-partition topic on each, REPEAT times with the order alternating; the medians and their ratio are printed,
   and every run is read back and counted. The request path's counters (moldau.metrics.counters) are bumped on
   both brokers, since nothing switches them off; their own cost is measured in process beside it (ns per
   produced partition and per request) and printed as a share of the produce request's time.
2. `/metrics` response time: a broker with PARTITIONS partitions (topics of 10) and GROUPS groups, each with
   committed offsets on COMMITS_PER_GROUP partitions; SCRAPES scrapes one after another, median and worst time
   and the body's size.

Run from the repository root:  python -m bench.metrics [--quick] [--records N] [--repeat N]
    [--partitions N] [--groups N] [--scrapes N] [--only ratio|scrape]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

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
from moldau.net.ports import free_port

RECORD_BYTES = 1000
SCRAPE_INTERVAL_S = 1.0
PARTITIONS_PER_TOPIC = 10
COMMITS_PER_GROUP = 10


def counter_nanoseconds() -> tuple[float, float]:
    """In process: ns per `produced` (one per partition of a Produce request) and per `request_served`."""
    from moldau.metrics.counters import BrokerCounters

    counters, n = BrokerCounters(), 1_000_000
    for i in range(10):
        counters.produced(f"topic-{i}", 1, 1)
    start = time.perf_counter()
    for _ in range(n):
        counters.produced("topic-3", 100, 100_000)
    produced = (time.perf_counter() - start) / n * 1e9
    start = time.perf_counter()
    for _ in range(n):
        counters.request_started()
        counters.request_served("Produce", 11, 0.7)
    served = (time.perf_counter() - start) / n * 1e9
    return produced, served


def produce_seconds(bootstrap: str, lines: Path, count: int) -> float:
    topic = unique_topic("metrics-bench")
    create_topic(bootstrap, topic, 1)
    seconds, _ = run_timed(["kcat", "-P", "-b", bootstrap, "-t", topic, "-p", "0", "-l", "-X", "linger.ms=5",
                            "-X", "batch.size=1000000", "-X", "compression.codec=none", "-z", "none",
                            str(lines)], timeout=300)
    verify_count(bootstrap, topic, count, timeout=120)
    return seconds


class Scraper:
    """GETs `url` every SCRAPE_INTERVAL_S in a thread, as Prometheus would (much more often)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.scrapes = 0
        self.seconds = 0.0  # spent waiting for answers
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(SCRAPE_INTERVAL_S):
            start = time.perf_counter()
            with urllib.request.urlopen(self.url, timeout=30) as response:
                response.read()
            self.seconds += time.perf_counter() - start
            self.scrapes += 1

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)


def throughput_ratio(count: int, repeat: int) -> None:
    console = f"http://127.0.0.1:{free_port()}"
    with (
        line_files("metrics", {RECORD_BYTES: count}) as files,
        running_broker("metrics off", "moldau") as off,
        running_broker("metrics on", "moldau", overrides={"console.listeners": console}) as on,
        Scraper(console + "/metrics") as scraper,
    ):
        seconds: dict[str, list[float]] = {"off": [], "on": []}
        for _, side in alternating(("off", "on"), repeat):
            broker = off if side == "off" else on
            seconds[side].append(produce_seconds(broker.bootstrap, files[RECORD_BYTES], count))
        rate_off = count / statistics.median(seconds["off"])
        rate_on = count / statistics.median(seconds["on"])
        mean_ms = scraper.seconds / max(1, scraper.scrapes) * 1000
        print(f"{'metrics off rec/s':>18} {'metrics on rec/s':>17} {'ratio':>6} {'scrapes':>8} {'ms each':>8}")
        print(f"{rate_off:18,.0f} {rate_on:17,.0f} {rate_on / rate_off:6.3f} {scraper.scrapes:8} {mean_ms:8.1f}",
              flush=True)
        # Each round's two runs are next to each other in time: their ratio cancels the machine's slower drifts.
        paired = statistics.median(off_s / on_s for off_s, on_s in zip(seconds["off"], seconds["on"], strict=True))
        print(f"median of the rounds' ratios: {paired:.3f}")
        print(f"runs (s): off {', '.join(f'{s:.2f}' for s in seconds['off'])}; "
              f"on {', '.join(f'{s:.2f}' for s in seconds['on'])}")


def populate(bootstrap: str, partitions: int, groups: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [f"scrape-{i:03d}" for i in range(partitions // PARTITIONS_PER_TOPIC)]
    for future in admin.create_topics([NewTopic(t, PARTITIONS_PER_TOPIC, 1) for t in topics],
                                      operation_timeout=60).values():
        future.result(timeout=120)
    for g in range(groups):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"scrape-group-{g:03d}", "log_level": 4})
        try:
            topic = topics[g % len(topics)]
            consumer.commit(offsets=[TopicPartition(topic, p, 0) for p in range(COMMITS_PER_GROUP)],
                            asynchronous=False)
        finally:
            consumer.close()


def scrape_times(partitions: int, groups: int, scrapes: int) -> None:
    console = f"http://127.0.0.1:{free_port()}"
    with running_broker("scraped", "moldau", overrides={"console.listeners": console}) as broker:
        started = time.monotonic()
        populate(broker.bootstrap, partitions, groups)
        print(f"{partitions} partitions and {groups} groups set up in {time.monotonic() - started:.1f} s")
        times, size = [], 0
        for _ in range(scrapes):
            start = time.perf_counter()
            with urllib.request.urlopen(console + "/metrics", timeout=60) as response:
                size = len(response.read())
            times.append((time.perf_counter() - start) * 1000)
        print(f"{'scrapes':>8} {'median ms':>10} {'max ms':>8} {'body KB':>8}")
        print(f"{scrapes:8} {statistics.median(times):10.1f} {max(times):8.1f} {size / 1024:8.0f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer records, repeats and scrapes")
    parser.add_argument("--records", type=int, help="records per run (default 200000, quick 50000)")
    parser.add_argument("--repeat", type=int, help="alternating runs per side (default 3, quick 1)")
    parser.add_argument("--partitions", type=int, default=1000, help="partitions of the scraped broker")
    parser.add_argument("--groups", type=int, default=100, help="groups with committed offsets on it")
    parser.add_argument("--scrapes", type=int, help="scrapes timed (default 20, quick 5)")
    parser.add_argument("--only", choices=("ratio", "scrape"), help="run one of the two parts")
    args = parser.parse_args()
    count = args.records or (50_000 if args.quick else 200_000)
    repeat = args.repeat or (1 if args.quick else 3)
    print(f"# Metrics cost, {count} records of {RECORD_BYTES} B, kcat {kcat_version()}")
    if args.only != "scrape":
        produced, served = counter_nanoseconds()
        print(f"counters in process: {produced:.0f} ns per produced partition, {served:.0f} ns per request")
        throughput_ratio(count, repeat)
    if args.only != "ratio":
        print(f"# /metrics with {args.partitions} partitions and {args.groups} groups")
        scrape_times(args.partitions, args.groups, args.scrapes or (5 if args.quick else 20))


if __name__ == "__main__":
    main()
