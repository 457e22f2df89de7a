"""A seeded simulation of incremental fetch sessions (KIP-227): a fetcher's side (moldau.replication.fetch_session)
against the broker's cache (moldau.server.fetch_sessions), on a manual clock, over partitions whose logs grow, whose
high watermarks and log starts move, while the fetcher starts and stops fetching partitions, responses are lost
(the broker saw the request, the fetcher never hears back), other fetchers fill the cache and evict the session.

The broker's side serves a request as the Fetch handler does: the session's rules on the id and epoch, the listed
and forgotten partitions applied to the session, every partition of the session read, and only those with records,
an error or a moved offset answered (`CachedPartition.must_send`).

Checked at every answer, against the logs themselves:
- a partition's records arrive from exactly the fetcher's position on: nothing lost, nothing skipped, nothing twice;
  the only jump forward is an OFFSET_OUT_OF_RANGE to the log start, past records that retention removed;
- the answer names only partitions the fetcher fetches (the two sides agree about what the session holds);
- the cache never holds more sessions than its slots.
At the end, with no more losses or appends and every partition fetched again, a few rounds bring the fetcher to
every log's high watermark and tell it every high watermark and log start; then an incremental round lists and
answers nothing.

Replay one seed: `python -m tests.sim.fetch_session_simulation --seed N`.
"""

from __future__ import annotations

import argparse
import random
from collections import Counter
from dataclasses import dataclass, field

from moldau.protocol.errors import ErrorCode
from moldau.protocol.fetch_metadata import FINAL_EPOCH, INVALID_SESSION_ID
from moldau.replication.fetch_session import FetcherSession, FetchPlan
from moldau.server.fetch_sessions import CachedPartition, FetchSessionCache

STEPS = 300
EVICTION_MS = 1000
MAX_RECORDS = 4  # per partition per answer (the partition's max bytes, in records)
Key = tuple[str, int]
Position = tuple[int, int]  # (fetch offset, partition max records)


@dataclass
class Log:
    records: list[int] = field(default_factory=list)  # the value at each offset (offset * 1000 + partition)
    high_watermark: int = 0
    log_start: int = 0


@dataclass
class Answer:
    error: ErrorCode
    session_id: int
    partitions: dict[Key, tuple[ErrorCode, list[int], int, int, int]]  # error, records, from offset, hw, log start


class Broker:
    """The Fetch handler's session steps over in-memory logs."""

    def __init__(self, cache: FetchSessionCache, logs: dict[Key, Log]) -> None:
        self.cache = cache
        self.logs = logs

    def serve(self, plan: FetchPlan[Key, Position], privileged: bool, now: float) -> Answer:
        if plan.session_id == INVALID_SESSION_ID and plan.epoch == FINAL_EPOCH:
            start_session, create, error = None, False, ErrorCode.none
        else:
            start = self.cache.begin(plan.session_id, plan.epoch, True, now)
            start_session, create, error = start.session, start.create, start.error
        if error != ErrorCode.none:
            return Answer(error, 0, {})
        listed = [CachedPartition(topic, p, offset, records) for (topic, p), (offset, records) in plan.listed.items()]
        if start_session is not None:
            start_session.apply(listed, plan.forgotten)
            partitions = list(start_session.partitions.values())
        else:
            partitions = listed
        answers = {}
        moved = []
        for cached in partitions:
            key = (cached.topic_key, cached.partition)
            answer = self.read(key, cached.fetch_offset, cached.partition_max_bytes)
            code, records, _, hw, start_offset = answer
            if start_session is None:
                if create:
                    cached.must_send(False, code != ErrorCode.none, hw, hw, start_offset)
                answers[key] = answer
            elif cached.must_send(bool(records), code != ErrorCode.none, hw, hw, start_offset):
                answers[key] = answer
                if records:
                    moved.append(key)
        session_id = 0
        if start_session is not None:
            start_session.returned_records(moved)
            session_id = start_session.id
        elif create:
            made = self.cache.create(privileged, True, partitions, now)
            session_id = made.id if made is not None else 0
        return Answer(ErrorCode.none, session_id, answers)

    def read(self, key: Key, offset: int, max_records: int) -> tuple[ErrorCode, list[int], int, int, int]:
        log = self.logs[key]
        if offset < log.log_start or offset > log.high_watermark:
            return ErrorCode.offset_out_of_range, [], offset, log.high_watermark, log.log_start
        end = min(log.high_watermark, offset + max_records)
        return ErrorCode.none, log.records[offset:end], offset, log.high_watermark, log.log_start


class FetchSessionSimulation:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.now = 0.0
        self.slots = self.rng.randint(1, 3)
        self.cache = FetchSessionCache(self.slots, EVICTION_MS, random.Random(seed))
        keys = [(topic, p) for topic in ("a", "b") for p in range(self.rng.randint(1, 4))]
        self.logs = {key: Log() for key in keys}
        self.broker = Broker(self.cache, self.logs)
        self.privileged = self.rng.random() < 0.5
        self.session: FetcherSession[Key, Position] = FetcherSession()
        self.fetching = set(keys)
        self.position = dict.fromkeys(keys, 0)
        self.known: dict[Key, tuple[int, int]] = {}  # the high watermark and log start last heard
        self.stats: Counter[str] = Counter()

    def fail(self, what: str) -> None:
        raise AssertionError(f"seed {self.seed} at t={self.now}: {what}")

    def run(self) -> Counter[str]:
        for _ in range(STEPS):
            self.step()
        self.settle()
        return self.stats

    def step(self) -> None:
        self.now += self.rng.choice([0, 0, 10, 100, EVICTION_MS // 2, EVICTION_MS + 1])
        action = self.rng.random()
        if action < 0.3:
            self.append(self.rng.choice(list(self.logs)))
        elif action < 0.38:
            self.retain(self.rng.choice(list(self.logs)))
        elif action < 0.46:
            self.toggle(self.rng.choice(list(self.logs)))
        elif action < 0.54:
            self.other_fetcher()
        else:
            self.fetch(lose=self.rng.random() < 0.1)
        if len(self.cache) > self.slots:
            self.fail(f"{len(self.cache)} sessions in {self.slots} slots")

    def append(self, key: Key) -> None:
        log = self.logs[key]
        for _ in range(self.rng.randint(1, 6)):
            log.records.append(len(log.records) * 1000 + key[1])
        # The high watermark follows the log end, sometimes in steps (replication catching up).
        log.high_watermark = self.rng.randint(log.high_watermark, len(log.records))
        self.stats["appended"] += 1

    def retain(self, key: Key) -> None:
        log = self.logs[key]
        log.log_start = self.rng.randint(log.log_start, log.high_watermark)
        self.stats["log start moved"] += 1

    def toggle(self, key: Key) -> None:
        if key in self.fetching:
            self.fetching.discard(key)
            self.stats["stopped fetching"] += 1
        else:
            self.fetching.add(key)
            self.stats["started fetching"] += 1

    def other_fetcher(self) -> None:
        """Another fetcher asks for a session: it may evict ours, or find no room."""
        size = self.rng.randint(0, 8)
        made = self.cache.create(self.rng.random() < 0.3, True, [CachedPartition("z", p, 0, 1) for p in range(size)],
                                 self.now)
        self.stats["other session made" if made else "other session refused"] += 1

    def fetch(self, lose: bool = False) -> Answer | None:
        wanted = {key: (self.position[key], MAX_RECORDS) for key in sorted(self.fetching)}
        plan = self.session.plan(wanted)
        self.stats["full fetches" if plan.full else "incremental fetches"] += 1
        answer = self.broker.serve(plan, self.privileged, self.now)
        if lose:
            self.session.failed()
            self.stats["lost answers"] += 1
            return None
        self.session.answered(plan, answer.error.value, answer.session_id)
        if answer.error != ErrorCode.none:
            self.stats[f"session error {answer.error.name}"] += 1
        for key, partition in answer.partitions.items():
            if key not in wanted:
                self.fail(f"answered {key}, which the fetcher does not fetch ({sorted(wanted)})")
            self.take(key, *partition)
        return answer

    def take(self, key: Key, error: ErrorCode, records: list[int], from_offset: int, hw: int, log_start: int) -> None:
        self.known[key] = (hw, log_start)
        position = self.position[key]
        if error == ErrorCode.offset_out_of_range:
            if log_start <= position <= hw:
                self.fail(f"{key}: out of range at {position}, within [{log_start}, {hw}]")
            self.position[key] = log_start  # what retention removed is gone; nothing else is skipped
            self.stats["out of range"] += 1
            return
        if not records:
            return
        if from_offset != position:
            self.fail(f"{key}: records from {from_offset}, the fetcher is at {position}")
        log = self.logs[key]
        if records != log.records[position:position + len(records)]:
            self.fail(f"{key}: records {records} at {position} are not the log's")
        self.position[key] = position + len(records)
        self.stats["records taken"] += len(records)

    def settle(self) -> None:
        self.fetching = set(self.logs)
        for _ in range(4 + max(len(log.records) for log in self.logs.values()) // MAX_RECORDS + 2):
            self.now += 1
            self.fetch()
        for key, log in self.logs.items():
            if self.position[key] != log.high_watermark:
                self.fail(f"{key}: settled at {self.position[key]}, high watermark {log.high_watermark}")
            if self.known.get(key) != (log.high_watermark, log.log_start):
                self.fail(f"{key}: knows {self.known.get(key)}, is {(log.high_watermark, log.log_start)}")
        if self.session.session_id != INVALID_SESSION_ID:
            plan = self.session.plan({key: (self.position[key], MAX_RECORDS) for key in self.fetching})
            answer = self.fetch()
            if plan.full or plan.listed or (answer is not None and answer.partitions):
                self.fail(f"a quiet incremental round listed {plan.listed} or was answered")
            self.stats["quiet incremental rounds"] += 1


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, required=True)
    args = parser.parse_args()
    print(dict(FetchSessionSimulation(args.seed).run()))


if __name__ == "__main__":
    main()
