"""The pure parts of ``produce`` and ``consume``: kcat-style offset specs, ``-f`` format strings, and how keys,
values and headers are shown so that a null, the text "None" and binary bytes never look alike."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from odradek.client.cli.common import CommandError
from odradek.client.structs import ConsumerRecord

OffsetKind = Literal["beginning", "end", "absolute", "from_end", "time"]
Encoding = Literal["base64", "hex"]


@dataclass(frozen=True)
class OffsetSpec:
    """Where to start a partition: its beginning or end, offset N, N before the end, or the first record at or
    after a time (ms since the epoch)."""

    kind: OffsetKind
    value: int = 0


_NAMED = {
    "beginning": "beginning",
    "earliest": "beginning",
    "start": "beginning",
    "oldest": "beginning",
    "end": "end",
    "latest": "end",
    "newest": "end",
}


def parse_time(text: str) -> int:
    """``@`` times: ms since the epoch, or an ISO-8601 date/time (UTC unless it names an offset)."""
    if re.fullmatch(r"\d+", text):
        return int(text)
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise CommandError(f"bad time {text!r}: give ms since the epoch or an ISO time (2026-11-23T10:00:00)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    ms = int(when.timestamp() * 1000)
    if ms < 0:
        raise CommandError(f"time {text!r} is before 1970")
    return ms


def parse_offset(text: str) -> OffsetSpec:
    """One kcat offset: beginning|end (or earliest|latest), N, -N (N before the end), @ms or @ISO-time."""
    word = text.strip().lower()
    if word in _NAMED:
        return OffsetSpec(_NAMED[word])  # type: ignore[arg-type]
    if word.startswith("@"):
        return OffsetSpec("time", parse_time(text.strip()[1:]))
    if re.fullmatch(r"\d+", word):
        return OffsetSpec("absolute", int(word))
    if re.fullmatch(r"-\d+", word):
        return OffsetSpec("from_end", int(word[1:]))
    raise CommandError(f"bad offset {text!r}: use beginning, end, N, -N (from the end), @ms or @2026-11-23T10:00:00")


def parse_offsets(specs: Sequence[str]) -> tuple[OffsetSpec, dict[int, OffsetSpec]]:
    """The ``-o`` options: ``SPEC`` for every partition, ``P:SPEC`` for partition P only (later ones win)."""
    default = OffsetSpec("beginning")
    per_partition: dict[int, OffsetSpec] = {}
    for spec in specs:
        head, colon, rest = spec.partition(":")
        if colon and re.fullmatch(r"\d+", head.strip()):
            per_partition[int(head)] = parse_offset(rest)
        else:
            default = parse_offset(spec)
    return default, per_partition


def unescape(text: str) -> str:
    """kcat's escapes in format strings and delimiters: \\n \\r \\t \\0 \\\\ and \\xNN."""

    def one(m: re.Match[str]) -> str:
        code = m.group(1)
        if code.startswith("x"):
            return chr(int(code[1:], 16))
        return {"n": "\n", "r": "\r", "t": "\t", "0": "\0", "\\": "\\"}[code]

    return re.sub(r"\\(x[0-9a-fA-F]{2}|[nrt0\\])", one, text)


def encode(data: bytes, encoding: Encoding) -> str:
    return base64.b64encode(data).decode() if encoding == "base64" else data.hex()


def shown(data: bytes | None, encoding: Encoding) -> tuple[str | None, bool]:
    """(text, binary?) for JSON: UTF-8 text as is, anything else as ``base64:...``/``hex:...`` and flagged."""
    if data is None:
        return None, False
    try:
        return data.decode(), False
    except UnicodeDecodeError:
        return f"{encoding}:{encode(data, encoding)}", True


def human(data: bytes | None, encoding: Encoding) -> str:
    """For the text output: ``null`` bare, text always quoted, binary as bare ``base64:...``/``hex:...``."""
    text, binary = shown(data, encoding)
    if text is None:
        return "null"
    return text if binary else json.dumps(text, ensure_ascii=False)


def as_dict(r: ConsumerRecord, encoding: Encoding) -> dict:
    """One record for ``--format json``; ``key_encoding``/``value_encoding`` appear only for binary data, and a
    binary header value carries its encoding as a third element."""
    key, key_binary = shown(r.key, encoding)
    value, value_binary = shown(r.value, encoding)
    out: dict = {
        "topic": r.topic,
        "partition": r.partition,
        "offset": r.offset,
        "timestamp": r.timestamp,
        "key": key,
        "value": value,
        "headers": [],
    }
    for name, data in r.headers:
        text, binary = shown(data, encoding)
        out["headers"].append([name, text, encoding] if binary else [name, text])
    if key_binary:
        out["key_encoding"] = encoding
    if value_binary:
        out["value_encoding"] = encoding
    return out


def as_text(r: ConsumerRecord, encoding: Encoding) -> str:
    parts = [f"partition={r.partition}", f"offset={r.offset}", f"timestamp={r.timestamp}"]
    if r.key is not None:
        parts.append(f"key={human(r.key, encoding)}")
    if r.headers:
        parts.append(
            "headers=" + ",".join(f"{json.dumps(n, ensure_ascii=False)}:{human(v, encoding)}" for n, v in r.headers)
        )
    parts.append(f"value={human(r.value, encoding)}")
    return " ".join(parts) + "\n"


Piece = Callable[[ConsumerRecord], bytes]
_TOKEN = re.compile(r"%(.)", re.DOTALL)


def compile_format(fmt: str, encoding: Encoding | None) -> Callable[[ConsumerRecord], bytes]:
    """A kcat ``-f`` string as a renderer: %t topic, %p partition, %o offset, %k key, %s value, %h headers
    (``k=v`` comma-separated), %T timestamp (ms), %K/%S key/value length (-1 for null), %% a percent sign.
    Keys and values are written as raw bytes (a null as nothing), or all encoded when ``encoding`` is given."""

    def data(raw: bytes | None) -> bytes:
        if raw is None:
            return b""
        return raw if encoding is None else encode(raw, encoding).encode()

    tokens: dict[str, Piece] = {
        "t": lambda r: r.topic.encode(),
        "p": lambda r: str(r.partition).encode(),
        "o": lambda r: str(r.offset).encode(),
        "k": lambda r: data(r.key),
        "s": lambda r: data(r.value),
        "h": lambda r: b",".join(n.encode() + b"=" + data(v) for n, v in r.headers),
        "T": lambda r: str(r.timestamp).encode(),
        "K": lambda r: str(-1 if r.key is None else len(r.key)).encode(),
        "S": lambda r: str(-1 if r.value is None else len(r.value)).encode(),
    }
    pieces: list[Piece | bytes] = []
    text = unescape(fmt)
    pos = 0
    for m in _TOKEN.finditer(text):
        if m.start() > pos:
            pieces.append(text[pos : m.start()].encode())
        token = m.group(1)
        if token == "%":
            pieces.append(b"%")
        elif token in tokens:
            pieces.append(tokens[token])
        else:
            raise CommandError(f"unknown format token %{token} (use %t %p %o %k %s %h %T %K %S %%)")
        pos = m.end()
    if pos < len(text):
        if text[pos:].endswith("%"):
            raise CommandError("format string ends with a lone %")
        pieces.append(text[pos:].encode())

    def render(r: ConsumerRecord) -> bytes:
        return b"".join(p if isinstance(p, bytes) else p(r) for p in pieces)

    return render
