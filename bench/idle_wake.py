"""What a sleeping event loop costs the next request: one OffsetCommit served in process, back to back, after the
thread slept, and after it kept the core busy for as long.

A broker in this process (its listener used only to create the topic) is handed pre-encoded OffsetCommit v8
frames (``bench/raw_requests.py``) through ``Dispatcher.handle_frame``: no sockets, no client, nothing else
running. The thread CPU time (``time.thread_time_ns``) of each call is summed; between calls the thread either
goes on at once (the baseline, measured in the same run), sleeps ``--gap-us`` (``time.sleep``: the core goes
idle, as it does while a synchronous client's next request is on its way), or spins on the clock for as long
(the core stays busy with a loop that touches almost no memory, as the idle poll of ``network.idle.poll.us``
does). The ratios to the baseline say what waking costs; docs/benchmarks.md has the results.

Run from the repository root:
    python -m bench.idle_wake [--gaps-us 100,1000] [--commits 5000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import uvloop

from bench import raw_requests
from bench.common import create_topic
from bench.tables import Table, render
from moldau.config import BrokerConfig
from moldau.net.ports import free_port
from moldau.security.principal import ANONYMOUS, KafkaPrincipal
from moldau.server.broker import Broker

TOPIC = "idle-wake"
GROUP = "idle-wake-committers"
# The table adds the first column over the second: after a sleep / back to back.
COLUMNS = ["after a sleep", "back to back", "after a spin", "after a spin/back to back"]


class InProcessConnection:
    """What dispatch reads of a connection: a plaintext client connection from loopback."""

    peer = "127.0.0.1:1"
    listener = "PLAINTEXT"
    is_controller_listener = False
    principal: KafkaPrincipal = ANONYMOUS
    client_host = "127.0.0.1"
    security_protocol = "PLAINTEXT"


def sleep_for(seconds: float) -> None:
    time.sleep(seconds)


def spin_for(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def go_on(seconds: float) -> None:
    del seconds


async def cpu_per_commit(broker: Broker, frames: list[bytes], commits: int, gap_s: float,
                         between: Callable[[float], None]) -> float:
    """Microseconds of thread CPU per commit, `between(gap_s)` before each."""
    conn = InProcessConnection()
    spent = 0
    for i in range(commits):
        between(gap_s)
        started = time.thread_time_ns()
        await broker.dispatcher.handle_frame(frames[i & 1], conn)
        spent += time.thread_time_ns() - started
    return spent / commits / 1000


async def measure(args: argparse.Namespace) -> Table:
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="bench-idle-wake-") as data:
        broker = Broker(BrokerConfig.from_properties({
            "node.id": "1", "process.roles": "broker,controller", "listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "log.dirs": data, "schema.registry.listeners": "", "console.listeners": ""}))
        await broker.start()
        try:
            await asyncio.get_running_loop().run_in_executor(None, create_topic, f"127.0.0.1:{port}", TOPIC, 1)
            frames = [e.prefix(i)[4:] + e.rest
                      for i, e in enumerate(raw_requests.offset_commit(GROUP, TOPIC, 0, o) for o in (1, 2))]
            await cpu_per_commit(broker, frames, 2000, 0, go_on)  # warm-up: the group, the log, the caches
            table = Table(f"CPU us per OffsetCommit served in process, median of {args.rounds} rounds of "
                          f"{args.commits:,}", columns=COLUMNS)
            for gap_us in args.gaps_us:
                figures: dict[str, list[float]] = {"none": [], "sleep": [], "spin": []}
                for _ in range(args.rounds):
                    for name, between in (("none", go_on), ("sleep", sleep_for), ("spin", spin_for)):
                        figures[name].append(await cpu_per_commit(broker, frames, args.commits, gap_us / 1e6,
                                                                  between))
                base, slept, spun = (statistics.median(figures[k]) for k in ("none", "sleep", "spin"))
                row = table.row(f"gap {gap_us:,} us")
                row.values = dict(zip(COLUMNS, (slept, base, spun, spun / base), strict=True))
            return table
        finally:
            await broker.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gaps-us", type=lambda s: [int(x) for x in s.split(",")], default=[100, 1000],
                        help="microseconds between commits, comma separated")
    parser.add_argument("--commits", type=int, default=5000, help="commits per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per gap, the median reported")
    args = parser.parse_args()
    table = uvloop.run(measure(args))
    print(render(table, COLUMNS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
