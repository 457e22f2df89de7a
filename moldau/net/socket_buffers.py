"""Socket buffer sizes: Kafka's `socket.send.buffer.bytes` and `socket.receive.buffer.bytes` on the listeners' sockets,
and `replica.socket.receive.buffer.bytes` on followers' connections to their leaders (`moldau.net.client`).

They are set on each listening socket before it accepts anything, and on a follower's socket before it connects:
Linux gives accepted sockets the listening socket's buffer sizes, and the receive buffer must be known when the
handshake picks the TCP window scale, which is why Kafka too sets it on the server socket rather than on each
connection.
"""

from __future__ import annotations

import socket

__all__ = ["OS_DEFAULT", "size_socket_buffers"]

OS_DEFAULT = -1  # leave the size to the kernel, which grows the buffer with the connection (autotuning)


def size_socket_buffers(sock: socket.socket, send_bytes: int, receive_bytes: int) -> None:
    """Fix the socket's buffer sizes; OS_DEFAULT leaves that one alone (a fixed size turns autotuning off)."""
    if send_bytes != OS_DEFAULT:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_bytes)
    if receive_bytes != OS_DEFAULT:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_bytes)
