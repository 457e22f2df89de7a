"""The adapter between raw frames and kio's typed entities.

kio (pinned in pyproject.toml) decodes and encodes every request and response version. This module adds what
a broker needs around it:

- the request header is parsed here with `struct`, before kio is involved, so that an unknown API key or an
  unsupported version is recognised without decoding the body (and ApiVersions can answer it, KIP-511);
- request header v0 (no client id) is not accepted: no current client sends it;
- every body is bounds-checked against its schema before kio sees it (`moldau.protocol.body_check`): kio's
  native readers trust declared lengths, and a huge one aborts the process;
- unknown tagged fields, which kio rejects with KeyError, are skipped as the protocol requires, by stripping
  them and decoding again (`moldau.protocol.tagged`);
- kio's readers reject writable buffers, so frames are handed over as `bytes`.
"""

from __future__ import annotations

import asyncio
import io
import struct
from collections.abc import Awaitable
from dataclasses import dataclass, fields
from functools import cache
from typing import Any, NamedTuple

from kio.index import load_payload_module
from kio.schema.index import api_key_map
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from moldau.protocol import tagged
from moldau.protocol.body_check import BodyCheckError, check_body
from moldau.protocol.wire import ResponsePart

_HEADER_FIXED = struct.Struct(">hhih")  # api key, api version, correlation id, client id length
_RESPONSE_HEADER = struct.Struct(">i")
_EMPTY_TAGGED_FIELDS = b"\x00"


class InvalidRequest(Exception):
    """A frame that cannot be decoded; Kafka's answer is to close the connection."""


class MalformedBody(InvalidRequest):
    """A request whose header is sound but whose body breaks its schema: answerable with INVALID_REQUEST."""


class CloseConnection(InvalidRequest):
    """A valid request whose only possible answer is closing the connection (a failed acks=0 produce)."""


class RequestHeader(NamedTuple):
    """A request's header fields. A named tuple: one is made per request, and a frozen dataclass costs several
    times as much to build."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int  # where the request body starts within the frame


@dataclass(frozen=True, slots=True)
class ApiSchema:
    """The kio classes for one (API key, version), and the header formats they use."""

    api_key: int
    version: int
    request_type: Any
    response_type: Any
    response_module: Any
    flexible_request: bool
    flexible_response_header: bool


def parse_request_header(frame: bytes | memoryview) -> RequestHeader:
    """Parse api key, version, correlation id and client id (header v1 fields).

    For flexible versions (header v2) the tagged-field section that follows is skipped by
    `body_offset_after_tags`, which needs to know the version's flexibility first.
    """
    if len(frame) < _HEADER_FIXED.size:
        raise InvalidRequest(f"request of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id, client_id_len = _HEADER_FIXED.unpack_from(frame)
    pos = _HEADER_FIXED.size
    client_id: str | None = None
    if client_id_len >= 0:
        end = pos + client_id_len
        if end > len(frame):
            raise InvalidRequest("client id runs past the end of the frame")
        try:
            client_id = bytes(frame[pos:end]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRequest("client id is not UTF-8") from exc
        pos = end
    elif client_id_len != -1:
        raise InvalidRequest(f"invalid client id length {client_id_len}")
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def skip_tagged_fields(frame: bytes | memoryview, pos: int) -> int:
    """Skip a tagged-field section (all tags in a request header are unknown to us); return the new position."""
    count, pos = read_uvarint(frame, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(frame, pos)
        size, pos = read_uvarint(frame, pos)
        pos += size
        if pos > len(frame):
            raise InvalidRequest("tagged field runs past the end of the frame")
    return pos


def read_uvarint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise InvalidRequest("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise InvalidRequest("varint longer than 5 bytes")


@cache
def api_schema(api_key: int, version: int) -> ApiSchema:
    """kio's classes for this API version. Raises KeyError if kio does not know it."""
    name = api_key_map[api_key]
    request_module = load_payload_module(api_key, version, EntityType.request)
    response_module = load_payload_module(api_key, version, EntityType.response)
    request_type = _payload_class(request_module, "Request")
    response_type = _payload_class(response_module, "Response")
    if request_type is None or response_type is None:
        raise KeyError(f"kio has no payload classes for {name} v{version}")
    response_header = response_type.__header_schema__.__module__
    return ApiSchema(
        api_key=api_key,
        version=version,
        request_type=request_type,
        response_type=response_type,
        response_module=response_module,
        flexible_request=bool(request_type.__flexible__),
        flexible_response_header=response_header.endswith(".v1.header"),
    )


def _payload_class(module: Any, suffix: str) -> Any:
    for name in dir(module):
        obj = getattr(module, name)
        if (
            isinstance(obj, type)
            and name.endswith(suffix)
            and getattr(obj, "__type__", None) in (EntityType.request, EntityType.response)
        ):
            return obj
    return None


def body_start(schema: ApiSchema, frame: bytes | memoryview, header: RequestHeader) -> int:
    """Where the request body starts: after the header and, for flexible versions, its tagged fields."""
    if schema.flexible_request:
        return skip_tagged_fields(frame, header.body_offset)
    return header.body_offset


def decode_request(schema: ApiSchema, frame: bytes | memoryview, header: RequestHeader) -> Any:
    """Decode the request body that follows the header.

    Raises MalformedBody when the body breaks its schema's sizes or nullability, InvalidRequest otherwise.
    """
    return decode_body(schema, frame, body_start(schema, frame, header))


def decode_body(schema: ApiSchema, frame: bytes | memoryview, pos: int) -> Any:
    """Decode the request body starting at `pos` with kio, after the bounds check (see `decode_request`).

    The direct decoders of hot requests fall back on this for anything unusual (tagged fields, a malformed body),
    so that such requests get exactly the answers the generic path gives."""
    try:
        check_body(schema.request_type, frame, pos)
    except BodyCheckError as exc:
        raise MalformedBody(f"{schema.request_type.__name__} v{schema.version}: {exc}") from exc
    reader = _reader(schema.request_type)
    try:
        return reader(frame, pos)[0]
    except KeyError:
        # An unknown tagged field: strip every tag kio does not know and decode again.
        try:
            return reader(tagged.strip_unknown_tagged_fields(schema.request_type, frame, pos), 0)[0]
        except Exception as exc:
            raise InvalidRequest(f"cannot decode {schema.request_type.__name__}: {exc}") from exc
    except Exception as exc:
        raise InvalidRequest(f"cannot decode {schema.request_type.__name__}: {exc}") from exc


@cache
def _reader(entity_type: Any) -> Any:
    return entity_reader(entity_type)


_WRITERS: dict[type, Any] = {}


def _writer(entity_type: type) -> Any:
    writer = _WRITERS.get(entity_type)
    if writer is None:
        writer = _WRITERS[entity_type] = entity_writer(entity_type)
    return writer


@dataclass(slots=True)  # one per Produce and Fetch response: not frozen, whose __init__ costs more
class EncodedBody:
    """A response body a handler encoded itself (Fetch, to pass record batches on without copies)."""

    parts: list[ResponsePart]


class DirectBody:
    """A response a handler built as a small object that encodes itself (OffsetCommit, Heartbeat): kio's generated
    encoder checks every field's type at run time, a large share of what a small request costs.

    Subclasses are slotted dataclasses with a `throttle_time_ms` field, which dispatch raises when a quota
    throttles the request."""

    throttle_time_ms: int

    def encode(self, version: int) -> list[ResponsePart]:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class DeferredBody:
    """A response a handler finishes later (an acks=all Produce waiting for its followers): the connection goes on
    serving the requests after it meanwhile and still writes every response in request order."""

    body: Awaitable[EncodedBody]


@dataclass(frozen=True, slots=True)
class PendingResponse:
    """What dispatch returns for a `DeferredBody`: the response frame's parts, once the handler finishes."""

    parts: asyncio.Future[list[ResponsePart]]


def encode_response(schema: ApiSchema, correlation_id: int, response: Any) -> list[ResponsePart]:
    """Encode header and body, as parts ready for `framing.frame`."""
    header = _RESPONSE_HEADER.pack(correlation_id)
    if schema.flexible_response_header:
        header += _EMPTY_TAGGED_FIELDS
    if isinstance(response, EncodedBody):
        return [header, *response.parts]
    if isinstance(response, DirectBody):
        return [header, *response.encode(schema.version)]
    body = io.BytesIO()
    _writer(type(response))(body, response)
    return [header, body.getvalue()]


@cache
def _field_names(entity_type: Any) -> frozenset[str]:
    return frozenset(f.name for f in fields(entity_type))


def make(entity_type: Any, **values: Any) -> Any:
    """Build a kio entity of any version from values named as in the newest version.

    Handlers serve many versions of one API; each version is its own kio class with a subset of fields.
    Values for fields this version does not have are dropped, missing ones take the class default.
    """
    names = _field_names(entity_type)
    return entity_type(**{k: v for k, v in values.items() if k in names})


def nested(schema: ApiSchema, class_name: str) -> Any:
    """A nested entity class of this version's response, e.g. nested(schema, 'MetadataResponseTopic')."""
    return getattr(schema.response_module, class_name)
