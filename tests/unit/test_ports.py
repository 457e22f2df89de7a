"""Free ports for servers are picked outside the kernel's ephemeral range, distinct, and not in use."""

from __future__ import annotations

import random
import socket
from pathlib import Path

import pytest

from moldau.net import ports


class FirstPort(random.Random):
    """A shuffle that puts `port` first, to make the probe meet it."""

    def __init__(self, port: int) -> None:
        super().__init__(0)
        self.port = port

    def shuffle(self, x: list[int]) -> None:  # type: ignore[override]
        x.remove(self.port)
        x.insert(0, self.port)


def test_ports_are_distinct_and_outside_the_ephemeral_range() -> None:
    low, high = ports.ephemeral_range()
    found = ports.free_ports(200)
    assert len(set(found)) == 200
    assert all(ports.LOWEST_PORT <= port <= 65535 and not low <= port <= high for port in found)


def test_a_port_handed_out_is_not_handed_out_again_before_its_server_binds_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    four_left = tmp_path / "ip_local_port_range"
    four_left.write_text("10000\t65531\n")  # outside it only 65532-65535
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE_FILE", four_left)
    monkeypatch.delenv(ports.PORT_SLICE_ENV, raising=False)  # all four, whichever slice this test process has
    # What earlier tests in this process were handed out is remembered too: of 4 ports, one may be among them.
    monkeypatch.setattr(ports, "_handed_out", {})
    # The same shuffle twice, and the first two still unbound: a probe alone would find them free again.
    first = ports.free_ports(2, rng=random.Random(1))
    second = ports.free_ports(2, rng=random.Random(1))
    assert sorted(first + second) == [65532, 65533, 65534, 65535]


def test_only_the_latest_ports_are_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "REMEMBERED_PORTS", 5)
    first = ports.free_port()
    ports.free_ports(5)
    assert first in ports.free_ports(1, rng=FirstPort(first))  # forgotten after five newer ones


def test_a_port_in_use_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "REMEMBERED_PORTS", 0)  # so that the shuffle below can offer `busy` again
    busy = ports.free_port()
    with socket.socket() as listener:
        listener.bind((ports.HOST, busy))
        listener.listen()
        found = ports.free_ports(3, rng=FirstPort(busy))
    assert busy not in found and len(set(found)) == 3


def test_the_kernels_choice_when_no_port_lies_outside_the_ephemeral_range(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = tmp_path / "ip_local_port_range"
    whole.write_text("1024\t65535\n")
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE_FILE", whole)
    assert ports.ephemeral_range() == (1024, 65535)
    found = ports.free_ports(3)
    assert len(set(found)) == 3 and all(1024 <= port <= 65535 for port in found)


def test_an_unreadable_range_falls_back_to_linux_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE_FILE", tmp_path / "missing")
    assert ports.ephemeral_range() == ports.LINUX_DEFAULT_EPHEMERAL_RANGE


def test_a_slice_of_the_range_keeps_processes_picking_at_once_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ports.PORT_SLICE_ENV, "1/3")
    assert all(port % 3 == 1 for port in ports.free_ports(50))
    monkeypatch.setenv(ports.PORT_SLICE_ENV, "0/3")
    assert all(port % 3 == 0 for port in ports.free_ports(50))


@pytest.mark.parametrize("value", ["2/2", "-1/2", "1", "a/b", "0/0"])
def test_a_malformed_slice_is_refused_with_its_name(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(ports.PORT_SLICE_ENV, value)
    with pytest.raises(ValueError, match=ports.PORT_SLICE_ENV):
        ports.free_port()
