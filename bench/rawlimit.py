"""Raw limit: how fast this machine moves bytes the way a broker's ingest path does, with no broker at all.

One process writes SIZE bytes over loopback TCP in 1 MiB writes; another process receives them into a
reused buffer and either discards them ("loopback, discard") or appends them to a file in a temporary
directory, i.e. to the page cache ("loopback, file append"). Prints MB/s (10^6 bytes) for both.

"loopback, file append" deletes its file after each pass, so the next pass (and whatever writes next) is
handed the pages just freed, which on a virtual machine are the cheap ones to write into. A log keeps what
it writes: its appends always go into pages nobody freed a moment ago. The third figure, "loopback, file
append, kept pages" (``--kept``), measures that: each pass appends into a new file, and every pass's file
is kept until all passes are done; these passes run first, before any other figure has freed pages.

All three use one sender and one receiver. The raw-protocol driver's default load is several sender processes
with several connections each, and on a machine with few cores those senders take CPU the receiver would
otherwise have. The fourth figure, "loopback, file append, in the driver's shape" (``--shape PROCESSES
CONNECTIONS``), measures that: PROCESSES sender processes, each with CONNECTIONS threads on connections of their
own, send to one receiver process, which reads every connection as data arrives (``selectors``) and appends what
it reads to one file, deleted after each pass as for "file append".

The broker scenarios measure these figures in the same run and report throughput as a ratio to them.

Run from the repository root:
    python -m bench.rawlimit [SIZE_MB] [--chunk-kb 1024] [--repeat 1] [--kept] [--shape PROCESSES CONNECTIONS]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import selectors
import socket
import tempfile
import threading
import time
from multiprocessing.queues import Queue

MIB = 2**20
DEFAULT_SIZE_MB = 2048
QUICK_SIZE_MB = 512


def _receive(listener: socket.socket, size: int, chunk: int, path: str | None, keep: bool,
             out: Queue[float]) -> None:
    conn, _ = listener.accept()
    buffer = memoryview(bytearray(chunk))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND) if path else -1
    received, start = 0, time.perf_counter()
    while received < size:
        count = conn.recv_into(buffer)
        if not count:
            break
        if fd >= 0:
            os.write(fd, buffer[:count])
        received += count
    out.put(received / (time.perf_counter() - start) / 1e6)
    if fd >= 0:
        os.close(fd)
        if not keep:
            os.unlink(path or "")
    conn.close()


def _send(address: tuple[str, int], size: int, chunk: int) -> None:
    payload = os.urandom(chunk)
    with socket.create_connection(address) as conn:
        for _ in range(size // chunk):
            conn.sendall(payload)


def measure(size: int, chunk: int = MIB, path: str | None = None, keep: bool = False) -> float:
    """MB/s of ``size`` bytes sent over loopback in ``chunk`` writes, appended to ``path`` if given (and the
    file deleted afterwards unless ``keep``)."""
    ctx = mp.get_context("fork")
    listener = socket.create_server(("127.0.0.1", 0))
    out: Queue[float] = ctx.Queue()
    receiver = ctx.Process(target=_receive, args=(listener, size, chunk, path, keep, out))
    receiver.start()
    try:
        _send(listener.getsockname(), size, chunk)
        return out.get(timeout=300)
    finally:
        receiver.join(30)
        listener.close()


def _receive_many(listener: socket.socket, connections: int, size: int, chunk: int, path: str,
                  out: Queue[tuple[int, float]]) -> None:
    accepted = [listener.accept()[0] for _ in range(connections)]
    selector = selectors.DefaultSelector()
    for conn in accepted:
        conn.setblocking(False)
        selector.register(conn, selectors.EVENT_READ, memoryview(bytearray(chunk)))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND)
    received, open_count, start = 0, connections, time.perf_counter()
    while received < size and open_count:
        for key, _ in selector.select():
            sock, buffer = key.fileobj, key.data
            assert isinstance(sock, socket.socket)
            try:
                count = sock.recv_into(buffer)
            except BlockingIOError:
                continue
            if not count:
                selector.unregister(sock)
                open_count -= 1
                continue
            os.write(fd, buffer[:count])
            received += count
    out.put((received, received / (time.perf_counter() - start) / 1e6))
    selector.close()
    os.close(fd)
    os.unlink(path)
    for conn in accepted:
        conn.close()


def _send_threads(address: tuple[str, int], size: int, chunk: int, connections: int) -> None:
    threads = [threading.Thread(target=_send, args=(address, size, chunk)) for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def measure_shaped(size: int, processes: int, connections: int, path: str, chunk: int = MIB) -> float:
    """MB/s of ``size`` bytes sent over loopback by ``processes`` processes of ``connections`` connections each
    (``chunk`` writes) to one receiver appending to ``path`` (deleted afterwards)."""
    ctx = mp.get_context("fork")
    total = processes * connections
    per_connection = max(chunk, size // total // chunk * chunk)
    expected = per_connection * total
    listener = socket.create_server(("127.0.0.1", 0), backlog=total)
    results: Queue[tuple[int, float]] = ctx.Queue()
    receiver = ctx.Process(target=_receive_many, args=(listener, total, expected, chunk, path, results))
    receiver.start()
    senders = [ctx.Process(target=_send_threads, args=(listener.getsockname(), per_connection, chunk, connections))
               for _ in range(processes)]
    try:
        for sender in senders:
            sender.start()
        received, mb_s = results.get(timeout=300)
        if received != expected:
            raise RuntimeError(f"the receiver got {received:,} bytes of {expected:,}")
        return mb_s
    finally:
        for sender in senders:
            sender.join(30)
        receiver.join(30)
        listener.close()


def raw_limits(size_mb: int, chunk_kb: int = 1024, repeat: int = 1, kept: bool = False,
               shape: tuple[int, int] | None = None) -> dict[str, float]:
    """Best of ``repeat`` runs for each figure, keyed ``discard`` and ``append``, with ``kept`` also
    ``append_kept`` (appends into files kept until all its passes are done, measured first), and with ``shape``
    (processes, connections) also ``append_shaped`` (several senders to one receiver, as the driver sends)."""
    size, chunk = size_mb * MIB, chunk_kb * 1024
    limits: dict[str, float] = {}
    if kept:
        with tempfile.TemporaryDirectory(prefix="bench-raw-kept-") as tmp:
            limits["append_kept"] = max(measure(size, chunk, os.path.join(tmp, f"log-{i}"), keep=True)
                                        for i in range(repeat))
    with tempfile.TemporaryDirectory(prefix="bench-raw-") as tmp:
        sink = os.path.join(tmp, "sink")
        limits["discard"] = max(measure(size, chunk) for _ in range(repeat))
        limits["append"] = max(measure(size, chunk, sink) for _ in range(repeat))
        if shape is not None:
            limits["append_shaped"] = max(measure_shaped(size, *shape, sink, chunk) for _ in range(repeat))
    return limits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("size_mb", nargs="?", type=int, default=DEFAULT_SIZE_MB, help="MiB to move per figure")
    parser.add_argument("--chunk-kb", type=int, default=1024, help="size of each write in KiB")
    parser.add_argument("--repeat", type=int, default=1, help="runs per figure; the best is printed")
    parser.add_argument("--kept", action="store_true",
                        help="also measure appends into files that are kept, as a log keeps its segments")
    parser.add_argument("--shape", type=int, nargs=2, metavar=("PROCESSES", "CONNECTIONS"),
                        help="also measure appends from PROCESSES senders of CONNECTIONS connections each")
    args = parser.parse_args()
    shape = (args.shape[0], args.shape[1]) if args.shape else None
    limits = raw_limits(args.size_mb, args.chunk_kb, args.repeat, args.kept, shape)
    print(f"loopback, discard:     {limits['discard']:8.0f} MB/s")
    print(f"loopback, file append: {limits['append']:8.0f} MB/s")
    if args.kept:
        print(f"loopback, file append, kept pages: {limits['append_kept']:8.0f} MB/s")
    if shape:
        print(f"loopback, file append, {shape[0]} processes x {shape[1]} connections: "
              f"{limits['append_shaped']:8.0f} MB/s")


if __name__ == "__main__":
    main()
