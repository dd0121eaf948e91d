"""Protobuf schemas in ``.proto`` source text, to and from ``FileDescriptorProto``.

``parse`` reads the proto2 and proto3 language as schemas use it: syntax, package, imports, messages (fields with
their labels, scalar and named types, maps, oneofs, proto3 ``optional``, nested messages and enums, reserved
numbers and names), enums, services, and options (a field's ``default``, ``json_name``, ``packed`` and
``deprecated``, and an enum's ``allow_alias``, are kept; other options are read and dropped, as they do not change
what the bytes mean). Named
types are resolved with protobuf's scoping rules, against the file and its imports, and the result is checked by
building it in a protobuf descriptor pool, so what passes is what protoc would accept. Not taken, with an error
that says so: editions, ``extend`` blocks and groups.

``render`` writes a descriptor back as ``.proto`` text, the form Confluent's registry answers by default.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TypeAlias

from google.protobuf import descriptor_pb2, descriptor_pool

F = descriptor_pb2.FieldDescriptorProto
Kind: TypeAlias = "descriptor_pb2.FieldDescriptorProto.Type.ValueType"
SCALARS: Mapping[str, Kind] = {
    "double": F.TYPE_DOUBLE,
    "float": F.TYPE_FLOAT,
    "int64": F.TYPE_INT64,
    "uint64": F.TYPE_UINT64,
    "int32": F.TYPE_INT32,
    "fixed64": F.TYPE_FIXED64,
    "fixed32": F.TYPE_FIXED32,
    "bool": F.TYPE_BOOL,
    "string": F.TYPE_STRING,
    "bytes": F.TYPE_BYTES,
    "uint32": F.TYPE_UINT32,
    "sfixed32": F.TYPE_SFIXED32,
    "sfixed64": F.TYPE_SFIXED64,
    "sint32": F.TYPE_SINT32,
    "sint64": F.TYPE_SINT64,
}
SCALAR_NAMES = {v: k for k, v in SCALARS.items()}
LABELS = {"optional": F.LABEL_OPTIONAL, "required": F.LABEL_REQUIRED, "repeated": F.LABEL_REPEATED}
MAX_FIELD_NUMBER = 536870911
TOKEN = re.compile(
    r"""
    (?P<space>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<number>-?(?:0[xX][0-9a-fA-F]+|[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<symbol>[{}\[\]()<>;=,.:+-])
    """,
    re.VERBOSE | re.DOTALL,
)


class ProtoTextError(ValueError):
    """The text is not a schema this parser takes (the message says where and why)."""


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    text: str
    line: int


def _tokens(text: str) -> list[Token]:
    out: list[Token] = []
    pos, line = 0, 1
    while pos < len(text):
        match = TOKEN.match(text, pos)
        if match is None:
            raise ProtoTextError(f"line {line}: unexpected {text[pos]!r}")
        kind = match.lastgroup or ""
        if kind != "space":
            out.append(Token(kind, match.group(), line))
        line += match.group().count("\n")
        pos = match.end()
    return out


def _unquote(literal: str) -> str:
    body = literal[1:-1]
    return body.encode("latin-1", "backslashreplace").decode("unicode_escape") if "\\" in body else body


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.pos = 0
        self.file = descriptor_pb2.FileDescriptorProto(name="default")
        self.proto3 = False
        # (scope, field) of every field and method type to resolve once every type is known.
        self.pending: list[tuple[str, Callable[[str, Kind], None], str, int]] = []

    # -- tokens --------------------------------------------------------------------------------------------------

    def peek(self, offset: int = 0) -> Token | None:
        i = self.pos + offset
        return self.tokens[i] if i < len(self.tokens) else None

    def next(self) -> Token:
        token = self.peek()
        if token is None:
            raise ProtoTextError("unexpected end of the schema")
        self.pos += 1
        return token

    def fail(self, what: str) -> ProtoTextError:
        token = self.peek()
        where = f"line {token.line}: at {token.text!r}" if token is not None else "at the end"
        return ProtoTextError(f"{where}: {what}")

    def kind(self) -> str | None:
        token = self.peek()
        return None if token is None else token.kind

    def line(self) -> int:
        token = self.peek()
        return 0 if token is None else token.line

    def at(self, text: str) -> bool:
        token = self.peek()
        return token is not None and token.text == text and token.kind in ("ident", "symbol")

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.pos += 1
            return True
        return False

    def expect(self, text: str) -> None:
        if not self.accept(text):
            raise self.fail(f"expected {text!r}")

    def ident(self) -> str:
        token = self.next()
        if token.kind != "ident":
            self.pos -= 1
            raise self.fail("expected a name")
        return token.text

    def full_ident(self) -> str:
        parts = [("." if self.accept(".") else "") + self.ident()]
        while self.accept("."):
            parts.append(self.ident())
        return ".".join(parts)

    def string(self) -> str:
        token = self.next()
        if token.kind != "string":
            self.pos -= 1
            raise self.fail("expected a string")
        value = _unquote(token.text)
        while self.kind() == "string":
            value += _unquote(self.next().text)  # adjacent strings concatenate
        return value

    def integer(self) -> int:
        token = self.next()
        if token.kind != "number":
            self.pos -= 1
            raise self.fail("expected a number")
        try:
            return int(token.text, 0) if not re.fullmatch(r"-?0[0-7]+", token.text) else int(token.text, 8)
        except ValueError:
            self.pos -= 1
            raise self.fail("expected a whole number") from None

    def constant(self) -> str:
        """An option's value, as text (an aggregate ``{...}`` is read and dropped)."""
        if self.at("{"):
            depth = 0
            while True:
                token = self.next()
                depth += token.text == "{" and token.kind == "symbol"
                depth -= token.text == "}" and token.kind == "symbol"
                if depth == 0:
                    return ""
        sign = "-" if self.accept("-") else ""
        self.accept("+")
        head = self.peek()
        if head is not None and head.kind == "string":
            return self.string()
        token = self.next()
        if token.kind not in ("number", "ident"):
            self.pos -= 1
            raise self.fail("expected a constant")
        text = sign + token.text
        while token.kind == "ident" and self.accept("."):
            text += "." + self.ident()
        return text

    def option_name(self) -> str:
        if self.accept("("):
            name = "(" + self.full_ident() + ")"
            self.expect(")")
        else:
            name = self.ident()
        while self.accept("."):
            if self.accept("("):
                part = "(" + self.full_ident() + ")"
                self.expect(")")
            else:
                part = self.ident()
            name += "." + part
        return name

    # -- the file ------------------------------------------------------------------------------------------------

    def parse(self) -> descriptor_pb2.FileDescriptorProto:
        if self.accept("edition"):
            raise self.fail("editions are not supported yet: use syntax proto2 or proto3")
        if self.accept("syntax"):
            self.expect("=")
            syntax = self.string()
            if syntax not in ("proto2", "proto3"):
                raise self.fail(f"unknown syntax {syntax!r}")
            self.expect(";")
            self.proto3 = syntax == "proto3"
            if self.proto3:
                self.file.syntax = syntax  # protoc leaves proto2's out (the default)
        while self.peek() is not None:
            if self.accept(";"):
                continue
            if self.accept("import"):
                public = self.accept("public")
                weak = self.accept("weak")
                self.file.dependency.append(self.string())
                if public:
                    self.file.public_dependency.append(len(self.file.dependency) - 1)
                if weak:
                    self.file.weak_dependency.append(len(self.file.dependency) - 1)
                self.expect(";")
            elif self.accept("package"):
                if self.file.package:
                    raise self.fail("a second package")
                self.file.package = self.full_ident()
                self.expect(";")
            elif self.accept("option"):
                self.option_name()
                self.expect("=")
                self.constant()
                self.expect(";")
            elif self.accept("message"):
                self.message(self.file.message_type.add(), self.scope())
            elif self.accept("enum"):
                self.enum(self.file.enum_type.add())
            elif self.accept("service"):
                self.service(self.file.service.add())
            elif self.at("extend"):
                raise self.fail("extend blocks are not supported yet")
            else:
                raise self.fail("expected syntax, package, import, option, message, enum or service")
        return self.file

    def scope(self) -> str:
        return f".{self.file.package}" if self.file.package else ""

    def message(self, message: descriptor_pb2.DescriptorProto, outer: str) -> None:
        message.name = self.ident()
        scope = f"{outer}.{message.name}"
        self.expect("{")
        synthetic: list[str] = []
        while not self.accept("}"):
            if self.accept(";"):
                continue
            if self.accept("message"):
                self.message(message.nested_type.add(), scope)
            elif self.accept("enum"):
                self.enum(message.enum_type.add())
            elif self.accept("option"):
                self.option_name()
                self.expect("=")
                self.constant()
                self.expect(";")
            elif self.accept("oneof"):
                index = len(message.oneof_decl)
                message.oneof_decl.add(name=self.ident())
                self.expect("{")
                while not self.accept("}"):
                    if self.accept(";"):
                        continue
                    if self.accept("option"):
                        self.option_name()
                        self.expect("=")
                        self.constant()
                        self.expect(";")
                        continue
                    field = self.field(message, scope, F.LABEL_OPTIONAL)
                    field.oneof_index = index
            elif self.accept("reserved"):
                self.reserved(message)
            elif self.accept("extensions"):
                for start, end in self.ranges(exclusive_end=True):
                    message.extension_range.add(start=start, end=end)
                self.field_options(None)
                self.expect(";")
            elif self.at("extend") or self.at("group"):
                raise self.fail(f"{self.next().text} is not supported yet")
            elif self.accept("map"):
                self.map_field(message, scope)
            else:
                head = self.peek()
                label = None if head is None else LABELS.get(head.text)
                if label is not None:
                    self.pos += 1
                elif not self.proto3:
                    raise self.fail("a proto2 field needs a label: optional, required or repeated")
                if self.proto3 and label == F.LABEL_REQUIRED:
                    raise self.fail("proto3 has no required fields")
                field = self.field(message, scope, label or F.LABEL_OPTIONAL)
                if self.proto3 and label == F.LABEL_OPTIONAL:
                    field.proto3_optional = True
                    synthetic.append(field.name)
        for field in message.field:  # what protoc checks and protobuf's runtime pool does not
            if (
                any(r.start <= field.number < r.end for r in message.reserved_range)
                or field.name in message.reserved_name
            ):
                raise ProtoTextError(f"message {message.name}: field {field.name} = {field.number} is reserved")
        for name in synthetic:  # protoc's synthetic oneofs of proto3 optional fields come after the real ones
            field = next(f for f in message.field if f.name == name)
            field.oneof_index = len(message.oneof_decl)
            oneof = "_" + name
            while any(o.name == oneof for o in message.oneof_decl):
                oneof = "X" + oneof
            message.oneof_decl.add(name=oneof)

    def field(
        self, message: descriptor_pb2.DescriptorProto, scope: str, label: int
    ) -> descriptor_pb2.FieldDescriptorProto:
        if self.at("group"):
            raise self.fail("groups are not supported yet")
        type_name = self.full_ident()
        field = message.field.add(label=label)
        field.name = self.ident()
        self.expect("=")
        field.number = self.integer()
        if not 1 <= field.number <= MAX_FIELD_NUMBER or 19000 <= field.number <= 19999:
            raise self.fail(f"field number {field.number} is not allowed")
        if type_name in SCALARS:
            field.type = SCALARS[type_name]
        else:
            self.pending.append((scope, _setter(field), type_name, self.line()))
        self.field_options(field)
        self.expect(";")
        return field

    def map_field(self, message: descriptor_pb2.DescriptorProto, scope: str) -> None:
        self.expect("<")
        key = self.ident()
        if key not in SCALARS or key in ("double", "float", "bytes"):
            raise self.fail(f"{key} cannot be a map key")
        self.expect(",")
        value = self.full_ident()
        self.expect(">")
        name = self.ident()
        entry_name = "".join(part[:1].upper() + part[1:] for part in name.split("_")) + "Entry"
        entry = message.nested_type.add(name=entry_name)
        entry.options.map_entry = True
        entry.field.add(name="key", number=1, label=F.LABEL_OPTIONAL, type=SCALARS[key])
        value_field = entry.field.add(name="value", number=2, label=F.LABEL_OPTIONAL)
        if value in SCALARS:
            value_field.type = SCALARS[value]
        else:
            self.pending.append((f"{scope}.{entry_name}", _setter(value_field), value, 0))
        field = message.field.add(name=name, label=F.LABEL_REPEATED, type=F.TYPE_MESSAGE)
        field.type_name = f"{scope}.{entry_name}"
        self.expect("=")
        field.number = self.integer()
        self.field_options(field)
        self.expect(";")

    def field_options(self, field: descriptor_pb2.FieldDescriptorProto | None) -> None:
        if not self.accept("["):
            return
        while True:
            name = self.option_name()
            self.expect("=")
            value = self.constant()
            if field is not None:
                if name == "default":
                    field.default_value = value
                elif name == "json_name":
                    field.json_name = value
                elif name == "packed":
                    field.options.packed = value == "true"
                elif name == "deprecated":
                    field.options.deprecated = value == "true"
            if not self.accept(","):
                break
        self.expect("]")

    def ranges(self, exclusive_end: bool) -> Iterator[tuple[int, int]]:
        while True:
            start = self.integer()
            end = start
            if self.accept("to"):
                end = MAX_FIELD_NUMBER if self.accept("max") else self.integer()
            yield start, end + 1 if exclusive_end else end
            if not self.accept(","):
                return

    def reserved(self, message: descriptor_pb2.DescriptorProto) -> None:
        token = self.peek()
        if token is not None and token.kind == "string":
            message.reserved_name.append(self.string())
            while self.accept(","):
                message.reserved_name.append(self.string())
        else:
            for start, end in self.ranges(exclusive_end=True):
                message.reserved_range.add(start=start, end=end)
        self.expect(";")

    def enum(self, enum: descriptor_pb2.EnumDescriptorProto) -> None:
        enum.name = self.ident()
        self.expect("{")
        while not self.accept("}"):
            if self.accept(";"):
                continue
            if self.accept("option"):
                name = self.option_name()
                self.expect("=")
                value = self.constant()
                if name == "allow_alias":  # kept: without it, two names of one number do not build
                    enum.options.allow_alias = value == "true"
                self.expect(";")
            elif self.accept("reserved"):
                token = self.peek()
                if token is not None and token.kind == "string":
                    enum.reserved_name.append(self.string())
                    while self.accept(","):
                        enum.reserved_name.append(self.string())
                else:
                    for start, end in self.ranges(exclusive_end=False):
                        enum.reserved_range.add(start=start, end=end)
                self.expect(";")
            else:
                added = enum.value.add(name=self.ident())
                self.expect("=")
                added.number = self.integer()
                self.field_options(None)
                self.expect(";")
        if not enum.value:
            raise self.fail(f"enum {enum.name} has no values")
        # What protoc checks and protobuf's runtime pool does not.
        if self.proto3 and enum.value[0].number != 0:
            raise ProtoTextError(f"enum {enum.name}: the first value of a proto3 enum must be zero")
        numbers = [v.number for v in enum.value]
        if len(set(numbers)) != len(numbers) and not enum.options.allow_alias:
            raise ProtoTextError(f"enum {enum.name}: two values share a number (set option allow_alias = true)")
        for v in enum.value:
            if any(r.start <= v.number <= r.end for r in enum.reserved_range) or v.name in enum.reserved_name:
                raise ProtoTextError(f"enum {enum.name}: {v.name} = {v.number} is reserved")

    def service(self, service: descriptor_pb2.ServiceDescriptorProto) -> None:
        service.name = self.ident()
        self.expect("{")
        while not self.accept("}"):
            if self.accept(";"):
                continue
            if self.accept("option"):
                self.option_name()
                self.expect("=")
                self.constant()
                self.expect(";")
                continue
            self.expect("rpc")
            method = service.method.add(name=self.ident())
            for side in ("input", "output"):
                if side == "output":
                    self.expect("returns")
                self.expect("(")
                if self.accept("stream"):
                    setattr(method, f"{'client' if side == 'input' else 'server'}_streaming", True)
                self.pending.append((self.scope(), _method_setter(method, side), self.full_ident(), 0))
                self.expect(")")
            if self.accept("{"):
                method.options.SetInParent()  # as protoc records a method with a body
                while not self.accept("}"):
                    if not self.accept(";"):
                        self.expect("option")
                        self.option_name()
                        self.expect("=")
                        self.constant()
                        self.expect(";")
            else:
                self.expect(";")


def _setter(field: descriptor_pb2.FieldDescriptorProto) -> Callable[[str, Kind], None]:
    def set_type(full_name: str, kind: Kind) -> None:
        field.type_name = full_name
        field.type = kind

    return set_type


def _method_setter(method: descriptor_pb2.MethodDescriptorProto, side: str) -> Callable[[str, Kind], None]:
    def set_type(full_name: str, kind: Kind) -> None:
        if kind != F.TYPE_MESSAGE:
            raise ProtoTextError(f"rpc {method.name}: {full_name.lstrip('.')} is not a message")
        setattr(method, f"{side}_type", full_name)

    return set_type


def _symbols(file: descriptor_pb2.FileDescriptorProto) -> dict[str, Kind]:
    """Every message and enum a file declares, by full name (with a leading dot), to its field type."""
    out: dict[str, Kind] = {}

    def walk(
        messages: Iterator[descriptor_pb2.DescriptorProto] | list[descriptor_pb2.DescriptorProto], scope: str
    ) -> None:
        for m in messages:
            full = f"{scope}.{m.name}"
            out[full] = F.TYPE_MESSAGE
            for e in m.enum_type:
                out[f"{full}.{e.name}"] = F.TYPE_ENUM
            walk(list(m.nested_type), full)

    prefix = f".{file.package}" if file.package else ""
    walk(list(file.message_type), prefix)
    for e in file.enum_type:
        out[f"{prefix}.{e.name}"] = F.TYPE_ENUM
    return out


def _resolve(name: str, scope: str, symbols: Mapping[str, Kind]) -> tuple[str, Kind] | None:
    """Protobuf's scoping: a relative name's first part is looked up from the innermost scope outwards."""
    if name.startswith("."):
        return (name, symbols[name]) if name in symbols else None
    first, _, rest = name.partition(".")
    parts = scope.split(".") if scope else [""]
    for i in range(len(parts), 0, -1):
        base = ".".join(parts[:i])
        candidate = f"{base}.{first}"
        if candidate in symbols or any(s.startswith(candidate + ".") for s in symbols):
            full = f"{candidate}.{rest}" if rest else candidate
            return (full, symbols[full]) if full in symbols else None
    return None


Lookup = Callable[[str], "descriptor_pb2.FileDescriptorProto | None"]


def parse(text: str, lookup: Lookup) -> descriptor_pb2.FileDescriptorProto:
    """The descriptor of ``text``; ``lookup(path)`` gives an imported file's descriptor (None: unknown).
    Raises ProtoTextError."""
    parser = _Parser(text)
    file = parser.parse()
    dependencies: dict[str, descriptor_pb2.FileDescriptorProto] = {}

    def gather(path: str) -> None:
        if path in dependencies:
            return
        found = lookup(path)
        if found is None:
            raise ProtoTextError(f"import {path!r} is not among the schema's references")
        dependencies[path] = found
        for inner in found.dependency:
            gather(inner)

    for dependency in file.dependency:
        gather(dependency)
    symbols = _symbols(file)
    for found in dependencies.values():
        symbols.update(_symbols(found))
    for scope, set_type, name, line in parser.pending:
        resolved = _resolve(name, scope, symbols)
        if resolved is None:
            raise ProtoTextError(f"{'line ' + str(line) + ': ' if line else ''}unknown type {name!r}")
        set_type(*resolved)
    pool = descriptor_pool.DescriptorPool()
    try:
        for ordered in _ordered(dependencies):
            pool.Add(ordered)
        pool.Add(file)
    except (TypeError, ValueError) as e:
        raise ProtoTextError(str(e)) from None
    return file


def _ordered(files: Mapping[str, descriptor_pb2.FileDescriptorProto]) -> list[descriptor_pb2.FileDescriptorProto]:
    """Dependencies before the files that import them."""
    out: list[descriptor_pb2.FileDescriptorProto] = []
    seen: set[str] = set()

    def visit(name: str) -> None:
        if name in seen or name not in files:
            return
        seen.add(name)
        for inner in files[name].dependency:
            visit(inner)
        out.append(files[name])

    for name in files:
        visit(name)
    return out


def render(file: descriptor_pb2.FileDescriptorProto) -> str:
    """``file`` as ``.proto`` text: what it declares, with the options ``parse`` keeps."""
    lines = [f'syntax = "{file.syntax or "proto2"}";']
    if file.package:
        lines.append(f"package {file.package};")
    for i, dependency in enumerate(file.dependency):
        kind = "public " if i in file.public_dependency else "weak " if i in file.weak_dependency else ""
        lines.append(f'import {kind}"{dependency}";')
    proto3 = file.syntax == "proto3"
    for message in file.message_type:
        lines += _render_message(message, proto3, "")
    for enum in file.enum_type:
        lines += _render_enum(enum, "")
    for service in file.service:
        lines.append(f"service {service.name} {{")
        for m in service.method:
            cin = "stream " if m.client_streaming else ""
            sout = "stream " if m.server_streaming else ""
            lines.append(f"  rpc {m.name}({cin}{m.input_type}) returns ({sout}{m.output_type});")
        lines.append("}")
    return "\n".join(lines) + "\n"


def _render_message(message: descriptor_pb2.DescriptorProto, proto3: bool, indent: str) -> list[str]:
    inner = indent + "  "
    lines = [f"{indent}message {message.name} {{"]
    entries = {n.name: n for n in message.nested_type if n.options.map_entry}
    real_oneofs = {
        i
        for i, _ in enumerate(message.oneof_decl)
        if not any(f.proto3_optional and f.oneof_index == i for f in message.field)
    }
    done: set[int] = set()
    for field in message.field:
        if field.HasField("oneof_index") and field.oneof_index in real_oneofs:
            if field.oneof_index in done:
                continue
            done.add(field.oneof_index)
            lines.append(f"{inner}oneof {message.oneof_decl[field.oneof_index].name} {{")
            for member in message.field:
                if member.HasField("oneof_index") and member.oneof_index == field.oneof_index:
                    lines.append(inner + "  " + _render_field(member, entries, proto3, in_oneof=True))
            lines.append(f"{inner}}}")
        else:
            lines.append(inner + _render_field(field, entries, proto3, in_oneof=False))
    for nested in message.nested_type:
        if not nested.options.map_entry:
            lines += _render_message(nested, proto3, inner)
    for enum in message.enum_type:
        lines += _render_enum(enum, inner)
    for r in message.reserved_range:
        lines.append(f"{inner}reserved {r.start}" + (f" to {r.end - 1};" if r.end - 1 != r.start else ";"))
    if message.reserved_name:
        lines.append(f"{inner}reserved " + ", ".join(f'"{n}"' for n in message.reserved_name) + ";")
    for e in message.extension_range:
        lines.append(f"{inner}extensions {e.start} to {e.end - 1};")
    lines.append(f"{indent}}}")
    return lines


def _render_field(
    field: descriptor_pb2.FieldDescriptorProto,
    entries: Mapping[str, descriptor_pb2.DescriptorProto],
    proto3: bool,
    in_oneof: bool,
) -> str:
    entry = entries.get(field.type_name.rsplit(".", 1)[-1]) if field.type == F.TYPE_MESSAGE else None
    if entry is not None and field.label == F.LABEL_REPEATED:
        key, value = entry.field[0], entry.field[1]
        kind = f"map<{_type_text(key)}, {_type_text(value)}>"
        label = ""
    else:
        kind = _type_text(field)
        if in_oneof or (proto3 and field.label == F.LABEL_OPTIONAL and not field.proto3_optional):
            label = ""
        else:
            label = {F.LABEL_OPTIONAL: "optional ", F.LABEL_REQUIRED: "required ", F.LABEL_REPEATED: "repeated "}[
                field.label
            ]
    options = []
    if field.HasField("default_value"):
        default = field.default_value
        if field.type in (F.TYPE_STRING, F.TYPE_BYTES):
            default = '"' + default.replace("\\", "\\\\").replace('"', '\\"') + '"'
        options.append(f"default = {default}")
    if field.HasField("json_name"):
        options.append(f'json_name = "{field.json_name}"')
    if field.options.HasField("packed"):
        options.append(f"packed = {'true' if field.options.packed else 'false'}")
    if field.options.deprecated:
        options.append("deprecated = true")
    suffix = f" [{', '.join(options)}]" if options else ""
    return f"{label}{kind} {field.name} = {field.number}{suffix};"


def _type_text(field: descriptor_pb2.FieldDescriptorProto) -> str:
    return field.type_name if field.type in (F.TYPE_MESSAGE, F.TYPE_ENUM) else SCALAR_NAMES[field.type]


def _render_enum(enum: descriptor_pb2.EnumDescriptorProto, indent: str) -> list[str]:
    lines = [f"{indent}enum {enum.name} {{"]
    if enum.options.allow_alias:
        lines.append(f"{indent}  option allow_alias = true;")
    lines += [f"{indent}  {v.name} = {v.number};" for v in enum.value]
    for r in enum.reserved_range:
        lines.append(f"{indent}  reserved {r.start}" + (f" to {r.end};" if r.end != r.start else ";"))
    if enum.reserved_name:
        lines.append(f"{indent}  reserved " + ", ".join(f'"{n}"' for n in enum.reserved_name) + ";")
    lines.append(f"{indent}}}")
    return lines
