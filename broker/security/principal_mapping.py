"""Kafka's ``ssl.principal.mapping.rules`` (KIP-371): a TLS client's certificate subject to a principal name.

The rules are a comma-separated list, tried in order; the first that matches the whole distinguished name wins:

- ``RULE:pattern/replacement/`` with an optional ``L`` or ``U`` after the last slash (lower or upper case the
  result). ``pattern`` is a regular expression that must match the whole DN; the name is the DN with every match of
  the pattern replaced by ``replacement``, whose ``$1``-style references name the pattern's groups (a reference to a
  group the pattern does not have stays literal text, as in Kafka). ``\\`` escapes a character in either part, so
  ``\\/`` is a slash; a comma needs no escape (the splitter reads a rule up to its closing slash).
- ``DEFAULT``: the distinguished name itself.

A DN that no rule matches has no principal: :meth:`PrincipalMapper.name` raises :class:`NoMatchingRule`, as Kafka
does (an empty rule list matches nothing; Kafka's default is ``DEFAULT``).

The DN is the subject in RFC 2253 form, most specific first, as Java prints it and Kafka's rules are written
against: ``CN=kafka1,OU=Eng,O=Acme,L=SF,ST=CA,C=US`` (``cryptography``'s ``Name.rfc4514_string()`` gives this form).

Patterns use Python's ``re``, which accepts the Java syntax these rules are written in save for a few constructs
(``\\p{...}`` classes, ``(?<name>...)``: write ``(?P<name>...)``); an unreadable pattern is refused when the rules
are parsed, as is a replacement that cannot apply (``$1`` with no group in the pattern, a dangling ``$`` or ``\\``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["DEFAULT_RULES", "MappingRule", "NoMatchingRule", "PrincipalMapper"]

DEFAULT_RULES = "DEFAULT"
"""Kafka's default for ``ssl.principal.mapping.rules``: the principal is the full DN."""

# Kafka's own grammar (SslPrincipalMapper), so that a rule list splits and parses here exactly as it does there:
# a rule is DEFAULT, or RULE:pattern/replacement/[LU] where pattern and replacement are runs of escaped characters or
# anything but a backslash or slash, or anything else (an empty piece between commas is skipped; other text fails
# the full-length check below).
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)", re.ASCII)
_PARSER = re.compile(_RULE, re.ASCII)

Case = Literal["", "L", "U"]


@dataclass(frozen=True)
class _Group:
    """A group reference in a compiled replacement: its number or name."""

    key: int | str


# A compiled replacement: literal text and group references.
_Part = str | _Group


class NoMatchingRule(ValueError):
    """No rule maps this distinguished name: the connection has no principal and must be refused."""


@dataclass(frozen=True)
class MappingRule:
    """One parsed rule; ``pattern is None`` for ``DEFAULT``."""

    pattern: str | None
    replacement: str = ""
    case: Case = ""
    _regex: re.Pattern[str] | None = field(default=None, repr=False, compare=False)
    _parts: tuple[_Part, ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def default(cls) -> MappingRule:
        return cls(pattern=None)

    @classmethod
    def compile(cls, pattern: str, replacement: str, case: Case) -> MappingRule:
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"invalid rule pattern {pattern!r}: {exc}") from exc
        parts = _compile_replacement(replacement, regex)
        return cls(pattern, replacement, case, regex, parts)

    def apply(self, dn: str) -> str | None:
        """The name this rule gives ``dn``, or None when its pattern does not match the whole DN."""
        if self._regex is None:
            return dn
        if self._regex.fullmatch(dn) is None:
            return None
        # Like Java's replaceAll: every match of the pattern in the DN is replaced, not only the full one.
        name = self._regex.sub(lambda match: _expand(self._parts, match), dn)
        if self.case == "L":
            return name.lower()
        if self.case == "U":
            return name.upper()
        return name

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        return f"RULE:{self.pattern}/{self.replacement}/{self.case}"


@dataclass(frozen=True)
class PrincipalMapper:
    """The parsed ``ssl.principal.mapping.rules``; pure, so one instance serves every connection."""

    rules: tuple[MappingRule, ...]

    @classmethod
    def parse(cls, rules: str) -> PrincipalMapper:
        """Parse a rule list; ValueError names the first rule that is not ``DEFAULT`` or ``RULE:p/r/[LU]``."""
        parsed: list[MappingRule] = []
        for piece in _split(rules):
            match = _PARSER.match(piece)
            if match is None or match.end() != len(piece):
                rest = piece[match.end() :] if match is not None else piece
                raise ValueError(
                    f"invalid principal mapping rule {piece!r} (unmatched {rest!r}): expected DEFAULT or "
                    "RULE:pattern/replacement/ with an optional L or U"
                )
            if match.group(1) is not None:
                parsed.append(MappingRule.default())
            elif match.group(2) is not None:
                flag = match.group(6)
                case: Case = "L" if flag == "L" else "U" if flag == "U" else ""
                parsed.append(MappingRule.compile(match.group(2), match.group(4), case))
            # else: an empty piece between commas, skipped as Kafka does.
        return cls(tuple(parsed))

    def name(self, dn: str) -> str:
        """The principal name for a certificate subject DN (RFC 2253 form); NoMatchingRule when no rule applies."""
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"no principal mapping rule applies to {dn!r} (rules: {self})")

    def __str__(self) -> str:
        return "[" + ", ".join(str(rule) for rule in self.rules) + "]"


def _split(rules: str) -> list[str]:
    """Kafka's splitter: each rule with the whitespace and comma around it removed (empty pieces kept)."""
    return [match.group(1) for match in _SPLITTER.finditer(rules.strip())]


def _compile_replacement(replacement: str, regex: re.Pattern[str]) -> tuple[_Part, ...]:
    """Read a Java replacement string against the pattern's groups.

    ``\\x`` is the character x; ``$n`` a group, its digits read while they still name a group (``$12`` with 3 groups
    is group 1 then "2"); ``${name}`` a named group. Following Kafka, a ``$n`` naming no group is literal text when
    the pattern has groups; a replacement that Java would reject when applied is refused here instead.
    """
    groups = regex.groups
    parts: list[_Part] = []
    literal: list[str] = []

    def flush() -> None:
        if literal:
            parts.append("".join(literal))
            literal.clear()

    i = 0
    while i < len(replacement):
        char = replacement[i]
        if char == "\\":
            if i + 1 == len(replacement):
                raise ValueError(f"invalid replacement {replacement!r}: a trailing backslash escapes nothing")
            literal.append(replacement[i + 1])
            i += 2
            continue
        if char != "$":
            literal.append(char)
            i += 1
            continue
        if i + 1 == len(replacement):
            raise ValueError(f"invalid replacement {replacement!r}: '$' at the end names no group")
        following = replacement[i + 1]
        if following == "{":
            close = replacement.find("}", i + 2)
            group_name = replacement[i + 2 : close] if close != -1 else ""
            if close == -1 or group_name not in regex.groupindex:
                raise ValueError(f"invalid replacement {replacement!r}: no named group {group_name!r} in the pattern")
            flush()
            parts.append(_Group(group_name))
            i = close + 1
            continue
        if not following.isascii() or not following.isdigit():
            raise ValueError(f"invalid replacement {replacement!r}: '$' must be followed by a group number")
        number = int(following)
        if groups > 0 and number > groups:
            # Kafka escapes a reference to a group the pattern does not have: the text stays as written.
            literal.append("$")
            i += 1
            continue
        if number > groups:
            raise ValueError(f"invalid replacement {replacement!r}: the pattern has no group {number}")
        j = i + 2
        while j < len(replacement) and replacement[j].isascii() and replacement[j].isdigit():
            longer = number * 10 + int(replacement[j])
            if longer > groups:
                break
            number = longer
            j += 1
        flush()
        parts.append(_Group(number))
        i = j
    flush()
    return tuple(parts)


def _expand(parts: tuple[_Part, ...], match: re.Match[str]) -> str:
    # A group that took no part in the match adds nothing, as in Java.
    return "".join(part if isinstance(part, str) else (match.group(part.key) or "") for part in parts)
