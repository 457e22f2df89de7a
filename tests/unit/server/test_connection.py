"""KafkaConnection's rules, fed bytes without a socket: order, bounds, the receive budget, timeouts."""

from __future__ import annotations

import asyncio
import struct
from types import SimpleNamespace
from typing import Any

from moldau.clock import ManualClock
from moldau.metadata.image import MetadataImage
from moldau.protocol.codec import InvalidRequest, PendingResponse
from moldau.protocol.framing import Frame
from moldau.protocol.wire import ResponsePart
from moldau.server.connection import KafkaConnection, WokenConnections
from moldau.server.connection_limits import ConnectionLimits, ReceiveBudget, sweep
from moldau.server.dispatch import Dispatcher
from tests.support.wire import in_memory


def sized(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class FakeTransport:
    def __init__(self) -> None:
        self.written: list[bytes] = []  # what each write call passed
        self.paused = False
        self.aborted = False

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 5555) if name == "peername" else None

    def writelines(self, parts: list[ResponsePart]) -> None:
        self.written.append(in_memory(parts))

    @property
    def stream(self) -> bytes:
        """Every byte written, in order."""
        return b"".join(self.written)

    def is_closing(self) -> bool:
        return self.aborted

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def abort(self) -> None:
        self.aborted = True

    close = abort


class EchoHandler:
    """Answers each frame with its own bytes, after `gate` opens (to hold requests in the queue)."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.gate.set()

    async def handle_frame(self, frame: Frame, conn: KafkaConnection) -> list[ResponsePart] | None:
        await self.gate.wait()
        if bytes(frame) == b"bad":
            raise InvalidRequest("bad frame")
        return [bytes(frame)]


def connect(limits: ConnectionLimits | None = None, budget: ReceiveBudget | None = None,
            clock: ManualClock | None = None) -> tuple[KafkaConnection, FakeTransport, EchoHandler]:
    handler = EchoHandler()
    conn, transport = attach(handler, limits, budget, clock)
    return conn, transport, handler


def attach(handler: Any, limits: ConnectionLimits | None = None, budget: ReceiveBudget | None = None,
           clock: ManualClock | None = None) -> tuple[KafkaConnection, FakeTransport]:
    """A connection to `handler`, as if a client had just connected."""
    conn = KafkaConnection(handler, limits or ConnectionLimits(), budget or ReceiveBudget(-1), set(),
                           clock=clock or ManualClock())
    transport = FakeTransport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, transport


def feed(conn: KafkaConnection, data: bytes, chunk: int = 1 << 20) -> None:
    """Deliver `data` as a transport would: reads of at most `chunk` bytes into the buffers handed out."""
    pos = 0
    while pos < len(data):
        target = conn.get_buffer(-1)
        n = min(len(target), chunk, len(data) - pos)
        target[:n] = data[pos : pos + n]
        pos += n
        conn.buffer_updated(n)


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def test_responses_leave_in_request_order_whatever_the_chunking() -> None:
    async def run() -> None:
        conn, transport, _ = connect()
        frames = [b"a", b"bb" * 40_000, b"ccc", b""]
        feed(conn, b"".join(sized(f) for f in frames), chunk=7)
        await settle()
        assert transport.stream == b"".join(sized(f) for f in frames)

    asyncio.run(run())


def test_answers_to_requests_that_arrived_together_leave_in_one_write() -> None:
    async def run() -> None:
        conn, transport, _ = connect()
        feed(conn, b"".join(sized(b"r%d" % i) for i in range(5)))
        await settle()
        assert transport.written == [b"".join(sized(b"r%d" % i) for i in range(5))]
        feed(conn, sized(b"alone"))
        await settle()
        assert transport.written[1:] == [sized(b"alone")]

    asyncio.run(run())


def test_woken_connections_are_counted_until_each_begins_serving() -> None:
    """What a lone OffsetCommit relies on to be appended at once: while one connection serves the frames of a poll,
    the count says how many others still will in the same turn, and it goes back to 0 (also for a closed one)."""

    async def run() -> None:
        woken = WokenConnections()
        seen: list[tuple[bytes, int]] = []

        class Recording:
            async def handle_frame(self, frame: Frame, conn: KafkaConnection) -> list[ResponsePart]:
                seen.append((bytes(frame), woken.count))
                return [bytes(frame)]

        conns = [KafkaConnection(Recording(), ConnectionLimits(), ReceiveBudget(-1), set(), clock=ManualClock(),
                                 woken=woken) for _ in range(3)]
        for conn in conns:
            conn.connection_made(FakeTransport())  # type: ignore[arg-type]
        await settle()  # each waits for frames
        for i, conn in enumerate(conns):  # one poll's reads: all three woken before any runs
            feed(conn, sized(b"c%d" % i))
        assert woken.count == 3 and woken.others_waiting()
        await settle()
        assert seen == [(b"c0", 2), (b"c1", 1), (b"c2", 0)]
        assert woken.count == 0 and not woken.others_waiting()
        feed(conns[0], sized(b"again"))
        assert woken.count == 1
        conns[0].connection_lost(None)  # woken, then gone before it ran
        await settle()
        assert woken.count == 0

    asyncio.run(run())


def test_an_answer_does_not_wait_for_the_next_request_when_that_one_waits() -> None:
    async def run() -> None:
        release = asyncio.Event()

        class SlowSecond:
            async def handle_frame(self, frame: Frame, conn: KafkaConnection) -> list[ResponsePart]:
                if bytes(frame) == b"second":
                    await release.wait()  # as a long poll does
                return [bytes(frame)]

        conn, transport = attach(SlowSecond())
        feed(conn, sized(b"first") + sized(b"second"))
        await settle()
        assert transport.stream == sized(b"first")
        release.set()
        await settle()
        assert transport.stream == sized(b"first") + sized(b"second")

    asyncio.run(run())


class DeferringHandler:
    """Frames starting with "wait" get a pending response (as an acks=all Produce does), answered when the test
    releases it; others are answered at once. Records the order in which frames were served."""

    def __init__(self) -> None:
        self.served: list[bytes] = []
        self.pending: list[asyncio.Future[list[ResponsePart]]] = []

    async def handle_frame(self, frame: Frame, conn: KafkaConnection
                           ) -> list[ResponsePart] | PendingResponse | None:
        self.served.append(bytes(frame))
        if bytes(frame).startswith(b"wait"):
            future: asyncio.Future[list[ResponsePart]] = asyncio.get_running_loop().create_future()
            self.pending.append(future)
            return PendingResponse(future)
        return [bytes(frame)]


def test_requests_behind_a_pending_response_are_served_but_answered_in_order() -> None:
    async def run() -> None:
        handler = DeferringHandler()
        conn, transport = attach(handler)
        feed(conn, sized(b"wait-1") + sized(b"wait-2") + sized(b"now"))
        await settle()
        assert handler.served == [b"wait-1", b"wait-2", b"now"]  # served while the first one waits
        assert transport.written == []  # but nothing overtakes the first response
        handler.pending[1].set_result([b"second"])
        await settle()
        assert transport.written == []
        handler.pending[0].set_result([b"first"])
        await settle()
        assert transport.stream == sized(b"first") + sized(b"second") + sized(b"now")
        assert not conn.busy
        feed(conn, sized(b"later"))
        await settle()
        assert transport.written[-1] == sized(b"later")  # with nothing pending, written directly again

    asyncio.run(run())


def test_pending_responses_are_bounded_per_connection() -> None:
    async def run() -> None:
        handler = DeferringHandler()
        conn, transport = attach(handler)
        feed(conn, b"".join(sized(b"wait-%d" % i) for i in range(40)))
        await settle()
        served = len(handler.served)
        assert served < 40  # serving stopped until the oldest responses go out
        assert conn.busy
        for future in handler.pending:
            future.set_result([b"done"])
        for _ in range(10):
            await settle()
            for future in handler.pending:
                if not future.done():
                    future.set_result([b"done"])
        assert len(handler.served) == 40
        assert transport.stream == sized(b"done") * 40

    asyncio.run(run())


def test_a_lost_connection_cancels_its_pending_responses() -> None:
    async def run() -> None:
        handler = DeferringHandler()
        conn, _ = attach(handler)
        feed(conn, sized(b"wait"))
        await settle()
        conn.connection_lost(None)
        await settle()
        assert handler.pending[0].cancelled()

    asyncio.run(run())


def test_a_bad_frame_closes_only_the_connection() -> None:
    async def run() -> None:
        conn, transport, _ = connect()
        feed(conn, sized(b"ok") + sized(b"bad") + sized(b"never"))
        await settle()
        assert transport.stream == sized(b"ok")  # answered before the connection closed
        assert transport.aborted

    asyncio.run(run())


def test_an_oversized_prefix_closes_before_buffering() -> None:
    async def run() -> None:
        budget = ReceiveBudget(-1)
        conn, transport, _ = connect(ConnectionLimits(max_request_bytes=1000), budget)
        feed(conn, struct.pack(">i", 1001) + b"x" * 10)
        assert transport.aborted
        conn.connection_lost(None)
        assert budget.used == 0

    asyncio.run(run())


def test_queued_requests_past_the_limit_pause_reading_until_processed() -> None:
    async def run() -> None:
        conn, transport, handler = connect(ConnectionLimits(max_queued_requests=4))
        handler.gate.clear()
        feed(conn, b"".join(sized(b"r%d" % i) for i in range(4)))
        assert transport.paused
        handler.gate.set()
        await settle()
        assert not transport.paused and transport.stream == b"".join(sized(b"r%d" % i) for i in range(4))

    asyncio.run(run())


def test_a_read_completing_large_requests_pauses_reading_until_they_are_served() -> None:
    async def run() -> None:
        conn, transport, handler = connect()
        handler.gate.clear()
        large = [bytes([i]) * (300 * 1024) for i in range(2)]
        feed(conn, b"".join(sized(r) for r in large), chunk=4 << 20)
        assert transport.paused  # the socket is not read again while these are checked and written
        handler.gate.set()
        await settle()
        assert not transport.paused and transport.stream == b"".join(sized(r) for r in large)

    asyncio.run(run())


def test_small_requests_do_not_pause_reading() -> None:
    async def run() -> None:
        conn, transport, handler = connect()
        handler.gate.clear()
        feed(conn, b"".join(sized(b"r%d" % i) for i in range(100)))
        assert not transport.paused
        handler.gate.set()
        await settle()
        assert transport.stream == b"".join(sized(b"r%d" % i) for i in range(100))

    asyncio.run(run())


def test_the_shared_budget_pauses_every_reader_and_resumes_them_when_bytes_are_freed() -> None:
    async def run() -> None:
        budget = ReceiveBudget(1000)
        limits = ConnectionLimits(max_request_bytes=1000)
        (one, t1, h1), (two, t2, h2) = connect(limits, budget), connect(limits, budget)
        h1.gate.clear()
        feed(one, sized(b"x" * 600))  # held while processing waits
        feed(two, struct.pack(">i", 200) + b"y" * 100)
        assert budget.used == 704 and not budget.paused
        h2.gate.clear()
        feed(two, b"y" * 100 + sized(b"z" * 300))  # 1,100 held in all
        assert budget.paused and t1.paused and t2.paused  # not only the connection that read last
        late, t_late, _ = connect(limits, budget)
        assert t_late.paused  # nor only those that were there
        h1.gate.set()
        await settle()
        assert budget.used == 500 and not budget.paused  # under 7/8 of the limit: everyone reads again
        assert not (t1.paused or t2.paused or t_late.paused)
        h2.gate.set()
        await settle()
        assert budget.used == 0 and t2.stream == sized(b"y" * 200) + sized(b"z" * 300)
        for conn in (one, two, late):
            conn.connection_lost(None)

    asyncio.run(run())


def test_while_paused_the_largest_partial_frame_is_let_through_then_the_next() -> None:
    async def run() -> None:
        budget = ReceiveBudget(1000)
        limits = ConnectionLimits(max_request_bytes=1000)
        (one, t1, h1), (two, t2, h2), (three, t3, _) = (connect(limits, budget) for _ in range(3))
        h1.gate.clear()
        h2.gate.clear()
        feed(one, sized(b"x" * 600))
        feed(two, struct.pack(">i", 900) + b"b" * 300)
        feed(three, struct.pack(">i", 900) + b"c" * 200)  # over the limit, and no partial frame can complete
        assert budget.paused and t1.paused and t3.paused
        assert not t2.paused  # the one holding the most finishes its frame
        feed(two, b"b" * 600)
        assert t2.paused and not t3.paused  # and then the next one
        feed(three, b"c" * 700)
        assert t3.paused and budget.used == 600 + 900 + 900
        h1.gate.set()
        h2.gate.set()
        await settle()
        assert budget.used == 0 and not budget.paused and not (t1.paused or t2.paused or t3.paused)
        assert t3.written == [sized(b"c" * 900)]

    asyncio.run(run())


def test_one_connection_pauses_when_it_queues_too_many_bytes() -> None:
    async def run() -> None:
        conn, transport, handler = connect(ConnectionLimits(max_request_bytes=1000))
        handler.gate.clear()
        feed(conn, sized(b"a" * 900))
        assert not transport.paused
        feed(conn, sized(b"b" * 200))
        assert transport.paused
        handler.gate.set()
        await settle()
        assert not transport.paused and transport.stream == sized(b"a" * 900) + sized(b"b" * 200)

    asyncio.run(run())


def test_closing_gives_every_byte_back() -> None:
    async def run() -> None:
        budget = ReceiveBudget(10**6)
        conn, _, handler = connect(ConnectionLimits(), budget)
        handler.gate.clear()
        feed(conn, sized(b"q" * 1000) + sized(b"w" * 100) + struct.pack(">i", 10**6) + b"z" * 70_000)
        assert budget.used > 71_000
        conn.connection_lost(None)
        assert budget.used == 0

    asyncio.run(run())


def test_idle_and_stalled_connections_are_swept() -> None:
    async def run() -> None:
        clock = ManualClock()
        limits = ConnectionLimits(idle_ms=10_000, frame_timeout_ms=3_000)
        idle, t_idle, _ = connect(limits, clock=clock)
        stalled, t_stalled, _ = connect(limits, clock=clock)
        active, t_active, _ = connect(limits, clock=clock)
        feed(stalled, struct.pack(">i", 100) + b"half")
        clock.advance(2_000)
        assert sweep([idle, stalled, active], limits, clock.monotonic_ms()) == 0
        clock.advance(1_500)
        assert sweep([idle, stalled, active], limits, clock.monotonic_ms()) == 1
        assert t_stalled.aborted and not t_idle.aborted
        clock.advance(6_000)
        feed(active, sized(b"ping"))
        await settle()
        clock.advance(1_000)
        assert sweep([idle, active], limits, clock.monotonic_ms()) == 1
        assert t_idle.aborted and not t_active.aborted

    asyncio.run(run())


def test_a_request_in_process_is_not_idleness() -> None:
    async def run() -> None:
        clock = ManualClock()
        limits = ConnectionLimits(idle_ms=1_000)
        conn, _, handler = connect(limits, clock=clock)
        handler.gate.clear()  # a long poll
        feed(conn, sized(b"fetch"))
        await settle()
        clock.advance(5_000)
        assert sweep([conn], limits, clock.monotonic_ms()) == 0

    asyncio.run(run())


def test_a_connection_the_broker_stopped_reading_is_not_idle_but_its_frame_deadline_holds() -> None:
    async def run() -> None:
        clock = ManualClock()
        budget = ReceiveBudget(1000)
        limits = ConnectionLimits(max_request_bytes=1000, idle_ms=1_000, frame_timeout_ms=5_000)
        quiet, t_quiet, _ = connect(limits, budget, clock)
        stalled, t_stalled, _ = connect(limits, budget, clock)
        feed(stalled, struct.pack(">i", 1000) + b"s" * 999)
        assert budget.paused and t_quiet.paused and not t_stalled.paused  # stalled is let through to finish
        clock.advance(2_000)
        assert sweep([quiet, stalled], limits, clock.monotonic_ms()) == 0
        clock.advance(3_500)
        assert sweep([quiet, stalled], limits, clock.monotonic_ms()) == 1
        assert t_stalled.aborted and not t_quiet.aborted
        stalled.connection_lost(None)
        assert not t_quiet.paused
        assert sweep([quiet], limits, clock.monotonic_ms()) == 1 and t_quiet.aborted

    asyncio.run(run())


def test_memory_is_trimmed_after_many_closes_or_many_freed_bytes(monkeypatch: Any) -> None:
    from moldau.server import memory

    trims: list[int] = []
    monkeypatch.setattr(memory, "trim", lambda: trims.append(1))
    trimmer = memory.Trimmer(closed_connections=100, freed_bytes=1000)
    assert not trimmer.observe(500, 0, 0)
    assert not trimmer.observe(401, 900, 0)
    assert trimmer.observe(400, 0, 0)  # 100 closed since the peak
    assert not trimmer.observe(450, 0, 0)
    assert trimmer.observe(450, 5000, 4000)  # 1,000 bytes freed since the peak
    assert len(trims) == 2


def test_the_budget_reports_its_peak_since_last_asked() -> None:
    budget = ReceiveBudget(-1)
    budget.change(700)
    budget.change(-600)
    assert budget.take_peak() == 700
    assert budget.take_peak() == 100


def test_a_connection_lost_during_a_long_poll_gives_its_bytes_back_quietly(caplog: Any) -> None:
    async def run() -> None:
        budget = ReceiveBudget(10**6)
        conn, _, handler = connect(ConnectionLimits(), budget)
        handler.gate.clear()
        feed(conn, sized(b"fetch") + sized(b"next"))
        await settle()
        conn.connection_lost(None)
        await settle()
        assert budget.used == 0

    asyncio.run(run())
    assert "unexpected error" not in caplog.text


class CountingHandler:
    """Answers after a while, counting how many requests it is serving at once."""

    def __init__(self) -> None:
        self.active = 0
        self.most_active = 0

    async def handle_frame(self, frame: Frame, conn: KafkaConnection) -> list[ResponsePart] | None:
        self.active += 1
        self.most_active = max(self.most_active, self.active)
        await asyncio.sleep(0.001 * (5 - len(frame)))  # earlier requests take longer
        self.active -= 1
        return [bytes(frame)]


def test_one_request_is_served_at_a_time_so_a_slow_one_cannot_be_overtaken() -> None:
    async def run() -> None:
        handler = CountingHandler()
        conn, transport = attach(handler)
        frames = [b"a", b"bb", b"ccc", b"dddd"]
        feed(conn, b"".join(sized(f) for f in frames))
        for _ in range(100):
            if transport.stream == b"".join(sized(f) for f in frames):
                break
            await asyncio.sleep(0.002)
        assert transport.stream == b"".join(sized(f) for f in frames)
        assert handler.most_active == 1

    asyncio.run(run())


def test_with_the_real_dispatcher_bytes_in_give_a_kafka_answer_out() -> None:
    async def run() -> None:
        # ApiVersions reads only the metadata image of the node (its feature levels) and the APIs its config
        # turns off.
        conn, transport = attach(Dispatcher(SimpleNamespace(image=MetadataImage(), config_turned_off_apis={})))
        api_versions_v0 = struct.pack(">hhih", 18, 0, 41, -1)
        unknown_api = struct.pack(">hhih", 999, 0, 42, -1)
        feed(conn, sized(api_versions_v0) + sized(unknown_api))
        await settle()
        answer = transport.stream
        size, correlation_id, error_code = struct.unpack_from(">iih", answer)
        assert (size, correlation_id, error_code) == (len(answer) - 4, 41, 0)
        assert transport.aborted  # the unknown API closed the connection after the first answer

    asyncio.run(run())


def test_a_throttled_connection_is_neither_read_nor_served_until_its_mute_ends() -> None:
    async def run() -> None:
        clock = ManualClock()
        conn, transport, _ = connect(clock=clock)
        conn.mute_for(30)
        feed(conn, sized(b"one") + sized(b"two"))
        await settle()
        # The first response went out, then the connection is muted: not read, the second not served.
        assert transport.stream == sized(b"one")
        assert transport.paused and conn.reading_paused
        clock.advance(30)
        await asyncio.sleep(0.05)
        await settle()
        assert transport.stream == sized(b"one") + sized(b"two")
        assert not transport.paused
    asyncio.run(run())


def test_connections_over_the_limit_are_closed_at_accept() -> None:
    from moldau.security.connection_quotas import ConnectionQuotas

    async def run() -> None:
        quotas = ConnectionQuotas(max_per_ip=1)
        connections: set[KafkaConnection] = set()
        first = KafkaConnection(EchoHandler(), ConnectionLimits(), ReceiveBudget(-1), connections,
                                clock=ManualClock(), connection_quotas=quotas)
        first_transport = FakeTransport()
        first.connection_made(first_transport)  # type: ignore[arg-type]
        second = KafkaConnection(EchoHandler(), ConnectionLimits(), ReceiveBudget(-1), connections,
                                 clock=ManualClock(), connection_quotas=quotas)
        second_transport = FakeTransport()
        second.connection_made(second_transport)  # type: ignore[arg-type]
        assert second_transport.aborted and not first_transport.aborted
        assert connections == {first}
        second.connection_lost(None)
        first.connection_lost(None)
        assert quotas.total == 0
    asyncio.run(run())
