"""TCP proxies that can cut a network link the way a real partition does, for fault-injection tests.

A `LinkProxy` forwards one directed link (connections that one node opens to one service of another node):
it listens on a loopback port and relays every accepted connection to its target. Its event loop runs in a
background thread, so synchronous tests drive it with plain calls:

    with LinkProxy(0, "127.0.0.1", 9092) as proxy:     # port 0: any free port, see `proxy.port`
        proxy.cut()     # black hole: open connections stay open but carry nothing; new ones are accepted, then silent
        proxy.heal()    # the held connections are closed (peers notice and reconnect); forwarding resumes

A cut drops bytes rather than refusing connections: peers see timeouts, not errors, as they would behind a
failed switch. Bytes read while cut are discarded, so nothing sent during the cut is delivered after it.

`ProxyMesh` owns one proxy per (source node, destination node, service) and cuts and heals links between
groups of nodes. Cuts are counted per link, so overlapping faults heal independently:

    mesh = ProxyMesh({1: {"controller": ("127.0.0.1", 9093)}, 2: {...}, 3: {...}})
    mesh.address(1, 2, "controller")         # what node 1 must use to reach node 2's controller
    cut = mesh.isolate(1)                      # or mesh.partition({1, 2}, {3, 4, 5}), mesh.cut(1, 2, both=False)
    mesh.heal(cut)                             # or mesh.heal_all()
    mesh.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from collections.abc import Coroutine, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")

HOST = "127.0.0.1"
CHUNK = 64 * 1024
CONNECT_TIMEOUT_S = 5.0
CALL_TIMEOUT_S = 10.0


class LoopThread:
    """An asyncio event loop running in a daemon thread; `call` runs a coroutine there and waits for it."""

    def __init__(self, name: str = "proxy-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._closed = False

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def call(self, coro: Coroutine[Any, Any, T], timeout_s: float = CALL_TIMEOUT_S) -> T:
        if self._closed:
            coro.close()
            raise RuntimeError("the proxy loop is closed")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def close(self) -> None:
        """Cancel what still runs on the loop, stop it and join the thread. Idempotent."""
        if self._closed:
            return
        self._closed = True

        async def cancel_rest() -> None:
            current = asyncio.current_task()
            rest = [task for task in asyncio.all_tasks() if task is not current]
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)
            await asyncio.sleep(0.05)  # transports closed by the cancelled tasks release their sockets

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(cancel_rest(), self.loop).result(CALL_TIMEOUT_S)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(CALL_TIMEOUT_S)
        if not self._thread.is_alive():
            self.loop.close()


@dataclass
class ProxyStats:
    """Counters of one proxy (read them while it runs; they only grow)."""

    accepted: int = 0
    forwarded_bytes: int = 0
    dropped_bytes: int = 0
    held_closed: int = 0
    connect_failures: int = 0


class _Connection:
    """One accepted connection and its upstream twin; `blackholed` once a cut caught it."""

    def __init__(self, down_reader: asyncio.StreamReader, down_writer: asyncio.StreamWriter,
                 blackholed: bool) -> None:
        self.down_reader = down_reader
        self.down_writer = down_writer
        self.up_writer: asyncio.StreamWriter | None = None
        self.blackholed = blackholed
        self.tasks: list[asyncio.Task[None]] = []

    def abort(self) -> None:
        for writer in (self.down_writer, self.up_writer):
            if writer is not None:
                with contextlib.suppress(Exception):
                    writer.transport.abort()
        for task in self.tasks:
            task.cancel()


class _TrackedProtocol(asyncio.StreamReaderProtocol):
    """A stream server protocol that keeps its transport in `live` while connected, so close can abort
    connections whose handler has not started yet."""

    def __init__(self, live: set[asyncio.BaseTransport], callback: Any) -> None:
        super().__init__(asyncio.StreamReader(), callback)
        self._live = live
        self._tracked: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._tracked = transport
        self._live.add(transport)
        super().connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._tracked is not None:
            self._live.discard(self._tracked)
        super().connection_lost(exc)


class LinkProxy:
    """A TCP proxy from `127.0.0.1:listen_port` to `target_host:target_port` (see the module docstring).

    `listen_port` 0 takes a free port; `port` is the one bound. Pass `loop` to share one `LoopThread` between
    many proxies (the mesh does); otherwise the proxy runs its own and closes it with itself.
    """

    def __init__(self, listen_port: int, target_host: str, target_port: int, *, loop: LoopThread | None = None,
                 name: str = "") -> None:
        self.target = (target_host, target_port)
        self.name = name or f"proxy->{target_host}:{target_port}"
        self._own_loop = loop is None
        self._loop = loop or LoopThread(f"proxy {self.name}")
        self._connections: set[_Connection] = set()
        self._transports: set[asyncio.BaseTransport] = set()
        self._cut = False
        self._closed = False
        self.stats = ProxyStats()
        try:
            self._server = self._loop.call(self._listen(listen_port))
        except BaseException:
            if self._own_loop:
                self._loop.close()
            raise
        self.port: int = int(self._server.sockets[0].getsockname()[1])

    def __repr__(self) -> str:
        state = "closed" if self._closed else "cut" if self._cut else "forwarding"
        return f"LinkProxy({self.name}, :{self.port} -> {self.target[0]}:{self.target[1]}, {state})"

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def is_cut(self) -> bool:
        return self._cut

    @property
    def open_connections(self) -> int:
        return len(self._connections)

    # ---- control (any thread)

    def cut(self) -> None:
        """Stop forwarding on every open connection and on new ones; returns once in effect."""
        self._loop.call(self._set_cut())

    def heal(self) -> None:
        """Close the connections a cut held and forward again; returns once in effect."""
        self._loop.call(self._heal())

    def close(self) -> None:
        """Stop listening and close every connection. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self._loop.call(self._close())
        if self._own_loop:
            self._loop.close()

    def __enter__(self) -> LinkProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- on the loop

    async def _listen(self, port: int) -> asyncio.Server:
        loop = asyncio.get_running_loop()
        return await loop.create_server(lambda: _TrackedProtocol(self._transports, self._accept), HOST, port,
                                        reuse_address=True)

    async def _set_cut(self) -> None:
        self._cut = True
        for connection in self._connections:
            connection.blackholed = True

    async def _heal(self) -> None:
        self._cut = False
        held = [c for c in self._connections if c.blackholed]
        for connection in held:
            connection.abort()
            self._connections.discard(connection)
        self.stats.held_closed += len(held)

    async def _close(self) -> None:
        self._server.close()
        await asyncio.sleep(0.05)  # connections accepted just now get their handler started, then aborted
        for connection in list(self._connections):
            connection.abort()
        self._connections.clear()
        for transport in list(self._transports):
            with contextlib.suppress(Exception):
                transport.abort()  # type: ignore[attr-defined]
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 2.0)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats.accepted += 1
        connection = _Connection(reader, writer, self._cut)
        if self._closed:
            connection.abort()
            return
        self._connections.add(connection)
        try:
            if connection.blackholed:  # a partition: the peer seems to connect, then nothing answers
                await self._drain_into_void(reader)
                return
            try:
                up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(*self.target),
                                                              CONNECT_TIMEOUT_S)
            except (OSError, TimeoutError):
                self.stats.connect_failures += 1
                if connection.blackholed:  # cut while connecting: hold the accepted side silently
                    await self._drain_into_void(reader)
                return
            connection.up_writer = up_writer
            pumps = [asyncio.create_task(self._pump(connection, reader, up_writer)),
                     asyncio.create_task(self._pump(connection, up_reader, writer))]
            connection.tasks.extend(pumps)
            # Both directions must end (a cut keeps a half-closed connection open until heal aborts it).
            await asyncio.gather(*pumps, return_exceptions=True)
        except asyncio.CancelledError:
            pass
        finally:
            self._connections.discard(connection)
            connection.abort()

    async def _drain_into_void(self, reader: asyncio.StreamReader) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while data := await reader.read(CHUNK):
                self.stats.dropped_bytes += len(data)

    async def _pump(self, connection: _Connection, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                data = await reader.read(CHUNK)
                if not data:
                    if not connection.blackholed:
                        with contextlib.suppress(Exception):
                            writer.write_eof()
                    return
                if connection.blackholed:
                    self.stats.dropped_bytes += len(data)
                    continue
                self.stats.forwarded_bytes += len(data)
                writer.write(data)
                await writer.drain()
        except (OSError, ConnectionError):
            return


# --------------------------------------------------------------------------- the mesh

Link = tuple[int, int, str]


@dataclass(frozen=True)
class Cut:
    """The links one `ProxyMesh.cut` took down; give it back to `ProxyMesh.heal`."""

    links: frozenset[Link]
    description: str = ""
    _token: int = field(default=0, compare=False)


def _group(nodes: int | Iterable[int]) -> frozenset[int]:
    return frozenset([nodes]) if isinstance(nodes, int) else frozenset(nodes)


Address = tuple[str, int]


class ProxyMesh:
    """One `LinkProxy` per directed link (source node, destination node, service), all on one loop thread.

    `targets[node][service]` is where that node really serves that service: a `(host, port)` for every
    source, or a mapping `{source: (host, port)}` when the service has one endpoint per source (a listener per
    peer, so that the peer's traffic can be told apart). Source `s` reaches service `v` of destination `d` at
    `address(s, d, v)`. Links within a node are not proxied.
    """

    def __init__(self, targets: Mapping[int, Mapping[str, Address | Mapping[int, Address]]]) -> None:
        self.nodes = sorted(targets)
        self.services = sorted({service for per_node in targets.values() for service in per_node})
        self._loop = LoopThread("proxy-mesh")
        self.proxies: dict[Link, LinkProxy] = {}
        self._counts: dict[Link, int] = {}
        self._active: dict[int, Cut] = {}
        self._tokens = itertools.count(1)
        self._lock = threading.Lock()
        try:
            for source in self.nodes:
                for dest in self.nodes:
                    if source == dest:
                        continue
                    for service, where in sorted(targets[dest].items()):
                        if isinstance(where, Mapping):
                            if source not in where:
                                continue
                            where = where[source]
                        host, port = where
                        self.proxies[(source, dest, service)] = LinkProxy(
                            0, host, port, loop=self._loop, name=f"{source}->{dest} {service}")
        except BaseException:
            self.close()
            raise

    def proxy(self, source: int, dest: int, service: str) -> LinkProxy:
        return self.proxies[(source, dest, service)]

    def address(self, source: int, dest: int, service: str) -> str:
        return self.proxy(source, dest, service).address

    def port(self, source: int, dest: int, service: str) -> int:
        return self.proxy(source, dest, service).port

    # ---- faults

    def cut(self, a: int | Iterable[int], b: int | Iterable[int], *, both: bool = True,
            services: Iterable[str] | None = None) -> Cut:
        """Cut every link from a node of `a` to a node of `b` (and back, with `both`). Returns the Cut to heal."""
        group_a, group_b = _group(a), _group(b)
        wanted = set(self.services if services is None else services)
        pairs = {(s, d) for s in group_a for d in group_b if s != d}
        if both:
            pairs |= {(d, s) for s, d in pairs}
        links = frozenset(link for link in self.proxies if (link[0], link[1]) in pairs and link[2] in wanted)
        arrow = "<->" if both else "->"
        cut = Cut(links, f"{sorted(group_a)} {arrow} {sorted(group_b)}", next(self._tokens))
        with self._lock:
            self._active[cut._token] = cut
            for link in links:
                self._counts[link] = self._counts.get(link, 0) + 1
                if self._counts[link] == 1:
                    self.proxies[link].cut()
        return cut

    def isolate(self, node: int) -> Cut:
        """Cut `node` from every other node, both ways."""
        return self.cut(node, [n for n in self.nodes if n != node])

    def partition(self, group: Iterable[int], rest: Iterable[int] | None = None) -> Cut:
        """Split `group` from `rest` (default: every other node), both ways."""
        side = _group(group)
        other = _group(rest) if rest is not None else frozenset(n for n in self.nodes if n not in side)
        return self.cut(side, other)

    def heal(self, cut: Cut) -> None:
        """Undo one cut; a link also taken down by another active cut stays down. Idempotent per cut."""
        with self._lock:
            if self._active.pop(cut._token, None) is None:
                return
            for link in cut.links:
                self._counts[link] -= 1
                if self._counts[link] == 0:
                    del self._counts[link]
                    self.proxies[link].heal()

    def heal_all(self) -> None:
        """Heal every link, whatever cut it."""
        with self._lock:
            self._active.clear()
            self._counts.clear()
            for proxy in self.proxies.values():
                if proxy.is_cut:
                    proxy.heal()

    @property
    def cut_links(self) -> set[Link]:
        return {link for link, proxy in self.proxies.items() if proxy.is_cut}

    @property
    def active_cuts(self) -> list[Cut]:
        with self._lock:
            return list(self._active.values())

    def is_reachable(self, source: int, dest: int, service: str) -> bool:
        return source == dest or not self.proxy(source, dest, service).is_cut

    def __iter__(self) -> Iterator[LinkProxy]:
        return iter(self.proxies.values())

    def close(self) -> None:
        """Close every proxy (all at once) and the loop thread. Idempotent."""
        open_proxies = [proxy for proxy in self.proxies.values() if not proxy._closed]
        for proxy in open_proxies:
            proxy._closed = True

        async def close_all() -> None:
            await asyncio.gather(*(proxy._close() for proxy in open_proxies), return_exceptions=True)

        with contextlib.suppress(Exception):
            self._loop.call(close_all())
        self._loop.close()

    def __enter__(self) -> ProxyMesh:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
