"""One client connection: frames in, responses out, in order.

Like Kafka, a connection has one request being processed at a time; the next is read from the buffer only
after the previous response was queued, so responses always go out in request order. One exception: an acks=all
Produce that has appended its records answers only once the followers have them, and meanwhile the connection
serves the requests after it (a producer's next batches are appended and ride the same follower fetch, instead of
each waiting a replication round trip of its own); responses still go out in request order (`_write_in_order`),
and past `_MAX_UNWRITTEN` unwritten responses the connection stops serving until the oldest is out. Frames that arrive
meanwhile wait in a bounded queue: past `queued.max.requests` frames, or about one maximum-size request in
bytes, the socket stops being read (TCP backpressure then slows the client). Writes that outrun the client
pause processing until the transport drains.

A read that completes `_SERVE_BEFORE_READING_BYTES` or more of requests (a large Produce) pauses reading until
they are served. The event loop reads every ready connection before it runs any task, so otherwise a producer
with two 1 MiB batches in flight on each of four connections has 8 MiB copied out of the sockets before the first
batch is checked and written: by then that batch has left the CPU's caches, and the CRC pass and the segment
write read it from memory. Served one at a time, 1 MiB batches from four connections moved a median 1.06x the bytes
at 0.92x the CPU per GB (docs/benchmarks.md). Small requests are read as many as have arrived, as before.

Responses answered without waiting are not written one by one: they gather in `_out` and go out in one
`transport.writelines` when the connection has served every frame it had queued, when a handler waits for
something, or past `_COALESCE_BYTES` (on loopback a write costs more than the request that asked for it, and a
client with several requests in flight gets their answers in one segment).

On a plaintext listener (`sends_files`), a Fetch response may hold file regions: the connection sends it itself
with sendfile (`moldau.server.file_sender`), after whatever the transport still buffers and before the next
response, so the order holds; a region that can no longer be read whole, or a client gone mid-send, closes it.

Memory is bounded by policy (`moldau.server.connection_limits`): what a connection holds for requests counts
against the broker's `queued.max.request.bytes`, and while that budget is exhausted connections stop reading.
The broker's periodic sweep closes connections idle past `connections.max.idle.ms` and frames not completed
within `socket.request.read.timeout.ms`.

A client over its quota is muted (KIP-219): after the response that carries its throttle time, the connection
is neither read nor served until the throttle time has passed (`mute_for`), so a client that ignores
`throttle_time_ms` is held back all the same.

Connection limits (`max.connections`, `max.connections.per.ip`, `moldau.security.connection_quotas`) are
checked as a connection is made: one over a limit is closed at once.

Anything that cannot be answered (a malformed frame, an unknown API, an oversized size prefix) closes this one
connection, which is Kafka's behaviour; other connections are unaffected.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable
from typing import Protocol

from moldau.clock import Clock, SystemClock
from moldau.protocol.codec import InvalidRequest, PendingResponse
from moldau.protocol.framing import SIZE, Frame, FrameReader, FrameTooLarge, frame
from moldau.protocol.wire import ResponsePart
from moldau.security.connection_quotas import Admission, ConnectionQuotas
from moldau.security.principal import ANONYMOUS, KafkaPrincipal
from moldau.security.sasl.authenticator import SaslAuthenticator, SaslListenerConfig
from moldau.security.ssl_principal import NoMatchingRule, PrincipalMapper
from moldau.server.connection_limits import ConnectionLimits, ReceiveBudget
from moldau.server.file_sender import FileSender, RegionGone, has_regions
from moldau.server.idle_poll import IdlePoller

log = logging.getLogger(__name__)

_QUEUE, _BUDGET, _THROTTLE, _LARGE = "queue", "budget", "throttle", "large"  # why reading is paused
_CREATION_RATE = "connection creation rate"  # a new connection waiting for its turn (KIP-612)
# Requests completed by one read, in bytes, past which they are served before the socket is read again (see the
# module docstring): low enough for batches of librdkafka's default 1 MB limit, high enough that a read of many
# small requests is served as it was (its bytes fit the caches, and their answers still leave in one write).
_SERVE_BEFORE_READING_BYTES = 256 * 1024
# Responses a connection may hold unwritten before it stops serving requests (librdkafka and the Java client keep
# at most 5 requests in flight per connection by default).
_MAX_UNWRITTEN = 16
# Gathered responses are written once they hold this many bytes, even with more requests queued.
_COALESCE_BYTES = 64 * 1024


def _ready(parts: list[ResponsePart]) -> asyncio.Future[list[ResponsePart]]:
    future: asyncio.Future[list[ResponsePart]] = asyncio.get_running_loop().create_future()
    future.set_result(parts)
    return future


class WokenConnections:
    """How many connections have been woken by frames and have not begun serving them yet.

    The frames read in one poll of the event loop wake their connections' tasks, which then run one after the
    other in the loop's next turn. Work that requests of several connections could share (the group commit of
    OffsetCommits, `moldau.coordinator.group.runtime`) waits for the others only while this count says that more
    connections are about to serve a request in the same turn."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def others_waiting(self) -> bool:
        """Connections other than the one serving now will serve a request in this turn (the serving one is no
        longer counted)."""
        return self.count > 0


class FrameHandler(Protocol):
    async def handle_frame(self, frame: Frame, conn: KafkaConnection
                           ) -> list[ResponsePart] | PendingResponse | None: ...


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, handler: FrameHandler, limits: ConnectionLimits, budget: ReceiveBudget,
                 connections: set[KafkaConnection], listener: str = "PLAINTEXT",
                 is_controller_listener: bool = False, clock: Clock | None = None,
                 security_protocol: str = "PLAINTEXT", principal_mapper: PrincipalMapper | None = None,
                 connection_quotas: ConnectionQuotas | None = None, sasl: SaslListenerConfig | None = None,
                 on_lost: Callable[[KafkaConnection], None] | None = None, sends_files: bool = False,
                 woken: WokenConnections | None = None, idle_poller: IdlePoller | None = None,
                 rate_admission: Callable[[str, str], Admission] | None = None) -> None:
        self._handler = handler
        self._idle_poller = idle_poller  # told of every read: keeps the loop polling while requests come close
        self._woken = woken  # counts this connection from the frames that wake it until it begins serving them
        self._counted_woken = False
        # Fetch responses may hold file regions, sent with sendfile (`moldau.server.file_sender`): plaintext only.
        self.sends_files = sends_files
        self._file_sender: FileSender | None = None
        self._on_lost = on_lost  # told when the connection is gone (share sessions end with their connection)
        self._connection_quotas = connection_quotas
        # Connection creation rates (KIP-612): when a new connection may be served, given listener and address.
        self._rate_admission = rate_admission
        self._serve_after_s = 0.0  # set when the connection creation rate holds this new connection back
        self._admitted = False  # counted by connection_quotas, to be released when closed
        self.muted_until_ms = 0.0  # KIP-219: not read nor served before this time
        self.listener = listener
        self.is_controller_listener = is_controller_listener
        self.security_protocol = security_protocol
        # Who the requests of this connection come from: anonymous until TLS or SASL says otherwise.
        self.principal: KafkaPrincipal = ANONYMOUS
        self._principal_mapper = principal_mapper  # TLS listeners: a client certificate names the principal
        self._limits = limits
        self._clock = clock or SystemClock()
        # On SASL listeners: the authentication state; it sets `principal` once the client authenticated.
        self.sasl = SaslAuthenticator(sasl, self, self._clock) if sasl is not None else None
        self._budget = budget
        self._reader = FrameReader(limits.max_request_bytes)
        # Until a SASL client has authenticated, its frames may be no larger than sasl.server.max.receive.size
        # (Kafka's 512 KiB: a SaslAuthenticate token, not a Produce), so an unauthenticated peer cannot make
        # the broker hold socket.request.max.bytes for it. Lifted once authentication completes.
        self._pre_auth_limit = sasl is not None and sasl.max_receive_bytes < limits.max_request_bytes
        if self._pre_auth_limit:
            assert sasl is not None
            self._reader.max_frame_bytes = sasl.max_receive_bytes
            self._reader.limit_name = "sasl.server.max.receive.size"
        self._queue: collections.deque[Frame] = collections.deque()
        self._queued_bytes = 0  # frames queued and the one being processed
        self._held = 0  # what this connection counts against the budget
        # What `_process` waits on while its queue is empty, set when frames arrive. A bare future rather than an
        # asyncio.Event: one wait per request on synchronous clients, and Event.wait looks up the running loop.
        self._wakeup: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # set when the connection is made
        self._can_write: asyncio.Event = asyncio.Event()
        self._can_write.set()
        self._paused_for: set[str] = set()
        self._transport: asyncio.Transport | None = None
        self._task: asyncio.Task[None] | None = None
        self._connections = connections
        self.peer: str = "?"
        self.client_host: str = ""  # the peer's address, without the port (ACL host filters, per-IP limits)
        self.last_activity_ms = self._clock.monotonic_ms()
        self.frame_started_ms: float | None = None
        self._busy = False  # a request is being processed (a long poll is not idleness)
        # Responses not written yet, in request order: those still pending (acks=all Produce) and any behind them.
        self._unwritten: collections.deque[asyncio.Future[list[ResponsePart]]] = collections.deque()
        self._written: asyncio.Event = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        # Framed responses answered but not yet handed to the transport (see `_gather`), and their size.
        self._out: list[ResponsePart] = []
        self._out_bytes = 0
        self._flush_scheduled = False
        self.frames_received = 0

    # -- asyncio.BufferedProtocol ------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have the same methods.
        self._transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.client_host = str(peer[0]) if isinstance(peer, tuple) else ""
        wait_s = 0.0
        if self._rate_admission is not None:
            admission = self._rate_admission(self.listener, self.client_host)
            if admission.throttled_ms > 0:
                self._refuse_throttled(transport, admission)
                return
            wait_s = admission.wait_ms / 1000
        if self._connection_quotas is not None:
            refused = self._connection_quotas.admit(self.client_host)
            if refused is not None:
                log.warning("closing connection from %s: %s", self.peer, refused)
                transport.abort()  # type: ignore[attr-defined]
                self._transport = None
                return
            self._admitted = True
        self._connections.add(self)
        self._budget.join(self)
        self._loop = asyncio.get_running_loop()  # looked up once: each lookup costs a getpid system call
        self._task = self._loop.create_task(self._process())
        if wait_s > 0:
            # Served once the listener's connection creation rate allows: `_process` waits that long, and the
            # socket is not read meanwhile. The pause is applied in the next turn: uvloop starts reading a new
            # connection after connection_made returns, which would undo a pause made here.
            self._serve_after_s = wait_s
            self._loop.call_soon(self._pause, _CREATION_RATE)
            self._loop.call_later(wait_s, self._resume, _CREATION_RATE)
        if self._principal_mapper is not None:
            self._take_certificate_principal(transport)

    def _refuse_throttled(self, transport: asyncio.BaseTransport, admission: Admission) -> None:
        """Over its address's connection_creation_rate: never served, closed once its throttle time has passed
        (as Kafka closes a throttled connection), so that a client reconnecting in a loop is slowed down."""
        delay_ms = admission.wait_ms + admission.throttled_ms
        log.info("closing connection from %s in %.0f ms: the connection_creation_rate of %s is exceeded", self.peer,
                 delay_ms, self.client_host)
        self._transport = None
        loop = asyncio.get_running_loop()
        # Not read meanwhile; paused in the next turn, as uvloop starts reading after connection_made returns.
        loop.call_soon(transport.pause_reading)  # type: ignore[attr-defined]
        loop.call_later(delay_ms / 1000, transport.abort)  # type: ignore[attr-defined]

    def _take_certificate_principal(self, transport: asyncio.BaseTransport) -> None:
        """On a TLS listener the handshake is complete when the connection is made: a verified client certificate
        (mutual TLS) makes its subject the principal; without one the connection stays anonymous."""
        assert self._principal_mapper is not None
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is None:
            return
        try:
            principal = self._principal_mapper.principal(ssl_object.getpeercert())
        except NoMatchingRule as exc:
            self.abort(f"TLS authentication failed: {exc}")
            return
        if principal is not None:
            self.principal = principal
            log.debug("connection from %s authenticated by certificate as %s", self.peer, principal)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        if self._idle_poller is not None:
            self._idle_poller.activity()
        now = self._clock.monotonic_ms()
        self.last_activity_ms = now
        try:
            frames = self._reader.buffer_updated(nbytes)
        except FrameTooLarge as exc:
            self.abort(str(exc))
            return
        if self._reader.frame_in_progress:
            if self.frame_started_ms is None or frames:
                self.frame_started_ms = now
        else:
            self.frame_started_ms = None
        if frames:
            self._queue.extend(frames)
            arrived = sum(len(f) for f in frames)
            self._queued_bytes += arrived
            if arrived >= _SERVE_BEFORE_READING_BYTES:
                self._pause(_LARGE)
            self.frames_received += len(frames)
            wakeup = self._wakeup
            if wakeup is not None and not wakeup.done():
                wakeup.set_result(None)
                if self._woken is not None:
                    self._woken.count += 1
                    self._counted_woken = True
        if len(self._queue) >= self._limits.max_queued_requests or self._queued_bytes > self._limits.max_queued_bytes:
            self._pause(_QUEUE)
        self._account()  # may pause (or, for the budget's finisher, re-pause) every connection

    def connection_lost(self, exc: Exception | None) -> None:
        if self._on_lost is not None and self._transport is not None:
            self._on_lost(self)
        if self._admitted and self._connection_quotas is not None:
            self._admitted = False
            self._connection_quotas.release(self.client_host)
        self._connections.discard(self)
        self._budget.leave(self)
        self._can_write.set()
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self._writer is not None:
            self._writer.cancel()
            self._writer = None
        for pending in self._unwritten:
            pending.cancel()
        self._unwritten.clear()
        self._file_sender = None
        self._out, self._out_bytes = [], 0
        # Drop every buffer now and give the bytes back to the budget; nothing may keep them alive.
        self._queue.clear()
        self._queued_bytes = 0
        self._reader.release()
        self._account()
        self._transport = None

    def _lift_pre_auth_limit(self) -> None:
        self._pre_auth_limit = False
        self._reader.max_frame_bytes = self._limits.max_request_bytes
        self._reader.limit_name = "socket.request.max.bytes"

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    # -- processing --------------------------------------------------------------------------------------------

    async def _process(self) -> None:
        try:
            if self._serve_after_s:
                await asyncio.sleep(self._serve_after_s)
            while True:
                if not self._queue:
                    self._resume(_LARGE)
                    self._flush()
                    assert self._loop is not None
                    self._wakeup = self._loop.create_future()
                    try:
                        await self._wakeup
                    finally:
                        self._wakeup = None
                        if self._counted_woken:  # also when cancelled before it ran: the count must come back
                            self._counted_woken = False
                            assert self._woken is not None
                            self._woken.count -= 1
                    continue
                request = self._queue.popleft()  # its bytes stay counted until its response is queued
                self._busy = True
                try:
                    response = await self._handler.handle_frame(request, self)
                finally:
                    self._busy = False
                    if self._transport is not None:  # else connection_lost already gave every byte back
                        self._queued_bytes -= len(request)
                        self._account()
                        self._maybe_resume_reading()
                    del request
                if self._transport is None or self._transport.is_closing():
                    return
                if isinstance(response, PendingResponse):
                    self._flush()
                    await self._queue_unwritten(response.parts)
                elif response is not None and self._unwritten:
                    await self._queue_unwritten(_ready(response))  # behind the responses still pending
                elif response is not None and self.sends_files and has_regions(response):
                    # Sent here rather than by the writer task: no task switch per response. Like a write that
                    # outruns the client, a full socket holds up serving the next request until it drains.
                    self._flush()
                    sent = await self._send_files(response)
                    response = None  # its regions keep their files open while referenced, also when idle
                    if not sent:
                        return
                elif response is not None:
                    self._gather(response)
                    if not self._can_write.is_set():
                        self._flush()  # what is gathered goes out before the wait, so nothing else waits on it
                        await self._can_write.wait()
                if self.sasl is not None:
                    if self.sasl.close_after_response:
                        self._flush()
                        await self._all_written()
                        self.close()  # failed authentication: the answer goes out, then the connection closes
                        return
                    if self._pre_auth_limit and self.sasl.authenticated:
                        self._lift_pre_auth_limit()
                if self.muted_until_ms:  # set only by a throttle (rare): no coroutine and clock read per request
                    await self._wait_out_mute()
        except InvalidRequest as exc:
            self.abort(f"invalid request: {exc}")
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("closing connection from %s after an unexpected error", self.peer)
            self.abort("internal error")

    def _gather(self, parts: list[ResponsePart]) -> None:
        """Queue a complete response behind those gathered; they are written together by `_flush`: when `_process`
        finds its queue empty, or at the latest in the event loop's next turn when more frames are queued (so that
        a handler of one of those that waits for something does not hold up the answers before it)."""
        size = 0
        for part in parts:
            size += len(part)
        self._out.append(SIZE.pack(size))
        self._out += parts
        self._out_bytes += size + 4
        if self._out_bytes >= _COALESCE_BYTES:
            self._flush()
        elif self._queue and not self._flush_scheduled:
            self._flush_scheduled = True
            assert self._loop is not None
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        """Write the gathered responses in one call."""
        self._flush_scheduled = False
        if not self._out:
            return
        out, self._out, self._out_bytes = self._out, [], 0
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        transport.writelines(out)  # type: ignore[arg-type]
        self.last_activity_ms = self._clock.monotonic_ms()

    async def _queue_unwritten(self, parts: asyncio.Future[list[ResponsePart]]) -> None:
        """Queue a response that is not complete yet (or one behind such); the writer sends them in order.
        Past `_MAX_UNWRITTEN` of them, serving stops until the oldest goes out."""
        self._unwritten.append(parts)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_in_order())
        while len(self._unwritten) > _MAX_UNWRITTEN:
            self._written.clear()
            await self._written.wait()

    async def _write_in_order(self) -> None:
        """Write the unwritten responses in request order. A response stays at the head of `_unwritten` until it is
        out, so that no response is written directly while one is still being sent from files."""
        try:
            while self._unwritten:
                parts = await self._unwritten[0]
                if self._transport is None or self._transport.is_closing():
                    return
                if self.sends_files and has_regions(parts):
                    if not await self._send_files(parts):
                        return
                else:
                    self._transport.writelines(frame(parts))  # type: ignore[arg-type]
                del parts  # file regions hold their files open until sent
                self._unwritten.popleft()
                self._written.set()
                self.last_activity_ms = self._clock.monotonic_ms()
                if not self._can_write.is_set():
                    await self._can_write.wait()
        except asyncio.CancelledError:
            raise
        except InvalidRequest as exc:
            self.abort(f"invalid request: {exc}")
        except Exception:
            log.exception("closing connection from %s after an unexpected error", self.peer)
            self.abort("internal error")

    async def _send_files(self, parts: list[ResponsePart]) -> bool:
        """Send a response holding file regions (`moldau.server.file_sender`); False if the connection closed."""
        assert self._transport is not None
        if self._file_sender is None:
            self._file_sender = FileSender(self._transport)
        try:
            await self._file_sender.send(frame(parts))
        except RegionGone as exc:
            self.abort(f"a fetched segment was truncated while being sent: {exc}")
            return False
        except OSError as exc:
            self.abort(f"sending a response failed: {exc}")
            return False
        self.last_activity_ms = self._clock.monotonic_ms()
        return True

    async def _all_written(self) -> None:
        while self._unwritten:
            self._written.clear()
            await self._written.wait()

    def mute_for(self, ms: int) -> None:
        """Neither read nor serve this connection for `ms` after the current response (KIP-219)."""
        self.muted_until_ms = max(self.muted_until_ms, self._clock.monotonic_ms() + ms)

    async def _wait_out_mute(self) -> None:
        remaining = self.muted_until_ms - self._clock.monotonic_ms()
        if remaining <= 0:
            self.muted_until_ms = 0.0
            return
        self._flush()  # the response that carries the throttle time goes out before the mute
        self._pause(_THROTTLE)
        try:
            while remaining > 0:
                await asyncio.sleep(remaining / 1000)
                remaining = self.muted_until_ms - self._clock.monotonic_ms()
        finally:
            self._resume(_THROTTLE)
        self.muted_until_ms = 0.0  # waited out; a later throttle sets it again

    def _account(self) -> None:
        # Reported even when unchanged: the budget also watches for its finisher's frame being complete.
        held = self._reader.buffered_bytes + self._queued_bytes
        delta, self._held = held - self._held, held
        self._budget.change(delta)

    def _pause(self, reason: str) -> None:
        if not self._paused_for and self._transport is not None:
            self._transport.pause_reading()
        self._paused_for.add(reason)

    def _resume(self, reason: str) -> None:
        if reason not in self._paused_for:
            return
        self._paused_for.discard(reason)
        if not self._paused_for and self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()

    def _maybe_resume_reading(self) -> None:
        if (len(self._queue) < self._limits.max_queued_requests // 2
                and self._queued_bytes <= self._limits.max_queued_bytes // 2):
            self._resume(_QUEUE)

    @property
    def busy(self) -> bool:
        """A request is being served or its response is still pending: the connection is not idle."""
        return self._busy or bool(self._unwritten)

    @property
    def held_bytes(self) -> int:
        """What this connection counts against the receive budget."""
        return self._held

    @property
    def frame_in_progress(self) -> bool:
        return self._reader.frame_in_progress

    @property
    def reading_paused(self) -> bool:
        return bool(self._paused_for)

    def pause_for_budget(self) -> None:
        """Called by the budget when the connections together hold too much."""
        self._pause(_BUDGET)

    def resume_from_budget(self) -> None:
        """Called by the budget when processing freed enough bytes."""
        self._resume(_BUDGET)

    def abort(self, reason: str) -> None:
        log.info("closing connection from %s: %s", self.peer, reason)
        if self._transport is not None:
            self._flush()  # the answers to the requests before the one that closes it, as if written at once
            self._transport.abort()

    def close(self) -> None:
        if self._transport is not None:
            self._flush()
            self._transport.close()
