"""The garbage collector's pause around steps that make many lasting objects."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from moldau.server.collector import paused


@pytest.fixture
def collector_enabled() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


@pytest.mark.usefixtures("collector_enabled")
def test_no_collection_runs_inside_and_collections_resume_after() -> None:
    collections: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.callbacks.append(count)
    try:
        with paused():
            assert not gc.isenabled()
            lasting = [[i] for i in range(50_000)]  # enough allocations to trigger young collections
            assert collections == []
        assert gc.isenabled()
        more = [[i] for i in range(50_000)]
        assert collections, "allocations after the block trigger collections again"
    finally:
        gc.callbacks.remove(count)
    assert len(lasting) == len(more)


@pytest.mark.usefixtures("collector_enabled")
def test_an_inner_pause_leaves_the_outer_one_in_force() -> None:
    with paused():
        with paused():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


@pytest.mark.usefixtures("collector_enabled")
def test_the_collector_is_enabled_again_when_the_block_raises() -> None:
    with pytest.raises(RuntimeError), paused():
        raise RuntimeError("hosting failed")
    assert gc.isenabled()
