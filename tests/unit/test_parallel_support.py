"""The machinery that runs the suite on several workers (tests/support/parallel.py)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from moldau.net import ports
from tests.support import parallel

WAIT_S = 0.3


def _try_in_thread(lock: parallel.MachineLock, exclusive: bool, log: list[str], name: str) -> threading.Thread:
    def take() -> None:
        with lock.held(exclusive):
            log.append(name)

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    return thread


def test_an_exclusive_test_waits_for_the_shared_ones_and_they_for_it(tmp_path: Path) -> None:
    lock = parallel.MachineLock(tmp_path)
    log: list[str] = []
    with lock.held(exclusive=False):
        second_shared = _try_in_thread(lock, False, log, "shared")
        second_shared.join(WAIT_S)
        assert log == ["shared"]  # shared with shared: at once
        exclusive = _try_in_thread(lock, True, log, "exclusive")
        exclusive.join(WAIT_S)
        assert exclusive.is_alive() and log == ["shared"]
    exclusive.join(5)
    assert log == ["shared", "exclusive"]


def test_tests_starting_while_an_exclusive_one_waits_queue_behind_it(tmp_path: Path) -> None:
    lock = parallel.MachineLock(tmp_path)
    log: list[str] = []
    with lock.held(exclusive=False):
        exclusive = _try_in_thread(lock, True, log, "exclusive")
        time.sleep(WAIT_S)  # the exclusive test is waiting now
        late_shared = _try_in_thread(lock, False, log, "late shared")
        late_shared.join(WAIT_S)
        assert log == []  # without the turnstile it would have joined the running shared test
    exclusive.join(5)
    late_shared.join(5)
    assert log == ["exclusive", "late shared"]


class _Item:
    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid


def test_the_slow_tiers_are_handed_out_first_and_files_keep_their_order() -> None:
    collected = ["tests/unit/test_a.py::t", "tests/compat/test_b.py::t1", "tests/spark/test_c.py::t",
                 "tests/compat/test_b.py::t2", "tests/cluster/test_d.py::t", "tests/compat/test_a.py::t",
                 "tests/test_top.py::t"]
    items: list[Any] = [_Item(nodeid) for nodeid in collected]
    parallel.order_for_workers(items)
    assert [item.nodeid for item in items] == [
        "tests/spark/test_c.py::t", "tests/cluster/test_d.py::t", "tests/compat/test_b.py::t1",
        "tests/compat/test_b.py::t2", "tests/compat/test_a.py::t", "tests/unit/test_a.py::t", "tests/test_top.py::t"]


def test_spark_files_are_one_unit_of_work_and_other_files_one_each() -> None:
    assert parallel.work_unit("tests/spark/test_pipelines.py::test_x") == "tests/spark/"
    assert parallel.work_unit("tests/spark/test_exactly_once_sink.py::C::test_y") == "tests/spark/"
    assert parallel.work_unit("tests/compat/test_sasl.py::test_z[plain]") == "tests/compat/test_sasl.py"


def test_each_worker_and_what_it_starts_pick_ports_from_their_own_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ports.PORT_SLICE_ENV, "0/1")  # restored after the test, whatever worker_setup sets
    parallel.worker_setup({"workerid": "gw1", "workercount": 2})
    assert ports.port_slice() == (1, 2)
