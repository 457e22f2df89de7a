"""The link proxies with plain sockets: forwarding, a cut as a black hole, healing, and the mesh's groups."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from tests.support.proxy import LinkProxy, ProxyMesh

pytestmark = pytest.mark.timeout(60)


class EchoServer:
    """Echoes every byte back, one thread per connection; counts connections."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.connections = 0
        self._stop = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            while data := conn.recv(65536):
                conn.sendall(data)

    def close(self) -> None:
        self._stop = True
        self.sock.close()


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    yield server
    server.close()


@pytest.fixture
def proxy(echo: EchoServer) -> Iterator[LinkProxy]:
    with LinkProxy(0, "127.0.0.1", echo.port) as link:
        yield link


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.settimeout(5)
    return sock


def roundtrip(sock: socket.socket, payload: bytes) -> bytes:
    sock.sendall(payload)
    received = b""
    while len(received) < len(payload):
        chunk = sock.recv(65536)
        if not chunk:
            break
        received += chunk
    return received


def silent(sock: socket.socket, payload: bytes, wait_s: float = 0.5) -> bool:
    """True if `payload` goes out and nothing comes back within `wait_s`, the connection staying open."""
    sock.sendall(payload)
    sock.settimeout(wait_s)
    try:
        return not sock.recv(100) and False
    except TimeoutError:
        return True
    finally:
        sock.settimeout(5)


def closed_by_peer(sock: socket.socket, timeout_s: float = 5.0) -> bool:
    sock.settimeout(timeout_s)
    try:
        return sock.recv(100) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_forwards_both_ways(proxy: LinkProxy) -> None:
    with connect(proxy.port) as sock:
        assert roundtrip(sock, b"hello") == b"hello"
        big = bytes(range(256)) * 4096  # 1 MiB in both directions
        assert roundtrip(sock, big) == big
    assert proxy.stats.accepted == 1
    assert proxy.stats.forwarded_bytes >= 2 * (5 + len(big))


def test_cut_is_a_black_hole_and_heal_closes_the_held_connections(proxy: LinkProxy, echo: EchoServer) -> None:
    before = connect(proxy.port)
    assert roundtrip(before, b"ping") == b"ping"
    proxy.cut()
    assert proxy.is_cut
    assert silent(before, b"lost")  # open, but nothing gets through
    during = connect(proxy.port)  # new connections are accepted...
    assert silent(during, b"also lost")  # ...and go nowhere
    assert echo.connections == 1  # the target never saw the second one
    assert proxy.stats.dropped_bytes >= len(b"lostalso lost")
    time.sleep(0.2)
    assert proxy.open_connections == 2

    proxy.heal()
    assert not proxy.is_cut
    assert closed_by_peer(before) and closed_by_peer(during)  # peers notice and reconnect
    with connect(proxy.port) as after:
        assert roundtrip(after, b"back") == b"back"  # nothing sent during the cut arrives
    before.close()
    during.close()


def test_a_client_closing_during_a_cut_is_forgotten(proxy: LinkProxy) -> None:
    proxy.cut()
    with connect(proxy.port):
        pass
    deadline = time.monotonic() + 5
    while proxy.open_connections and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proxy.open_connections == 0
    proxy.heal()


def test_an_unreachable_target_closes_the_client() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])  # bound, not listening: connections are refused
        with LinkProxy(0, "127.0.0.1", port) as link, connect(link.port) as sock:
            assert closed_by_peer(sock)
            assert link.stats.connect_failures == 1


def test_close_stops_listening(echo: EchoServer) -> None:
    link = LinkProxy(0, "127.0.0.1", echo.port)
    sock = connect(link.port)
    assert roundtrip(sock, b"up") == b"up"
    link.close()
    link.close()  # idempotent
    assert closed_by_peer(sock)
    with pytest.raises(OSError):
        connect(link.port).close()
    sock.close()


# --------------------------------------------------------------------------- the mesh


@pytest.fixture
def mesh() -> Iterator[tuple[ProxyMesh, dict[int, EchoServer]]]:
    servers = {node: EchoServer() for node in (1, 2, 3, 4, 5)}
    try:
        with ProxyMesh({n: {"a": ("127.0.0.1", s.port), "b": ("127.0.0.1", s.port)}
                        for n, s in servers.items()}) as built:
            yield built, servers
    finally:
        for server in servers.values():
            server.close()


def reachable(mesh: ProxyMesh, wait_s: float = 0.5) -> set[tuple[int, int]]:
    """(source, dest) pairs whose service "a" echoes through the mesh within `wait_s` (all probed at once)."""
    probes = {(source, dest): connect(link.port) for (source, dest, service), link in mesh.proxies.items()
              if service == "a"}
    try:
        for sock in probes.values():
            sock.sendall(b"x")
        answered: set[tuple[int, int]] = set()
        deadline = time.monotonic() + wait_s
        while len(answered) < len(probes) and time.monotonic() < deadline:
            waiting = {sock: pair for pair, sock in probes.items() if pair not in answered}
            ready, _, _ = select.select(list(waiting), [], [], max(0.0, deadline - time.monotonic()))
            for sock in ready:
                if sock.recv(1) == b"x":
                    answered.add(waiting[sock])
        return answered
    finally:
        for sock in probes.values():
            sock.close()


def pairs(nodes: list[int]) -> set[tuple[int, int]]:
    return {(s, d) for s in nodes for d in nodes if s != d}


def test_mesh_has_one_proxy_per_directed_link_and_service(mesh: tuple[ProxyMesh, dict[int, EchoServer]]) -> None:
    net, _ = mesh
    assert len(net.proxies) == 5 * 4 * 2
    assert len({link.port for link in net}) == 40
    assert net.address(1, 2, "a") != net.address(2, 1, "a")
    assert reachable(net) == pairs([1, 2, 3, 4, 5])


def test_mesh_isolate_partition_one_way_and_heal(mesh: tuple[ProxyMesh, dict[int, EchoServer]]) -> None:
    net, _ = mesh
    everything = pairs([1, 2, 3, 4, 5])

    isolated = net.isolate(3)
    assert reachable(net) == pairs([1, 2, 4, 5])
    assert {(s, d) for s, d, _ in net.cut_links} == everything - pairs([1, 2, 4, 5])
    net.heal(isolated)
    assert reachable(net) == everything

    split = net.partition({1, 2})
    assert reachable(net) == pairs([1, 2]) | pairs([3, 4, 5])
    net.heal(split)

    one_way = net.cut(1, 2, both=False)
    assert reachable(net) == everything - {(1, 2)}
    net.heal(one_way)
    net.heal(one_way)  # healing twice does nothing more
    assert reachable(net) == everything

    only_b = net.cut(4, 5, services=["b"])
    assert net.cut_links == {(4, 5, "b"), (5, 4, "b")}
    net.heal(only_b)
    assert not net.cut_links


def test_mesh_overlapping_cuts_heal_independently(mesh: tuple[ProxyMesh, dict[int, EchoServer]]) -> None:
    net, _ = mesh
    first, second = net.isolate(1), net.isolate(2)
    net.heal(first)
    assert not net.is_reachable(1, 2, "a")  # still cut by the second isolation
    assert net.is_reachable(1, 3, "a")
    assert not net.is_reachable(2, 3, "a")
    net.heal(second)
    assert not net.cut_links
    net.partition([1]), net.cut(2, 3, both=False)
    net.heal_all()
    assert not net.cut_links and not net.active_cuts
    assert reachable(net) == pairs([1, 2, 3, 4, 5])
