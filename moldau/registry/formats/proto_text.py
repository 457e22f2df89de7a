""".proto texts: the canonical form of a given text (its tokens re-laid out, comments dropped) and a text regenerated
from a compiled `FileDescriptorProto` in a stable order (the normalized form).

Both results are valid .proto sources that compile to the same descriptors as the original (custom options aside,
see `generate`).
"""

from __future__ import annotations

import re
from typing import Any

TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<number>(?:0[xX][0-9a-fA-F]+|\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)[fF]?)
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<symbol>.)
""", re.VERBOSE | re.DOTALL)

NO_SPACE_BEFORE = frozenset({";", ",", ")", "]", ">", "."})
NO_SPACE_AFTER = frozenset({"(", "[", "<", "."})
SIGN_CONTEXT = frozenset({"=", "(", "[", ",", ":", "<"})


def tokens(text: str) -> list[str]:
    return [match.group() for match in TOKEN.finditer(text) if match.lastgroup not in ("space", "comment")]


def canonical_text(text: str) -> str:
    """The tokens of `text` laid out one statement a line, blocks indented by two spaces, comments dropped: the same
    text for the same schema written with different whitespace or comments."""
    lines: list[str] = []
    line: list[str] = []
    depth = 0
    previous = ""
    for token in tokens(text):
        if token == "}":
            if line:
                lines.append("  " * depth + "".join(line))
                line = []
            depth = max(depth - 1, 0)
            lines.append("  " * depth + "}")
            previous = token
            continue
        glue = (not line or token in NO_SPACE_BEFORE or previous in NO_SPACE_AFTER
                or (token == "<" and previous == "map")
                or (previous == "-" and len(line) > 1 and line[-2].strip() in SIGN_CONTEXT))
        line.append(token if glue else f" {token}")
        previous = token
        if token in (";", "{"):
            lines.append("  " * depth + "".join(line))
            line = []
            depth += token == "{"
    if line:
        lines.append("  " * depth + "".join(line))
    return "\n".join(lines) + "\n"


# FieldDescriptorProto.Type numbers -> .proto scalar names (11 message, 10 group, 14 enum are named types).
SCALARS = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64", 7: "fixed32", 8: "bool",
           9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32", 16: "sfixed64", 17: "sint32", 18: "sint64"}
LABEL_OPTIONAL, LABEL_REQUIRED, LABEL_REPEATED = 1, 2, 3
TYPE_GROUP, TYPE_MESSAGE, TYPE_ENUM = 10, 11, 14


def quote(value: str | bytes) -> str:
    raw = value.encode() if isinstance(value, str) else value
    out = []
    for byte in raw:
        char = chr(byte)
        if char in "\"\\":
            out.append("\\" + char)
        elif 32 <= byte < 127:
            out.append(char)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def option_value(field: Any, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, bytes)):
        return quote(value)
    if field.enum_type is not None:
        return str(field.enum_type.values_by_number[value].name)
    return repr(value)


def options(message: Any) -> list[tuple[str, str]]:
    """Set options of an *Options message as (name, value) pairs, sorted. Options of other than scalar types (and
    custom options, which the descriptor classes do not know) are left out."""
    pairs = []
    for field, value in message.ListFields():
        if field.message_type is None and not getattr(field, "is_extension", False):
            pairs.append((field.name, option_value(field, value)))
    return sorted(pairs)


def block_options(message: Any, indent: str) -> list[str]:
    return [f"{indent}option {name} = {value};" for name, value in options(message)]


def json_name_default(name: str) -> str:
    parts = name.split("_")
    return parts[0] + "".join(part[:1].upper() + part[1:] for part in parts[1:])


class Generator:
    """Writes a FileDescriptorProto back as .proto text: imports and options sorted, fields and enum values by number,
    messages and enums in declaration order (message indexes depend on it)."""

    def __init__(self, file: Any) -> None:
        self.file = file
        self.lines: list[str] = []
        self.package = f".{file.package}" if file.package else ""

    def generate(self) -> str:
        file = self.file
        self.lines.append(f'syntax = "{file.syntax or "proto2"}";')
        if file.package:
            self.lines.append(f"package {file.package};")
        public = set(file.public_dependency)
        for index, dependency in sorted(enumerate(file.dependency), key=lambda pair: pair[1]):
            self.lines.append(f'import {"public " if index in public else ""}{quote(dependency)};')
        self.lines += block_options(file.options, "")
        for message in file.message_type:
            self.message(message, "", self.package)
        for enum in file.enum_type:
            self.enum(enum, "")
        self.extensions(list(file.extension), "", self.package)
        for service in file.service:
            self.service(service)
        return "\n".join(self.lines) + "\n"

    def type_name(self, field: Any, scope: str) -> str:
        if field.type not in (TYPE_GROUP, TYPE_MESSAGE, TYPE_ENUM):
            return SCALARS[field.type]
        return str(field.type_name)  # fully qualified (".pkg.Name"): valid anywhere

    def message(self, message: Any, indent: str, scope: str) -> None:
        inner = indent + "  "
        full = f"{scope}.{message.name}"
        self.lines.append(f"{indent}message {message.name} {{")
        self.lines += block_options(message.options, inner)
        maps = {f"{full}.{nested.name}": nested for nested in message.nested_type if nested.options.map_entry}
        groups = {f"{full}.{field.type_name.rpartition('.')[2]}" for field in message.field if field.type == TYPE_GROUP}
        oneof_fields: dict[int, list[Any]] = {}
        for field in sorted(message.field, key=lambda f: f.number):
            if field.HasField("oneof_index") and not field.proto3_optional:
                oneof_fields.setdefault(field.oneof_index, []).append(field)
            else:
                self.field(field, inner, full, maps, message)
        for index, decl in enumerate(message.oneof_decl):
            if index in oneof_fields:
                self.lines.append(f"{inner}oneof {decl.name} {{")
                self.lines += block_options(decl.options, inner + "  ")
                for field in oneof_fields[index]:
                    self.field(field, inner + "  ", full, maps, message, in_oneof=True)
                self.lines.append(f"{inner}}}")
        for nested in message.nested_type:
            if f"{full}.{nested.name}" not in maps and f"{full}.{nested.name}" not in groups:
                self.message(nested, inner, full)
        for enum in message.enum_type:
            self.enum(enum, inner)
        self.extensions(list(message.extension), inner, full)
        self.ranges(message, inner)
        self.lines.append(f"{indent}}}")

    def field(self, field: Any, indent: str, scope: str, maps: dict[str, Any], parent: Any,
              in_oneof: bool = False) -> None:
        proto3 = self.file.syntax == "proto3"
        label = ""
        if field.label == LABEL_REPEATED and field.type_name not in maps:
            label = "repeated "
        elif field.label == LABEL_REQUIRED:
            label = "required "
        elif not in_oneof and (field.proto3_optional or (not proto3 and field.label == LABEL_OPTIONAL)):
            label = "optional "
        if field.type_name in maps:
            entry = maps[field.type_name]
            key, value = entry.field[0], entry.field[1]
            kind = f"map<{self.type_name(key, scope)}, {self.type_name(value, scope)}>"
        elif field.type == TYPE_GROUP:
            kind = "group"
        else:
            kind = self.type_name(field, scope)
        name = field.type_name.rpartition(".")[2] if field.type == TYPE_GROUP else field.name
        extras = self.field_options(field)
        suffix = f" [{', '.join(extras)}]" if extras else ""
        if field.type == TYPE_GROUP:
            group = next(n for n in parent.nested_type if f"{scope}.{n.name}" == field.type_name)
            self.lines.append(f"{indent}{label}group {name} = {field.number}{suffix} {{")
            body = Generator(self.file)
            body.message(group, indent, scope)
            self.lines += body.lines[1:-1]
            self.lines.append(f"{indent}}}")
            return
        self.lines.append(f"{indent}{label}{kind} {name} = {field.number}{suffix};")

    def field_options(self, field: Any) -> list[str]:
        extras = []
        if field.HasField("default_value"):
            value = field.default_value
            # A string default is stored as is; a bytes default is stored C-escaped already.
            text = quote(value) if field.type == 9 else f'"{value}"' if field.type == 12 else value
            extras.append(f"default = {text}")
        if field.HasField("json_name") and field.json_name != json_name_default(field.name):
            extras.append(f"json_name = {quote(field.json_name)}")
        extras += [f"{name} = {value}" for name, value in options(field.options)]
        return extras

    def enum(self, enum: Any, indent: str) -> None:
        inner = indent + "  "
        self.lines.append(f"{indent}enum {enum.name} {{")
        self.lines += block_options(enum.options, inner)
        for value in sorted(enum.value, key=lambda v: (v.number, v.name)):
            extras = [f"{name} = {text}" for name, text in options(value.options)]
            suffix = f" [{', '.join(extras)}]" if extras else ""
            self.lines.append(f"{inner}{value.name} = {value.number}{suffix};")
        self.ranges(enum, inner)
        self.lines.append(f"{indent}}}")

    def ranges(self, container: Any, indent: str) -> None:
        # Message reserved/extension ranges are end-exclusive, enum reserved ranges end-inclusive.
        exclusive = hasattr(container, "extension_range")
        max_value = 536870911 if exclusive else 2147483647

        def text(start: int, end: int) -> str:
            last = end - 1 if exclusive else end
            if last >= max_value:
                return f"{start} to max"
            return str(start) if start == last else f"{start} to {last}"

        if exclusive:
            for extension in sorted(container.extension_range, key=lambda r: r.start):
                self.lines.append(f"{indent}extensions {text(extension.start, extension.end)};")
        if container.reserved_range:
            spans = sorted((r.start, r.end) for r in container.reserved_range)
            self.lines.append(f"{indent}reserved {', '.join(text(s, e) for s, e in spans)};")
        if container.reserved_name:
            self.lines.append(f"{indent}reserved {', '.join(quote(n) for n in sorted(container.reserved_name))};")

    def extensions(self, fields: list[Any], indent: str, scope: str) -> None:
        by_extendee: dict[str, list[Any]] = {}
        for field in fields:
            by_extendee.setdefault(field.extendee, []).append(field)
        for extendee in sorted(by_extendee):
            self.lines.append(f"{indent}extend {extendee} {{")
            for field in sorted(by_extendee[extendee], key=lambda f: f.number):
                self.field(field, indent + "  ", scope, {}, None)
            self.lines.append(f"{indent}}}")

    def service(self, service: Any) -> None:
        self.lines.append(f"service {service.name} {{")
        self.lines += block_options(service.options, "  ")
        for method in service.method:
            request = f"{'stream ' if method.client_streaming else ''}{method.input_type}"
            response = f"{'stream ' if method.server_streaming else ''}{method.output_type}"
            body = block_options(method.options, "    ")
            if body:
                self.lines.append(f"  rpc {method.name}({request}) returns ({response}) {{")
                self.lines += body
                self.lines.append("  }")
            else:
                self.lines.append(f"  rpc {method.name}({request}) returns ({response});")
        self.lines.append("}")


def generate(file: Any) -> str:
    """The .proto text of a compiled proto2 or proto3 file. Custom options (extensions of the *Options messages) are
    not reproduced: the descriptor classes at hand do not know them."""
    return Generator(file).generate()
