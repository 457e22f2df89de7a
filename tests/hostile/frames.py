"""Seeded request frames for the fuzz suite: valid bodies from kio's schemas, and four ways to mangle them."""

from __future__ import annotations

import io
import random
import struct
from dataclasses import dataclass
from typing import Any

from kio.serial import entity_writer

from moldau.protocol import codec
from tests.support.entities import random_entity

KINDS = ("valid", "bitflip", "truncated", "huge_length", "random")
_HUGE_VARINTS = (b"\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x08")
_HUGE_INTS = (struct.pack(">i", 2**31 - 1), struct.pack(">i", 2**30), struct.pack(">h", 32767))


@dataclass(frozen=True, slots=True)
class FuzzFrame:
    api_key: int
    version: int
    kind: str
    correlation_id: int
    data: bytes  # size prefix included

    @property
    def body_is_intact(self) -> bool:
        return self.kind == "valid"


def request_header(api_key: int, version: int, correlation_id: int, flexible: bool) -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"fuzz"
    return header + (b"\x00" if flexible else b"")


def make_frame(schema: codec.ApiSchema, kind: str, correlation_id: int, rng: random.Random) -> FuzzFrame:
    body = _body(schema, kind, rng)
    payload = request_header(schema.api_key, schema.version, correlation_id, schema.flexible_request) + body
    return FuzzFrame(schema.api_key, schema.version, kind, correlation_id, struct.pack(">i", len(payload)) + payload)


def _body(schema: codec.ApiSchema, kind: str, rng: random.Random) -> bytes:
    if kind == "random":
        return rng.randbytes(rng.randint(0, 64))
    valid = encode(random_entity(schema.request_type, rng))
    if kind == "valid" or not valid:
        return valid
    data = bytearray(valid)
    if kind == "bitflip":
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif kind == "truncated":
        del data[rng.randrange(len(data)) :]
    else:  # huge_length: a length or count somewhere becomes enormous
        at = rng.randrange(len(data))
        data[at : at + 4] = rng.choice(_HUGE_VARINTS if schema.flexible_request else _HUGE_INTS)
    return bytes(data)


def encode(entity: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()
