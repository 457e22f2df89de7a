"""How a record's bytes show in the console.

A key or value in Confluent's wire format (magic byte 0, a 4-byte big-endian schema id, the payload) whose id the
node's schema registry knows is decoded with that schema: Avro through fastavro, JSON Schema as the JSON document
it is, Protobuf by compiling the writer's .proto (and its imports) and parsing the message its message indexes name.
Anything else is UTF-8 text (pretty-printed when it is a JSON object or array) or, when it is not text, binary
shown as hex and base64, never as raw bytes in the page.

Schemas are fetched once per id (an id always names the same schema) and kept in a bounded cache shared by
requests; decoding runs in the request's worker thread, never in the broker's event loop.
"""

from __future__ import annotations

import base64
import io
import json
import struct
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastavro import schemaless_reader
from google.protobuf import json_format  # type: ignore[import-untyped]

from moldau.registry.formats import parse_schema
from moldau.registry.formats.avro import AvroSchema
from moldau.registry.formats.protobuf import ProtobufSchema
from moldau.registry.rest_client import RegistryClient, RegistryError, resolve_references
from moldau.registry.validation import read_message_indexes

__all__ = ["SchemaDecoder", "Shown", "ShownHeader", "show_bytes", "show_header"]

SHOWN_BYTES_MAX = 64 * 1024  # larger keys/values are cut in the page (the size is still shown)
HEX_BYTES_MAX = 1024
_SCHEMA_CACHE_ENTRIES = 256
_REGISTRY_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Shown:
    """A key or value as the page shows it."""

    kind: str  # "null", "text", "json", "binary", "avro", "json-schema", "protobuf"
    text: str  # what the page prints (pretty JSON, text, or hex)
    size: int  # bytes on the wire
    base64: str = ""  # for binary: the bytes, base64 (cut like text)
    schema_id: int | None = None
    subject: str | None = None  # a subject holding the schema, for the link
    version: int | None = None
    error: str | None = None  # why a wire-format record could not be decoded
    truncated: bool = False


@dataclass(frozen=True)
class ShownHeader:
    key: str
    value: str
    binary: bool


@dataclass
class _Schema:
    parsed: Any
    subject: str | None
    version: int | None


class SchemaDecoder:
    """Decodes wire-format bytes through one registry; None `url` means the node runs no registry.

    Schemas are cached by id for good (ids are never reused); that an id is unknown, or that the registry could
    not be reached, is remembered for FAILURE_TTL_S only, so a page of records with the same failing id asks once,
    and a schema registered later, or a registry back up, shows on a later page."""

    FAILURE_TTL_S = 10.0

    def __init__(self, url: str | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.url = url
        self.clock = clock
        self._cache: OrderedDict[int, _Schema] = OrderedDict()
        self._failures: dict[int, tuple[float, RegistryError | None]] = {}  # id -> (until, error or unknown)
        self._lock = threading.Lock()  # requests decode in worker threads at the same time

    def decode(self, data: bytes) -> Shown | None:
        """The record decoded with its writer's schema, None when it is not in the wire format of a known id.
        Raises RegistryError when the registry cannot answer."""
        if self.url is None or len(data) < 5 or data[0] != 0:
            return None
        schema_id = struct.unpack_from(">I", data, 1)[0]
        schema = self._schema(schema_id)
        if schema is None:
            return None
        try:
            kind, value = _decode_payload(schema.parsed, data)
            text = json.dumps(value, indent=2, ensure_ascii=False, default=_json_default)
        except Exception as exc:  # any decoder's error: show the bytes and say why they did not decode
            fallback = show_plain(data)
            return Shown(fallback.kind, fallback.text, len(data), fallback.base64, schema_id, schema.subject,
                         schema.version, error=f"does not decode with schema {schema_id}: {exc}",
                         truncated=fallback.truncated)
        text, truncated = _cut(text)
        return Shown(kind, text, len(data), schema_id=schema_id, subject=schema.subject, version=schema.version,
                     truncated=truncated)

    def _schema(self, schema_id: int) -> _Schema | None:
        with self._lock:
            if schema_id in self._cache:
                self._cache.move_to_end(schema_id)
                return self._cache[schema_id]
            failure = self._failures.get(schema_id)
            if failure is not None and failure[0] > self.clock():
                if failure[1] is not None:
                    raise failure[1]
                return None
        try:
            schema = self._fetch(schema_id)
        except RegistryError as exc:
            with self._lock:
                self._remember_failure(schema_id, exc)
            raise
        with self._lock:
            if schema is None:
                self._remember_failure(schema_id, None)
                return None
            self._cache[schema_id] = schema
            if len(self._cache) > _SCHEMA_CACHE_ENTRIES:
                self._cache.popitem(last=False)
        return schema

    def _remember_failure(self, schema_id: int, error: RegistryError | None) -> None:
        """Called with the lock held."""
        now = self.clock()
        self._failures = {k: v for k, v in self._failures.items() if v[0] > now}
        self._failures[schema_id] = (now + self.FAILURE_TTL_S, error)

    def _fetch(self, schema_id: int) -> _Schema | None:
        assert self.url is not None
        registry = RegistryClient(self.url, timeout_s=_REGISTRY_TIMEOUT_S)
        try:
            answer = registry.get(f"/schemas/ids/{schema_id}")
            references = resolve_references(registry, answer.get("references") or [])
            holders = registry.get(f"/schemas/ids/{schema_id}/versions")
        except RegistryError as exc:
            if exc.status == 404:
                return None  # bytes that only look like the wire format
            raise
        try:
            parsed = parse_schema(answer.get("schemaType", "AVRO"), answer["schema"], references)
        except Exception:  # a schema that no longer parses: show the bytes instead
            return None
        holder = holders[0] if holders else {}
        return _Schema(parsed, holder.get("subject"), holder.get("version"))


def show_bytes(data: bytes | None, decoder: SchemaDecoder) -> Shown:
    if data is None:
        return Shown("null", "null", 0)
    try:
        decoded = decoder.decode(data)
    except RegistryError as exc:
        plain = show_plain(data)
        return Shown(plain.kind, plain.text, plain.size, plain.base64, error=str(exc), truncated=plain.truncated)
    return decoded if decoded is not None else show_plain(data)


def show_plain(data: bytes) -> Shown:
    """Bytes without a schema: JSON pretty-printed, other text as it is, binary as hex and base64."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return _binary(data)
    if not _printable(text):
        return _binary(data)
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            pretty = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except (ValueError, RecursionError):
            pass
        else:
            shown, truncated = _cut(pretty)
            return Shown("json", shown, len(data), truncated=truncated)
    shown, truncated = _cut(text)
    return Shown("text", shown, len(data), truncated=truncated)


def show_header(key: str, value: bytes | None) -> ShownHeader:
    if value is None:
        return ShownHeader(key, "null", False)
    try:
        text = value.decode("utf-8")
        if _printable(text):
            return ShownHeader(key, _cut(text)[0], False)
    except UnicodeDecodeError:
        pass
    return ShownHeader(key, value[:HEX_BYTES_MAX].hex(" "), True)


def _binary(data: bytes) -> Shown:
    head = data[:HEX_BYTES_MAX]
    hex_text = "\n".join(head[i:i + 16].hex(" ") for i in range(0, len(head), 16))
    return Shown("binary", hex_text, len(data), base64.b64encode(data[:SHOWN_BYTES_MAX]).decode(),
                 truncated=len(data) > HEX_BYTES_MAX)


def _decode_payload(parsed: Any, data: bytes) -> tuple[str, Any]:
    if isinstance(parsed, AvroSchema):
        stream = io.BytesIO(data)
        stream.seek(5)
        return "avro", schemaless_reader(stream, parsed.parsed, None)
    if isinstance(parsed, ProtobufSchema):
        indexes, start = read_message_indexes(data, 5)
        message = parsed.message_class(indexes).FromString(data[start:])
        return "protobuf", json_format.MessageToDict(message)
    return "json-schema", json.loads(data[5:])


def _printable(text: str) -> bool:
    return text.isprintable() or all(c.isprintable() or c in "\n\r\t" for c in text)


def _cut(text: str) -> tuple[str, bool]:
    if len(text) <= SHOWN_BYTES_MAX:
        return text, False
    return text[:SHOWN_BYTES_MAX], True


def _json_default(value: Any) -> Any:
    """Avro's bytes and fixed as hex, decimals, dates, times and UUIDs as their string form."""
    if isinstance(value, bytes):
        return value.hex()
    return str(value)
