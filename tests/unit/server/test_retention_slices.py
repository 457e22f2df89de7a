"""The broker's retention pass rests between its slices long enough for a request in flight, which takes several
turns of the event loop, to finish: with one turn between slices, each of its turns waited behind a slice."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterator

import pytest
import uvloop

from moldau.server.broker import serve_between

TURNS_PER_REQUEST = 3  # read, handle, write
LoopFactory = Callable[[], asyncio.AbstractEventLoop] | None


def _between_slices(pause_s: float, loop_factory: LoopFactory) -> list[int]:
    """Requests a busy client finished between each two of five slices."""
    finished = 0
    counts: list[int] = []

    def slices() -> Iterator[int]:
        for _ in range(5):
            counts.append(finished)
            yield 4

    async def client() -> None:
        nonlocal finished
        while True:
            for _ in range(TURNS_PER_REQUEST):
                await asyncio.sleep(0)
            finished += 1

    async def run() -> None:
        task = asyncio.create_task(client())
        await asyncio.sleep(0)
        await serve_between(slices(), pause_s)
        task.cancel()

    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(run())
    return [later - earlier for earlier, later in itertools.pairwise(counts)]


@pytest.mark.parametrize("loop_factory", [uvloop.new_event_loop, None], ids=["uvloop", "asyncio"])
def test_requests_in_flight_finish_between_slices(loop_factory: LoopFactory) -> None:
    # The pause is the test's, long enough not to depend on the machine; the broker's is RETENTION_SLICE_PAUSE_S.
    assert all(finished >= 1 for finished in _between_slices(0.05, loop_factory))


def test_one_turn_between_slices_is_not_enough() -> None:
    # What the pause fixed: resting for a single turn, a request of three turns spans three slices.
    assert _between_slices(0.0, uvloop.new_event_loop).count(0) >= 2
