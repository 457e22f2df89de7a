"""Raw limit: how fast this machine moves bytes the way a broker's ingest path does, with no broker at all.

One process writes SIZE bytes over loopback TCP in 1 MiB writes; another process receives them into a
reused buffer and either discards them ("loopback, discard") or appends them to a file in a temporary
directory, i.e. to the page cache ("loopback, file append"). Prints MB/s (10^6 bytes) for both.

The broker scenarios measure these figures in the same run and report throughput as a ratio to them.

Run from the repository root:  python -m bench.rawlimit [SIZE_MB] [--chunk-kb 1024] [--repeat 1]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import socket
import tempfile
import time
from multiprocessing.queues import Queue

MIB = 2**20
DEFAULT_SIZE_MB = 2048
QUICK_SIZE_MB = 512


def _receive(listener: socket.socket, size: int, chunk: int, path: str | None, out: Queue[float]) -> None:
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
        os.unlink(path or "")
    conn.close()


def _send(address: tuple[str, int], size: int, chunk: int) -> None:
    payload = os.urandom(chunk)
    with socket.create_connection(address) as conn:
        for _ in range(size // chunk):
            conn.sendall(payload)


def measure(size: int, chunk: int = MIB, path: str | None = None) -> float:
    """MB/s of ``size`` bytes sent over loopback in ``chunk`` writes, appended to ``path`` if given."""
    ctx = mp.get_context("fork")
    listener = socket.create_server(("127.0.0.1", 0))
    out: Queue[float] = ctx.Queue()
    receiver = ctx.Process(target=_receive, args=(listener, size, chunk, path, out))
    receiver.start()
    try:
        _send(listener.getsockname(), size, chunk)
        return out.get(timeout=300)
    finally:
        receiver.join(30)
        listener.close()


def raw_limits(size_mb: int, chunk_kb: int = 1024, repeat: int = 1) -> dict[str, float]:
    """Best of ``repeat`` runs for both figures, keyed ``discard`` and ``append``."""
    size, chunk = size_mb * MIB, chunk_kb * 1024
    with tempfile.TemporaryDirectory(prefix="bench-raw-") as tmp:
        sink = os.path.join(tmp, "sink")
        return {
            "discard": max(measure(size, chunk) for _ in range(repeat)),
            "append": max(measure(size, chunk, sink) for _ in range(repeat)),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("size_mb", nargs="?", type=int, default=DEFAULT_SIZE_MB, help="MiB to move per figure")
    parser.add_argument("--chunk-kb", type=int, default=1024, help="size of each write in KiB")
    parser.add_argument("--repeat", type=int, default=1, help="runs per figure; the best is printed")
    args = parser.parse_args()
    limits = raw_limits(args.size_mb, args.chunk_kb, args.repeat)
    print(f"loopback, discard:     {limits['discard']:8.0f} MB/s")
    print(f"loopback, file append: {limits['append']:8.0f} MB/s")


if __name__ == "__main__":
    main()
