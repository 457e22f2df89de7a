"""Share groups (KIP-932): what N share consumers on one partition deliver beside a consumer group of the same size,
and how soon a record whose acquisition lock expired is delivered again.

One Moldau node (``python -m moldau server``, the benchmarks' default command) with
``share.auto.offset.reset=earliest``, ``group.share.record.lock.duration.ms`` = ``--lock-ms`` (default 1000) and
``group.share.heartbeat.interval.ms=500``.

**Throughput.** A topic of one partition holds ``--records`` records (default 3000, quick 1000) of 100 bytes. For N
in ``--members`` (default 1,4,8), in each of ``--rounds`` rounds:

* **share N**: N confluent-kafka ``ShareConsumer`` s (threads of this process, ``max.poll.records=20``) of a fresh
  share group; each record costs ``--work-ms`` (default 1 ms, a sleep: the consumer's own processing) and is
  accepted implicitly by the member's next poll;
* **group N** (the baseline): N classic ``Consumer`` s of a fresh consumer group, taking up to 20 records per
  ``consume`` call, with the same per-record work. One partition goes to one member, so only one of them works.

Rate: distinct offsets processed divided by the time from the first record received to the last processed (the
group joins are not timed); every run must process each offset (a share run may process a record twice when a
lock expires; such repeats are counted apart). Reported per N: records/s of both, and the ratio share/group.

**Redelivery.** A share consumer in explicit mode takes ``--held`` (20) records and never acknowledges them;
another member of the group polls. The delay of each record's redelivery past its lock's expiry (the first
receipt plus ``--lock-ms``) is measured, beside the baseline of the same consumer getting a new record (from
just before it is produced to its receipt), ``--held`` times. Reported: medians and p90 of both, and their ratio.

Run from the repository root:  python -m bench.share_groups [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import Consumer, Producer, ShareConsumer

from bench.common import create_topic, exit_on_sigterm, note, running_broker

VALUE = b"x" * 100
SHARE_BATCH = 20
TIME_LIMIT_S = 180.0


def parse_args() -> argparse.Namespace:
    exit_on_sigterm()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer records, one round")
    parser.add_argument("--records", type=int, help="records of the throughput topic (default 3000, quick 1000)")
    parser.add_argument("--members", default="1,4,8", help="group sizes, comma separated")
    parser.add_argument("--work-ms", type=float, default=1.0, help="simulated processing per record (ms)")
    parser.add_argument("--lock-ms", type=int, default=1000, help="group.share.record.lock.duration.ms")
    parser.add_argument("--held", type=int, default=20, help="records held until their locks expire")
    parser.add_argument("--rounds", type=int, help="rounds per measurement, median reported (default 3, quick 1)")
    args = parser.parse_args()
    args.records = int(args.records or (1000 if args.quick else 3000))
    args.rounds = int(args.rounds or (1 if args.quick else 3))
    args.members = [int(n) for n in args.members.split(",") if n.strip()]
    return args


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for _ in range(count):
        producer.produce(topic, value=VALUE)
        producer.poll(0)
    if producer.flush(30) != 0:
        raise RuntimeError("records were not all produced")


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(pct / 100 * len(ordered)) - 1))]


# --------------------------------------------------------------------------- throughput


@dataclass
class Tally:
    """What the members of one run processed, shared between their threads."""

    expected: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    offsets: set[int] = field(default_factory=set)
    repeats: int = 0
    first_s: float | None = None
    last_s: float = 0.0
    done: threading.Event = field(default_factory=threading.Event)

    def processed(self, offset: int) -> None:
        with self.lock:
            if offset in self.offsets:
                self.repeats += 1
            self.offsets.add(offset)
            self.last_s = time.monotonic()
            if len(self.offsets) >= self.expected:
                self.done.set()

    def received(self) -> None:
        with self.lock:
            if self.first_s is None:
                self.first_s = time.monotonic()


def share_member(bootstrap: str, group: str, topic: str, tally: Tally, work_s: float) -> None:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "max.poll.records": SHARE_BATCH})
    consumer.subscribe([topic])
    try:
        while not tally.done.is_set():
            for message in consumer.poll(0.2):
                if message.error() is not None:
                    continue
                tally.received()
                time.sleep(work_s)
                tally.processed(message.offset() or 0)
        consumer.poll(0.2)  # accept the last records processed
    finally:
        consumer.close()


def group_member(bootstrap: str, group: str, topic: str, tally: Tally, work_s: float) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": True})
    consumer.subscribe([topic])
    try:
        while not tally.done.is_set():
            for message in consumer.consume(SHARE_BATCH, 0.2):
                if message.error() is not None:
                    continue
                tally.received()
                time.sleep(work_s)
                tally.processed(message.offset() or 0)
    finally:
        consumer.close()


Member = Callable[[str, str, str, Tally, float], None]


def timed_run(bootstrap: str, topic: str, records: int, members: int, member: Member, work_s: float
              ) -> tuple[float, int]:
    """Records/s of one run of `members` threads, and the records processed twice."""
    tally = Tally(records)
    group = f"bench-{uuid.uuid4().hex[:8]}"
    threads = [threading.Thread(target=member, args=(bootstrap, group, topic, tally, work_s), daemon=True)
               for _ in range(members)]
    for thread in threads:
        thread.start()
    if not tally.done.wait(TIME_LIMIT_S):
        tally.done.set()
        raise RuntimeError(f"only {len(tally.offsets)} of {records} records processed in {TIME_LIMIT_S:.0f}s")
    for thread in threads:
        thread.join(30)
    assert tally.first_s is not None
    return records / max(tally.last_s - tally.first_s, 1e-6), tally.repeats


def throughput(args: argparse.Namespace, bootstrap: str) -> list[str]:
    topic = f"share-bench-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, args.records)
    work_s = args.work_ms / 1000
    lines = [f"throughput: {args.records} records of {len(VALUE)} B on one partition, {args.work_ms:g} ms of work "
             f"per record, median of {args.rounds} round(s)",
             f"{'members':>7}  {'share rec/s':>11}  {'group rec/s':>11}  {'share/group':>11}  {'repeats':>7}"]
    for members in args.members:
        share: list[float] = []
        group: list[float] = []
        repeats = 0
        for round_ in range(args.rounds):
            # Alternate which goes first, so neither always meets a warmer broker.
            order = [("share", share_member), ("group", group_member)]
            for label, member in order if round_ % 2 == 0 else order[::-1]:
                note(f"{label} x{members}, round {round_ + 1}")
                rate, again = timed_run(bootstrap, topic, args.records, members, member, work_s)
                (share if label == "share" else group).append(rate)
                repeats += again
        s, g = statistics.median(share), statistics.median(group)
        lines.append(f"{members:>7}  {s:>11.0f}  {g:>11.0f}  {s / g:>11.2f}  {repeats:>7}")
    return lines


# --------------------------------------------------------------------------- redelivery


def redelivery(args: argparse.Namespace, bootstrap: str) -> list[str]:
    topic = f"share-redeliver-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    group = f"bench-{uuid.uuid4().hex[:8]}"
    poller = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    poller.subscribe([topic])
    holder = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                            "share.acknowledgement.mode": "explicit", "max.poll.records": args.held})
    holder.subscribe([topic])
    try:
        fresh = new_record_latencies(bootstrap, topic, poller, args.held)
        late = expiry_delays(bootstrap, topic, poller, holder, args)
    finally:
        holder.close()
        poller.close()
    f50, l50 = statistics.median(fresh), statistics.median(late)
    return [f"redelivery: {args.held} records held past a {args.lock_ms} ms lock, beside {args.held} new records",
            f"{'':>24}  {'p50 ms':>7}  {'p90 ms':>7}",
            f"{'new record delivered':>24}  {f50:>7.1f}  {percentile(fresh, 90):>7.1f}",
            f"{'redelivered past expiry':>24}  {l50:>7.1f}  {percentile(late, 90):>7.1f}",
            f"redelivery delay / new-record latency (p50): {l50 / f50:.2f}"]


def new_record_latencies(bootstrap: str, topic: str, poller: ShareConsumer, count: int) -> list[float]:
    """From just before a record is produced to the polling member's receipt of that record, one at a time."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    produce_one(producer, topic)
    receive(poller, lambda offset: True)  # the member has joined and fetches
    out = []
    for _ in range(count):
        started = time.monotonic()
        offset = produce_one(producer, topic)
        out.append((receive(poller, offset.__eq__) - started) * 1000)
    return out


def produce_one(producer: Producer, topic: str) -> int:
    """Produce one record and wait for it to be written; its offset."""
    written: list[int] = []
    producer.produce(topic, value=VALUE, on_delivery=lambda err, msg: written.append(msg.offset() or 0))
    producer.flush(10)
    if not written:
        raise RuntimeError("a record was not produced")
    return written[0]


def receive(consumer: ShareConsumer, wanted: Callable[[int], bool]) -> float:
    """When a record `wanted` accepts (by offset) is received; others are accepted and skipped."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for message in consumer.poll(0.05):
            if message.error() is None and wanted(message.offset() or 0):
                return time.monotonic()
    raise RuntimeError("the share consumer never got the record")


def expiry_delays(bootstrap: str, topic: str, poller: ShareConsumer, holder: ShareConsumer,
                  args: argparse.Namespace) -> list[float]:
    """The held records' redelivery to the polling member, in ms past their locks' expiry."""
    produce(bootstrap, topic, args.held)
    held_at: dict[int, float] = {}
    deadline = time.monotonic() + 60
    while len(held_at) < args.held and time.monotonic() < deadline:
        for message in holder.poll(0.2):  # never acknowledged: the locks run out
            if message.error() is None:
                held_at.setdefault(message.offset() or 0, time.monotonic())
    if len(held_at) < args.held:
        raise RuntimeError(f"the holder got {len(held_at)} of {args.held} records")
    delays: list[float] = []
    deadline = time.monotonic() + 60 + args.lock_ms / 1000
    while len(delays) < args.held and time.monotonic() < deadline:
        for message in poller.poll(0.05):
            if message.error() is None and message.offset() in held_at:
                expiry = held_at.pop(message.offset() or 0) + args.lock_ms / 1000
                delays.append((time.monotonic() - expiry) * 1000)
    if len(delays) < args.held:
        raise RuntimeError(f"only {len(delays)} of {args.held} held records were delivered again")
    return delays


def main() -> None:
    args = parse_args()
    overrides = {"share.auto.offset.reset": "earliest", "group.share.record.lock.duration.ms": str(args.lock_ms),
                 "group.share.heartbeat.interval.ms": "500"}
    with running_broker("moldau", "moldau", overrides=overrides) as broker:
        note(f"settings: {overrides}")
        lines = throughput(args, broker.bootstrap)
        lines += ["", *redelivery(args, broker.bootstrap)]
        problems = [line for line in broker.log.read_text(errors="replace").splitlines()
                    if "internal error" in line or "Traceback" in line]
    print("\n".join(lines))
    if problems:
        print(f"broker log problems ({len(problems)}):\n" + "\n".join(problems[:5]))


if __name__ == "__main__":
    main()
