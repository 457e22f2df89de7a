"""The .proto sources protoc is given: schemas as sent (.proto text, or a base64-encoded `FileDescriptorProto` as
Confluent's serializers send them) and the imports Confluent's registry knows without references.

Confluent's clients do not send references for "known" imports: `google/protobuf/*.proto` (bundled with protoc
here), `google/type/*.proto` (read from the googleapis-common-protos package when installed) and Confluent's own
`confluent/meta.proto`, `confluent/type/decimal.proto`, ... (regenerated from the descriptors compiled into the
confluent-kafka package).
"""

from __future__ import annotations

import base64
import binascii
import importlib
import re
from collections.abc import Mapping
from importlib import resources
from typing import Any

from google.protobuf import descriptor_pb2  # type: ignore[import-untyped]
from google.protobuf.message import DecodeError  # type: ignore[import-untyped]

from moldau.registry.formats.proto_text import generate, tokens

BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
# Modules of the confluent-kafka package holding Confluent's own .proto files, compiled.
CONFLUENT_MODULES = (
    "confluent_kafka.schema_registry.confluent.meta_pb2",
    "confluent_kafka.schema_registry.confluent.type.decimal_pb2",
    "confluent_kafka.schema_registry.confluent.type.variant_pb2",
    "confluent_kafka.schema_registry.confluent.types.decimal_pb2",
)


def descriptor_from_base64(text: str) -> Any:
    """The FileDescriptorProto a base64 text encodes, or None when the text is not one (then it is .proto text:
    such text always holds characters outside base64's alphabet)."""
    stripped = text.strip()
    if not stripped or not BASE64.fullmatch(stripped):
        return None
    try:
        descriptor = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(stripped, validate=True))
    except (binascii.Error, DecodeError, ValueError):
        return None
    described = (descriptor.message_type, descriptor.enum_type, descriptor.service, descriptor.package,
                 descriptor.syntax, descriptor.dependency)
    return descriptor if any(described) else None  # bytes that merely happen to parse describe nothing


def proto_source(text: str) -> str:
    """`text` as .proto source: itself, or regenerated from the descriptor it encodes."""
    descriptor = descriptor_from_base64(text)
    return text if descriptor is None else generate(descriptor)


def imports_of(text: str) -> list[str]:
    """The paths a .proto text imports (`import [public|weak] "path";`)."""
    found = []
    words = tokens(text)
    for index, word in enumerate(words):
        if word != "import" or (index and words[index - 1] not in (";", "}")):
            continue
        rest = words[index + 1:index + 3]
        path = rest[1] if rest and rest[0] in ("public", "weak") and len(rest) > 1 else (rest[0] if rest else "")
        if len(path) >= 2 and path[0] == path[-1] and path[0] in "\"'":
            found.append(path[1:-1])
    return found


def confluent_sources() -> dict[str, str]:
    sources = {}
    for name in CONFLUENT_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        file = descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)
        sources[file.name] = generate(file)
    return sources


def known_source(path: str, confluent: dict[str, str]) -> str | None:
    if path.startswith("google/type/"):
        try:
            return resources.files("google.type").joinpath(path.removeprefix("google/type/")).read_text("utf-8")
        except (ImportError, OSError):
            return None
    return confluent.get(path)


def sources_for(main: str, text: str, references: Mapping[str, str]) -> dict[str, str]:
    """Every file protoc needs, by import path: the schema, its references, and the known imports they use and
    do not supply."""
    sources = {name: proto_source(body) for name, body in references.items()}
    sources[main] = proto_source(text)
    confluent: dict[str, str] | None = None
    pending = [path for body in sources.values() for path in imports_of(body)]
    while pending:
        path = pending.pop()
        if path in sources or path.startswith("google/protobuf/"):
            continue
        if confluent is None and path.startswith("confluent/"):
            confluent = confluent_sources()
        known = known_source(path, confluent or {})
        if known is not None:
            sources[path] = known
            pending += imports_of(known)
    return sources
