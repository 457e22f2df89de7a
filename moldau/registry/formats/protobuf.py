"""Protobuf schemas: .proto texts (proto2 or proto3; or base64-encoded FileDescriptorProtos, as Confluent's
serializers send them) compiled by the protoc bundled with grpcio-tools (no system protoc needed), message
selection by Confluent's message indexes, canonical texts and payload checks.

Compiling is this package's only I/O: the schema and the texts of its references (keyed by import path) are written
to a private temporary directory, protoc (run as `python -m grpc_tools.protoc`, so its error messages can be
captured) writes a `FileDescriptorSet` with every import included, and the directory is removed. The descriptors
are then loaded into a private `DescriptorPool`. The compatibility rules live in `proto_compat`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory  # type: ignore[import-untyped]

from moldau.registry.formats.base import InvalidPayload, InvalidSchema, ParsedSchema
from moldau.registry.formats.proto_compat import FileIndex, proto_diff
from moldau.registry.formats.proto_sources import sources_for
from moldau.registry.formats.proto_text import canonical_text, generate

MAIN_FILE = "schema.proto"
PROTOC_TIMEOUT = 60.0
# Lines of protoc's logging library (abseil), e.g. "W0000 00:00:1795629107.007257   17341 parser.cc:659] ...".
LOG_LINE = re.compile(r"^(WARNING: All log messages before absl|[IWEF]\d{4} \d\d:\d\d:\d\d)")


def safe_path(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if not name or path.is_absolute() or ".." in path.parts or not name.endswith(".proto"):
        raise InvalidSchema(f"reference name '{name}' is not a relative .proto import path")
    return path


def compile_proto(text: str, references: Mapping[str, str]) -> tuple[str, str, Any]:
    """Compile `text` with its references; return the main file's name, its .proto source and the
    FileDescriptorSet."""
    main = MAIN_FILE if MAIN_FILE not in references else "__schema__.proto"
    sources = sources_for(main, text, references)
    with tempfile.TemporaryDirectory(prefix="moldau-proto-") as directory:
        root = Path(directory) / "src"
        for name, body in sources.items():
            target = root / safe_path(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(body, encoding="utf-8")
        out = Path(directory) / "set.pb"
        command = [sys.executable, "-m", "grpc_tools.protoc", f"--proto_path={root}", "--include_imports",
                   f"--descriptor_set_out={out}", main]
        try:
            result = subprocess.run(command, cwd=root, capture_output=True, timeout=PROTOC_TIMEOUT, check=False,
                                    env={**os.environ, "GRPC_PYTHON_DISABLE_DYNAMIC_STUBS": "1"})
        except subprocess.TimeoutExpired as exc:
            raise InvalidSchema("protoc took too long to compile the schema") from exc
        if result.returncode != 0 or not out.exists():
            message = protoc_errors(result.stderr.decode("utf-8", "replace"), root)
            raise InvalidSchema(f"invalid Protobuf schema: {message or 'protoc failed'}")
        descriptor_set = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    return main, sources[main], descriptor_set


def protoc_errors(stderr: str, root: Path) -> str:
    """protoc's messages without its logging library's lines and without the private directory's path."""
    lines = [line.replace(f"{root}{os.sep}", "") for line in stderr.splitlines()]
    kept = [line for line in lines if line.strip() and not LOG_LINE.match(line)]
    return "\n".join(kept)


class ProtobufSchema:
    """A compiled .proto: its text, its FileDescriptorProto (and those of its imports), and message classes made
    from a private descriptor pool, cached per message index path."""

    schema_type = "PROTOBUF"

    def __init__(self, source: str, main: str, descriptor_set: Any) -> None:
        self.text = source
        self.files = {file.name: file for file in descriptor_set.file}
        self.file = self.files[main]
        self.index = FileIndex(self.file, list(self.files.values()))
        self.pool = descriptor_pool.DescriptorPool()
        for file in descriptor_set.file:  # dependencies come first in the set
            self.pool.AddSerializedFile(file.SerializeToString())
        self.classes: dict[tuple[int, ...], Any] = {}

    def canonical(self) -> str:
        return canonical_text(self.text)

    def normalized(self) -> str:
        if self.file.syntax == "editions":
            # Editions carry their semantics in `features` options, which the regenerated text would not keep.
            return self.canonical()
        return generate(self.file)

    def read_errors(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, ProtobufSchema):
            return [f"FIELD_KIND_CHANGED: a PROTOBUF schema cannot read data written with a {writer.schema_type} "
                    "schema"]
        return proto_diff(writer.index, self.index)

    def message_name(self, message_indexes: Sequence[int]) -> str | None:
        """Confluent's message indexes: empty or [0] is the file's first message; otherwise the first index picks
        a top-level message and each further one a message nested in the previous (map entries not counted)."""
        indexes = list(message_indexes) or [0]
        messages = list(self.file.message_type)
        scope = self.file.package
        message = None
        for index in indexes:
            if not 0 <= index < len(messages):
                return None
            message = messages[index]
            scope = f"{scope}.{message.name}" if scope else message.name
            messages = [nested for nested in message.nested_type if not nested.options.map_entry]
        return scope if message is not None else None

    def record_name(self, message_indexes: Sequence[int] = ()) -> str | None:
        return self.message_name(message_indexes)

    def message_class(self, message_indexes: Sequence[int]) -> Any:
        key = tuple(message_indexes) or (0,)
        if key not in self.classes:
            name = self.message_name(key)
            if name is None:
                raise InvalidPayload(f"message indexes {list(key)} select no message of the schema")
            self.classes[key] = message_factory.GetMessageClass(self.pool.FindMessageTypeByName(name))
        return self.classes[key]

    def check_payload(self, payload: bytes, message_indexes: Sequence[int] = ()) -> None:
        """Parse the payload as the selected message. Protobuf parsing keeps unknown fields rather than failing
        on them, so bytes written with another (compatible or not) message type may pass; only undecodable bytes,
        wrong wire types for known fields and missing proto2 required fields are rejected."""
        cls = self.message_class(message_indexes)
        try:
            parsed = cls.FromString(payload)
        except Exception as exc:  # DecodeError, or the runtime's own error for malformed input
            raise InvalidPayload(f"not a {cls.DESCRIPTOR.full_name} message: {exc}") from exc
        if not parsed.IsInitialized():  # the parser itself does not insist on proto2's required fields
            missing = ", ".join(parsed.FindInitializationErrors())
            raise InvalidPayload(f"{cls.DESCRIPTOR.full_name} message lacks required fields: {missing}")


class ProtobufFormat:
    name = "PROTOBUF"

    def parse(self, text: str, references: Mapping[str, str]) -> ProtobufSchema:
        main, source, descriptor_set = compile_proto(text, references)
        try:
            return ProtobufSchema(source, main, descriptor_set)
        except (TypeError, ValueError, KeyError) as exc:
            raise InvalidSchema(f"invalid Protobuf schema: {exc}") from exc
