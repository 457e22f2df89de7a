"""Kafka's socket settings reach the broker's sockets: `socket.listen.backlog.size`, `socket.send.buffer.bytes`
and `socket.receive.buffer.bytes`, read back from the kernel with `ss` (iproute2)."""

from __future__ import annotations

import re
import socket
import subprocess

import pytest
from confluent_kafka import Producer

from tests.support.broker_process import BrokerProcess


def ss(*args: str) -> str:
    return subprocess.run(["ss", "-H", "-n", *args], capture_output=True, text=True, check=True, timeout=10).stdout


def server_side_buffers(port: int) -> list[tuple[int, int]]:
    """(receive, send) buffer sizes of each established connection the broker accepted on `port`."""
    out = ss("-t", "-m", "state", "established", f"( sport = :{port} )")
    return [(int(rb), int(tb)) for rb, tb in re.findall(r"skmem:\(r\d+,rb(\d+),t\d+,tb(\d+)", out)]


def listen_backlog(port: int) -> int:
    """The listening socket's backlog (ss shows it as Send-Q)."""
    state, _receive_queue, backlog, *_ = ss("-t", "-l", f"( sport = :{port} )").split()
    assert state == "LISTEN"
    return int(backlog)


@pytest.mark.broker_config({"socket.listen.backlog.size": "7", "socket.send.buffer.bytes": "65536",
                            "socket.receive.buffer.bytes": "32768"})
def test_the_configured_backlog_and_buffer_sizes_are_the_sockets_and_clients_are_served(
        broker: BrokerProcess) -> None:
    assert listen_backlog(broker.port) == 7
    with socket.create_connection(("127.0.0.1", broker.port)):
        # Linux reports twice the size asked for (it counts its own bookkeeping in the buffer).
        assert server_side_buffers(broker.port) == [(2 * 32768, 2 * 65536)]
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("sockets", b"x" * 200_000)
    assert producer.flush(30) == 0


def test_by_default_the_operating_system_sizes_the_buffers(broker: BrokerProcess) -> None:
    # What the kernel gives a socket nobody sized (net.ipv4.tcp_rmem and tcp_wmem), not 2 x Kafka's 102400.
    with socket.create_server(("127.0.0.1", 0)) as plain:
        port = plain.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)):
            unsized = server_side_buffers(port)
    with socket.create_connection(("127.0.0.1", broker.port)):
        assert server_side_buffers(broker.port) == unsized
    assert listen_backlog(broker.port) == 1024
