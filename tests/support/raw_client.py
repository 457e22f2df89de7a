"""A minimal Kafka client over a plain socket, for sending exact (including malformed) bytes."""

from __future__ import annotations

import io
import socket
import ssl
import struct
from typing import Any

from kio.serial import entity_reader, entity_writer

from moldau.protocol import codec, tagged


class RawClient:
    def __init__(self, bootstrap: str, timeout_s: float = 10.0, tls: ssl.SSLContext | None = None) -> None:
        """`tls`: speak TLS with this client context (SSL and SASL_SSL listeners)."""
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        if tls is not None:
            self.sock = tls.wrap_socket(self.sock, server_hostname=host)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def encode(self, request: Any, client_id: str | None = "raw-test") -> bytes:
        self.correlation_id += 1
        api_key, version = request.__api_key__, request.__version__
        header = struct.pack(">hhi", api_key, version, self.correlation_id)
        cid = client_id.encode() if client_id is not None else None
        header += struct.pack(">h", -1) if cid is None else struct.pack(">h", len(cid)) + cid
        if request.__flexible__:
            header += b"\x00"
        body = io.BytesIO()
        entity_writer(type(request))(body, request)
        payload = header + body.getvalue()
        return struct.pack(">i", len(payload)) + payload

    def request(self, request: Any) -> Any:
        self.send_raw(self.encode(request))
        return self.read_response(request.__api_key__, request.__version__)

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._recv_exactly(4))[0]
        return self._recv_exactly(size)

    def read_response(self, api_key: int, version: int) -> Any:
        frame = self.read_frame()
        schema = codec.api_schema(api_key, version)
        correlation_id = struct.unpack_from(">i", frame)[0]
        assert correlation_id == self.correlation_id, (correlation_id, self.correlation_id)
        pos = 4 + (1 if schema.flexible_response_header else 0)
        try:
            response, _ = entity_reader(schema.response_type)(frame[pos:], 0)
        except KeyError:  # a tagged field kio's class does not declare (Moldau's own, e.g. an in-flight count)
            response, _ = entity_reader(schema.response_type)(
                tagged.strip_unknown_tagged_fields(schema.response_type, frame, pos), 0)
        return response

    def _recv_exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("connection closed by broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def is_closed_by_peer(self, timeout_s: float = 5.0) -> bool:
        """True if the broker closed the connection (EOF or reset) within the timeout."""
        self.sock.settimeout(timeout_s)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
