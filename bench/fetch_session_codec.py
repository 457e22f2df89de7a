"""What an incremental fetch session saves per follower fetch in encoding and decoding, in-process.

The follower fetch of the RF3 latency benchmark names 18 partitions of one leader: 17 idle `__consumer_offsets`
partitions and the one the producer writes to. Without a session every request lists all 18 and every answer
carries all 18; in a session (KIP-227) a request lists the partition whose position moved and the answer carries
the one with records. This times, per fetch and in microseconds, the steps whose size depends on that:

- follower: its session's plan and the direct Fetch v17 encoding (`moldau.protocol.fetch_request`);
- leader: decoding the request (kio, as the connection does) and encoding the answer
  (`moldau.protocol.fetch_response`), with the session's per-partition check (`CachedPartition.must_send`);
- follower: decoding the answer (kio, as `moldau.net.client` does).

It does not time the leader's read pass, which reads every partition of the session either way. The machine's
load moves the absolute figures; the ratios are of the same run.

Run from the repository root:  python -m bench.fetch_session_codec [--repeat N]
"""

from __future__ import annotations

import argparse
import timeit
import uuid
from collections.abc import Callable

from kio.serial import entity_reader

from moldau.net.client import ClientConnection
from moldau.protocol import codec
from moldau.protocol.fetch_request import FetchPosition, encode_replica_fetch
from moldau.protocol.fetch_response import PartitionResult, TopicResult, encode_fetch_response
from moldau.replication.fetch_session import FetcherSession
from moldau.server.fetch_sessions import CachedPartition

IDLE, ACTIVE = 17, 1
RECORDS = b"\x00" * 1100  # about one 1000 B record's batch
OFFSETS, TOPIC = uuid.uuid4(), uuid.uuid4()
_CONNECTION = ClientConnection("127.0.0.1", 1, "bench")  # never connected: only its request framing is used


def _positions(offset: int) -> dict[tuple[uuid.UUID, int], FetchPosition]:
    out = {(OFFSETS, p): FetchPosition(p, 3, 0, -1, 0) for p in range(IDLE)}
    out[(TOPIC, 0)] = FetchPosition(0, 3, offset, 3, 0)
    return out


def _request_frame(session: FetcherSession[tuple[uuid.UUID, int], FetchPosition], offset: int) -> bytes:
    plan = session.plan(_positions(offset))
    by_topic: dict[uuid.UUID, list[FetchPosition]] = {}
    for (topic_id, _), position in plan.listed.items():
        by_topic.setdefault(topic_id, []).append(position)
    request = encode_replica_fetch(2, 500, 1, 10 << 20, 1 << 20, list(by_topic.items()), plan.session_id,
                                   plan.epoch, [])
    return _CONNECTION._encode(request, 1)[4:]


def _answer(partitions: int) -> bytes:
    topics = []
    if partitions > ACTIVE:
        topics.append(TopicResult(None, OFFSETS, [PartitionResult(p, 0, 0, 0, 0, None, -1, b"")
                                                   for p in range(partitions - ACTIVE)]))
    topics.append(TopicResult(None, TOPIC, [PartitionResult(0, 0, 100, 100, 0, None, -1, RECORDS)]))
    parts = encode_fetch_response(17, 0, 0, 0, topics)
    return b"".join(bytes(p) for p in parts)  # type: ignore[arg-type]


def measure(repeat: int) -> dict[str, tuple[float, float]]:
    """step -> (µs without a session, µs in a session) per fetch."""
    full: FetcherSession[tuple[uuid.UUID, int], FetchPosition] = FetcherSession(enabled=False)
    incremental: FetcherSession[tuple[uuid.UUID, int], FetchPosition] = FetcherSession()
    first = incremental.plan(_positions(0))
    incremental.answered(first, 0, 12345)
    schema = codec.api_schema(1, 17)
    response_type = codec.api_schema(1, 17).response_type
    cached = [CachedPartition(OFFSETS, p, 0, 1 << 20) for p in range(IDLE)] + [CachedPartition(TOPIC, 0, 0, 1 << 20)]
    for c in cached:
        c.must_send(False, False, 0, 0, 0)

    def decode_request(frame: bytes) -> Callable[[], object]:
        header = codec.parse_request_header(frame)
        return lambda: codec.decode_request(schema, frame, header)

    def must_send_all() -> None:
        for c in cached:
            c.must_send(c.partition == 0 and c.topic_key == TOPIC, False, 0, 0, 0)

    def encode_answer(partitions: int) -> Callable[[], object]:
        topics = [TopicResult(None, OFFSETS, [PartitionResult(p, 0, 0, 0, 0, None, -1, b"")
                                              for p in range(partitions - ACTIVE)])] if partitions > ACTIVE else []
        topics.append(TopicResult(None, TOPIC, [PartitionResult(0, 0, 100, 100, 0, None, -1, RECORDS)]))
        return lambda: encode_fetch_response(17, 0, 0, 0, topics)

    def decode_answer(data: bytes) -> Callable[[], object]:
        reader = entity_reader(response_type)
        return lambda: reader(data, 0)

    steps: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {
        "follower: plan + encode request": (lambda: _request_frame(full, 5), lambda: _request_frame(incremental, 5)),
        "leader: decode request": (decode_request(_request_frame(full, 5)),
                                   decode_request(_request_frame(incremental, 5))),
        "leader: session check of 18 partitions": (lambda: None, must_send_all),
        "leader: encode answer": (encode_answer(IDLE + ACTIVE), encode_answer(ACTIVE)),
        "follower: decode answer": (decode_answer(_answer(IDLE + ACTIVE)), decode_answer(_answer(ACTIVE))),
    }
    out = {}
    for name, (without, within) in steps.items():
        times = [min(timeit.repeat(fn, number=2000, repeat=repeat)) / 2000 * 1e6 for fn in (without, within)]
        out[name] = (times[0], times[1])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="timing rounds per step (the fastest counts)")
    args = parser.parse_args()
    results = measure(args.repeat)
    print(f"{'step (µs per fetch, 17 idle + 1 active partition)':55} {'no session':>10} {'session':>10}")
    for name, (without, within) in results.items():
        print(f"{name:55} {without:10.1f} {within:10.1f}")
    total = [sum(v[i] for v in results.values()) for i in (0, 1)]
    print(f"{'total':55} {total[0]:10.1f} {total[1]:10.1f}")
    print("request bytes:", len(_request_frame(FetcherSession(enabled=False), 5)),
          "->", len(_request_frame(_ready_session(), 5)),
          "; answer bytes:", len(_answer(IDLE + ACTIVE)), "->", len(_answer(ACTIVE)))


def _ready_session() -> FetcherSession[tuple[uuid.UUID, int], FetchPosition]:
    session: FetcherSession[tuple[uuid.UUID, int], FetchPosition] = FetcherSession()
    session.answered(session.plan(_positions(0)), 0, 12345)
    return session


if __name__ == "__main__":
    main()
