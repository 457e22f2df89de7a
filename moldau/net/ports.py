"""Free TCP ports for servers started moments later: local clusters, test brokers, benchmarks, Spark daemons.

Binding port 0 makes the kernel pick a port from its ephemeral range, the range it also takes the local
port of every outgoing connection from. A port found that way and handed to a server that starts a little
later can be taken in between by an outgoing connection, or by a peer already retrying to reach that very
server: on loopback, a connect from port P to port P where nothing listens yet connects the socket to itself
(TCP simultaneous open) and holds P, so the server fails with "address already in use". Ports are therefore
picked at random outside the ephemeral range, where the kernel never hands out local ports.

A port handed out is not handed out again by this process for the next `REMEMBERED_PORTS` picks: until its
server binds it, a probe finds it free, and two servers given one port may both bind it (two sockets with
SO_REUSEADDR can, while neither listens yet), the second to listen then serving the first one's clients.

That memory is one process's. Processes that pick ports at the same moment (test suites run by several workers)
take disjoint slices of the range instead: with `MOLDAU_PORT_SLICE=i/n` in the environment (which the processes
they start inherit), only ports whose remainder modulo n is i are picked.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import socket
import threading
from pathlib import Path

HOST = "127.0.0.1"
EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LINUX_DEFAULT_EPHEMERAL_RANGE = (32768, 60999)
# Below this are the well-known ports and the registered ports of common services.
LOWEST_PORT = 10_000
# How many of the latest ports handed out are not handed out again (a local cluster takes a few per node).
REMEMBERED_PORTS = 4096
PORT_SLICE_ENV = "MOLDAU_PORT_SLICE"
_handed_out: dict[int, None] = {}  # oldest first
_handed_out_lock = threading.Lock()


def ephemeral_range() -> tuple[int, int]:
    """The kernel's ephemeral port range, inclusive (Linux's default where it cannot be read)."""
    try:
        low, high = (int(field) for field in EPHEMERAL_RANGE_FILE.read_text().split())
    except (OSError, ValueError):
        return LINUX_DEFAULT_EPHEMERAL_RANGE
    return low, high


def port_slice() -> tuple[int, int]:
    """`(i, n)` from `MOLDAU_PORT_SLICE=i/n`: this process picks only ports p with p % n == i; `(0, 1)` unset."""
    value = os.environ.get(PORT_SLICE_ENV, "").strip()
    if not value:
        return 0, 1
    index, _, count = value.partition("/")
    try:
        parsed = int(index), int(count)
    except ValueError:
        parsed = (-1, 0)
    if not 0 <= parsed[0] < parsed[1]:
        raise ValueError(f"{PORT_SLICE_ENV} must be i/n with 0 <= i < n, not {value!r}")
    return parsed


def free_ports(count: int, host: str = HOST, rng: random.Random | None = None) -> list[int]:
    """`count` distinct ports on `host` that nothing is bound to right now, outside the ephemeral range.

    Each candidate is probed by binding it, and the probes are held open together so that the ports are
    distinct. Where the ephemeral range leaves too few ports outside it, the kernel's choice is taken.
    """
    low, high = ephemeral_range()
    index, slices = port_slice()
    with _handed_out_lock:
        candidates = [port for port in range(LOWEST_PORT, 65536)
                      if port % slices == index and not low <= port <= high and port not in _handed_out]
        (rng or random.Random()).shuffle(candidates)
        with contextlib.ExitStack() as stack:
            found: list[int] = []
            for port in [*candidates, *([0] * count)]:
                if len(found) == count:
                    break
                probe = stack.enter_context(socket.socket())
                try:
                    probe.bind((host, port))
                except OSError as exc:
                    if exc.errno != errno.EADDRINUSE:
                        raise
                    continue
                found.append(int(probe.getsockname()[1]))
        _remember(found)
        return found


def _remember(found: list[int]) -> None:
    for port in found:
        _handed_out.pop(port, None)
        _handed_out[port] = None
    while len(_handed_out) > REMEMBERED_PORTS:
        del _handed_out[next(iter(_handed_out))]


def free_port(host: str = HOST) -> int:
    """One port as `free_ports` picks them."""
    return free_ports(1, host)[0]
