"""Protobuf schemas in the form Confluent's clients exchange them besides .proto text: a base64-encoded
`FileDescriptorProto`.

confluent-kafka's ProtobufSerializer registers the schema of a generated message class that way, and its
deserializer asks for schemas with `format=serialized`. Confluent's registry accepts both forms and stores the
.proto text; so does this one: `proto_text` turns a serialized descriptor into .proto text before it is parsed,
and `serialized_form` gives a parsed Protobuf schema's descriptor back in that form.
"""

from __future__ import annotations

import base64
import binascii

from google.protobuf import descriptor_pb2  # type: ignore[import-untyped]
from google.protobuf.message import DecodeError  # type: ignore[import-untyped]

from moldau.registry.formats.base import ParsedSchema
from moldau.registry.formats.proto_text import generate
from moldau.registry.formats.protobuf import ProtobufSchema

__all__ = ["SERIALIZED", "proto_text", "serialized_form"]

SERIALIZED = "serialized"  # the `format` query parameter's value asking for the serialized form


def proto_text(text: str) -> str | None:
    """The .proto text of a base64-encoded FileDescriptorProto; None when `text` is not one (it is then taken
    for .proto text)."""
    stripped = text.strip()
    if not stripped or any(c.isspace() for c in stripped) or "{" in stripped or ";" in stripped:
        return None
    try:
        raw = base64.b64decode(stripped, validate=True)
        descriptor = descriptor_pb2.FileDescriptorProto.FromString(raw)
    except (binascii.Error, ValueError, DecodeError):
        return None
    if not (descriptor.message_type or descriptor.enum_type or descriptor.service or descriptor.package
            or descriptor.syntax):
        return None
    return str(generate(descriptor))


def serialized_form(parsed: ParsedSchema) -> str | None:
    """A Protobuf schema's FileDescriptorProto, base64-encoded; None for other formats."""
    if not isinstance(parsed, ProtobufSchema):
        return None
    return base64.b64encode(parsed.file.SerializeToString()).decode("ascii")
