"""Protobuf compatibility after Confluent's rules, over compiled descriptors: the differences between a writer's file
(the original) and a reader's (the update), named with Confluent's difference types, some compatible, the rest not.

Fields are matched by number. Adding or removing optional fields, renaming fields, adding messages and enums,
changing enum constants and moving fields out of a oneof are compatible. Incompatible are: a package change, a
removed message, a field whose kind (scalar, message, map) changes, a scalar moving between wire-compatible groups
(int32/int64/uint32/uint64/bool and enums; sint32/sint64; fixed32/sfixed32; fixed64/sfixed64; string/bytes; float;
double), a numeric field's label changing (e.g. optional to repeated), a message field's type changing (by name, or
incompatibly inside), adding or removing a proto2 `required` field, removing a field from a oneof, and moving
fields that were independent into one oneof.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

COMPATIBLE = frozenset({
    "MESSAGE_ADDED", "MESSAGE_MOVED", "ENUM_ADDED", "ENUM_REMOVED", "ENUM_CONST_ADDED", "ENUM_CONST_CHANGED",
    "ENUM_CONST_REMOVED", "FIELD_ADDED", "FIELD_REMOVED", "FIELD_NAME_CHANGED", "FIELD_STRING_OR_BYTES_LABEL_CHANGED",
    "ONEOF_ADDED", "ONEOF_REMOVED", "ONEOF_FIELD_ADDED", "ONEOF_FIELD_MOVED_TO_TOP_LEVEL",
})

# FieldDescriptorProto.Type numbers -> Confluent's scalar kinds (wire-compatible groups).
SCALAR_KINDS = {5: "GENERAL_NUMBER", 3: "GENERAL_NUMBER", 13: "GENERAL_NUMBER", 4: "GENERAL_NUMBER",
                8: "GENERAL_NUMBER", 14: "GENERAL_NUMBER", 17: "SIGNED_NUMBER", 18: "SIGNED_NUMBER",
                9: "STRING_OR_BYTES", 12: "STRING_OR_BYTES", 7: "FIXED32", 15: "FIXED32", 6: "FIXED64",
                16: "FIXED64", 2: "FLOAT", 1: "DOUBLE"}
NUMERIC_KINDS = frozenset({"GENERAL_NUMBER", "SIGNED_NUMBER", "FIXED32", "FIXED64", "FLOAT", "DOUBLE"})
LABEL_REQUIRED, LABEL_REPEATED = 2, 3
TYPE_GROUP, TYPE_MESSAGE = 10, 11

DESCRIPTIONS = {
    "PACKAGE_CHANGED": "the package differs",
    "MESSAGE_REMOVED": "the reader lacks a message of the writer",
    "FIELD_KIND_CHANGED": "the field's kind (scalar, message or map) differs",
    "FIELD_SCALAR_KIND_CHANGED": "the field's scalar type is not wire-compatible with the writer's",
    "FIELD_NAMED_TYPE_CHANGED": "the field's message type differs from the writer's",
    "FIELD_NUMERIC_LABEL_CHANGED": "the numeric field's label (optional, required, repeated) differs",
    "REQUIRED_FIELD_ADDED": "the reader requires a field the writer does not write",
    "REQUIRED_FIELD_REMOVED": "the writer's required field is missing from the reader",
    "ONEOF_FIELD_REMOVED": "a field of the writer's oneof is missing from the reader",
    "MULTIPLE_FIELDS_MOVED_TO_ONEOF": "fields the writer sets independently are in one oneof of the reader",
    "FIELD_MOVED_TO_EXISTING_ONEOF": "a field the writer sets independently joined an existing oneof of the reader",
}


class FileIndex:
    """A compiled file and every type visible to it (from itself and its imports), by full name (".pkg.Name")."""

    def __init__(self, file: Any, files: list[Any]) -> None:
        self.file = file
        self.types: dict[str, tuple[Any, str]] = {}  # full name -> (DescriptorProto or EnumDescriptorProto, package)
        for each in files:
            prefix = f".{each.package}" if each.package else ""
            self.add(each.message_type, each.enum_type, prefix, each.package)

    def add(self, messages: Any, enums: Any, prefix: str, package: str) -> None:
        for enum in enums:
            self.types[f"{prefix}.{enum.name}"] = (enum, package)
        for message in messages:
            full = f"{prefix}.{message.name}"
            self.types[full] = (message, package)
            self.add(message.nested_type, message.enum_type, full, package)

    def local_name(self, full_name: str) -> str:
        package = self.types.get(full_name, (None, ""))[1]
        name = full_name.lstrip(".")
        return name[len(package) + 1:] if package and name.startswith(package + ".") else name

    def is_enum(self, full_name: str) -> bool:
        return full_name in self.types and not hasattr(self.types[full_name][0], "field")

    def map_entry(self, full_name: str) -> Any:
        message = self.types.get(full_name, (None, ""))[0]
        return message if message is not None and getattr(message, "options", None) and hasattr(
            message, "field") and message.options.map_entry else None


def messages_of(container: Any) -> list[Any]:
    return [message for message in container if not message.options.map_entry]


def real_oneof(proto_field: Any) -> int | None:
    return int(proto_field.oneof_index) if proto_field.HasField("oneof_index") and not proto_field.proto3_optional \
        else None


def label_of(proto_field: Any) -> str | None:
    """The field's label as Confluent compares it, None for oneof members. Unlike Confluent's checker, proto3's
    implicit presence counts as "optional", so that turning a singular number field repeated (a packed encoding
    the old reader cannot parse) is caught in proto3 too."""
    if proto_field.label == LABEL_REPEATED:
        return "repeated"
    if proto_field.label == LABEL_REQUIRED:
        return "required"
    return None if real_oneof(proto_field) is not None else "optional"


@dataclass
class Context:
    original: FileIndex
    update: FileIndex
    found: list[tuple[str, str]] = field(default_factory=list)
    in_progress: set[tuple[str, str]] = field(default_factory=set)

    def add(self, kind: str, path: str) -> None:
        self.found.append((kind, path))

    def incompatible(self) -> list[tuple[str, str]]:
        return [(kind, path) for kind, path in self.found if kind not in COMPATIBLE]


def proto_diff(writer: FileIndex, reader: FileIndex) -> list[str]:
    """Why `reader` cannot read data written with `writer`, one message per incompatible difference."""
    ctx = Context(writer, reader)
    if writer.file.package != reader.file.package:
        ctx.add("PACKAGE_CHANGED", "#/")
    o_prefix = f".{writer.file.package}" if writer.file.package else ""
    u_prefix = f".{reader.file.package}" if reader.file.package else ""
    compare_types(ctx, "#", (writer.file.message_type, writer.file.enum_type, o_prefix),
                  (reader.file.message_type, reader.file.enum_type, u_prefix))
    return [f"{kind} at '{path}': {DESCRIPTIONS[kind]}" for kind, path in dict.fromkeys(ctx.incompatible())]


def compare_types(ctx: Context, path: str, original: tuple[Any, Any, str], update: tuple[Any, Any, str]) -> None:
    o_messages = {m.name: (i, m) for i, m in enumerate(messages_of(original[0]))}
    u_messages = {m.name: (i, m) for i, m in enumerate(messages_of(update[0]))}
    for name in sorted(set(o_messages) | set(u_messages)):
        where = f"{path}/{name}"
        if name not in u_messages:
            ctx.add("MESSAGE_REMOVED", where)
        elif name not in o_messages:
            ctx.add("MESSAGE_ADDED", where)
        else:
            (o_index, o_message), (u_index, u_message) = o_messages[name], u_messages[name]
            compare_message(ctx, where, (o_message, f"{original[2]}.{name}"), (u_message, f"{update[2]}.{name}"))
            if o_index != u_index:
                ctx.add("MESSAGE_MOVED", where)
    o_enums, u_enums = {e.name: e for e in original[1]}, {e.name: e for e in update[1]}
    for name in sorted(set(o_enums) | set(u_enums)):
        where = f"{path}/{name}"
        if name not in u_enums:
            ctx.add("ENUM_REMOVED", where)
        elif name not in o_enums:
            ctx.add("ENUM_ADDED", where)
        else:
            compare_enum(ctx, where, o_enums[name], u_enums[name])


def compare_enum(ctx: Context, path: str, original: Any, update: Any) -> None:
    o_values = {v.number: v.name for v in original.value}
    u_values = {v.number: v.name for v in update.value}
    for number in sorted(set(o_values) | set(u_values)):
        if number not in u_values:
            ctx.add("ENUM_CONST_REMOVED", f"{path}/{number}")
        elif number not in o_values:
            ctx.add("ENUM_CONST_ADDED", f"{path}/{number}")
        elif o_values[number] != u_values[number]:
            ctx.add("ENUM_CONST_CHANGED", f"{path}/{number}")


def compare_message(ctx: Context, path: str, original: tuple[Any, str], update: tuple[Any, str]) -> None:
    (o_message, o_full), (u_message, u_full) = original, update
    pair = (o_full, u_full)
    if pair in ctx.in_progress:
        return  # a recursive type: compared where it began
    ctx.in_progress.add(pair)
    o_fields = {f.number: f for f in o_message.field}
    u_fields = {f.number: f for f in u_message.field}
    o_oneof = {n: o_message.oneof_decl[i].name for n, f in o_fields.items() if (i := real_oneof(f)) is not None}
    u_oneof = {n: u_message.oneof_decl[i].name for n, f in u_fields.items() if (i := real_oneof(f)) is not None}
    compare_oneofs(ctx, path, o_fields, u_fields, o_oneof, u_oneof)
    # Dropping a whole oneof (no member left anywhere) is allowed; dropping some of its members is not.
    deleted = set(o_oneof.values()) - set(u_oneof.values()) - {o_oneof[n] for n in o_oneof if n in u_fields}
    for number in sorted(set(o_fields) | set(u_fields)):
        compare_field_slot(ctx, path, number, (o_fields.get(number), o_oneof.get(number)),
                           (u_fields.get(number), u_oneof.get(number)), deleted)
    compare_types(ctx, path, (o_message.nested_type, o_message.enum_type, o_full),
                  (u_message.nested_type, u_message.enum_type, u_full))
    ctx.in_progress.discard(pair)


def compare_oneofs(ctx: Context, path: str, o_fields: dict[int, Any], u_fields: dict[int, Any],
                   o_oneof: dict[int, str], u_oneof: dict[int, str]) -> None:
    # A reader oneof whose members were set independently by the writer (from different writer oneofs, or as
    # plain fields) makes previously valid data ambiguous.
    for name in sorted(set(u_oneof.values())):
        groups: set[str] = set()
        moved_in = 0
        for number in (n for n, owner in u_oneof.items() if owner == name):
            if number in o_oneof:
                groups.add(f"oneof:{o_oneof[number]}")
            elif number in o_fields:
                groups.add(f"field:{number}")
                moved_in += 1
        if len(groups) > 1:
            ctx.add("MULTIPLE_FIELDS_MOVED_TO_ONEOF" if moved_in > 1 else "FIELD_MOVED_TO_EXISTING_ONEOF",
                    f"{path}/{name}")
    o_names, u_names = set(o_oneof.values()), set(u_oneof.values())
    for name in sorted(o_names - u_names):
        ctx.add("ONEOF_REMOVED", f"{path}/{name}")
    for name in sorted(u_names - o_names):
        ctx.add("ONEOF_ADDED", f"{path}/{name}")


def compare_field_slot(ctx: Context, path: str, number: int, original: tuple[Any, str | None],
                       update: tuple[Any, str | None], deleted_oneofs: set[str]) -> None:
    (o_field, o_oneof), (u_field, u_oneof) = original, update
    if u_field is None:
        if o_oneof is not None:
            if o_oneof not in deleted_oneofs:
                ctx.add("ONEOF_FIELD_REMOVED", f"{path}/{o_oneof}/{number}")
        else:
            required = o_field.label == LABEL_REQUIRED
            ctx.add("REQUIRED_FIELD_REMOVED" if required else "FIELD_REMOVED", f"{path}/{number}")
        return
    if o_field is None:
        if u_oneof is not None:
            ctx.add("ONEOF_FIELD_ADDED", f"{path}/{u_oneof}/{number}")
        else:
            ctx.add("REQUIRED_FIELD_ADDED" if u_field.label == LABEL_REQUIRED else "FIELD_ADDED", f"{path}/{number}")
        return
    if o_oneof is not None and u_oneof is None:
        ctx.add("ONEOF_FIELD_MOVED_TO_TOP_LEVEL", f"{path}/{number}")
    where = f"{path}/{u_oneof}/{number}" if u_oneof is not None else f"{path}/{number}"
    compare_field(ctx, where, o_field, u_field)


def compare_field(ctx: Context, path: str, original: Any, update: Any) -> None:
    if original.name != update.name:
        ctx.add("FIELD_NAME_CHANGED", path)
    compare_typed(ctx, path, (original.type, original.type_name, label_of(original)),
                  (update.type, update.type_name, label_of(update)))


def kind_of(index: FileIndex, proto_type: int, type_name: str) -> str:
    if proto_type in (TYPE_MESSAGE, TYPE_GROUP):
        return "MAP" if index.map_entry(type_name) is not None else "MESSAGE"
    return "SCALAR"


def scalar_kind(proto_type: int) -> str:
    return SCALAR_KINDS[proto_type]


def compare_typed(ctx: Context, path: str, original: tuple[int, str, str | None],
                  update: tuple[int, str, str | None]) -> None:
    (o_type, o_name, o_label), (u_type, u_name, u_label) = original, update
    o_kind, u_kind = kind_of(ctx.original, o_type, o_name), kind_of(ctx.update, u_type, u_name)
    if o_kind != u_kind:
        ctx.add("FIELD_KIND_CHANGED", path)
    elif o_kind == "SCALAR":
        o_scalar, u_scalar = scalar_kind(o_type), scalar_kind(u_type)
        if o_scalar != u_scalar:
            ctx.add("FIELD_SCALAR_KIND_CHANGED", path)
        elif o_label is not None and u_label is not None and o_label != u_label:
            ctx.add("FIELD_NUMERIC_LABEL_CHANGED" if o_scalar in NUMERIC_KINDS else
                    "FIELD_STRING_OR_BYTES_LABEL_CHANGED", path)
    elif o_kind == "MAP":
        o_entry, u_entry = ctx.original.map_entry(o_name), ctx.update.map_entry(u_name)
        for o_part, u_part in zip(o_entry.field, u_entry.field, strict=False):
            compare_typed(ctx, path, (o_part.type, o_part.type_name, None), (u_part.type, u_part.type_name, None))
    else:
        compare_message_type(ctx, path, o_name, u_name)


def compare_message_type(ctx: Context, path: str, o_name: str, u_name: str) -> None:
    if ctx.original.local_name(o_name) != ctx.update.local_name(u_name):
        ctx.add("FIELD_NAMED_TYPE_CHANGED", path)
        return
    o_message, u_message = ctx.original.types.get(o_name), ctx.update.types.get(u_name)
    if o_message is None or u_message is None:
        return
    sub = Context(ctx.original, ctx.update, in_progress=ctx.in_progress)
    compare_message(sub, f"#/{ctx.update.local_name(u_name).replace('.', '/')}", (o_message[0], o_name),
                    (u_message[0], u_name))
    ctx.found += sub.found
    if sub.incompatible():
        ctx.add("FIELD_NAMED_TYPE_CHANGED", path)
