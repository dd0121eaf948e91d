"""Client quotas (Kafka's KIP-546): AlterClientQuotas and DescribeClientQuotas. An entity is one or more
components, each a user or a client id (``entity_type`` "user" or "client-id"), named or that type's default."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from odradek.client.errors import ErrorCode

NONE = int(ErrorCode.NONE)


@dataclass(frozen=True, slots=True)
class EntityComponent:
    entity_type: str
    name: str | None  # None: the entity type's default (every one without its own)


@dataclass(frozen=True, slots=True)
class QuotaAlterOp:
    key: str  # producer_byte_rate, consumer_byte_rate or request_percentage
    value: float = 0.0  # ignored by remove
    remove: bool = False  # remove the entity's value for key (fine when it has none)


@dataclass(frozen=True, slots=True)
class QuotaAlteration:
    entity: tuple[EntityComponent, ...]
    ops: tuple[QuotaAlterOp, ...]


@dataclass(frozen=True, slots=True)
class AlterClientQuotas:
    entries: tuple[QuotaAlteration, ...]  # each applies all or nothing, independently of the others
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class QuotaAlterationResult:
    error: int = NONE
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class AlterClientQuotasAnswer:
    error: int = NONE  # the whole request (NOT_CONTROLLER...)
    entries: tuple[QuotaAlterationResult, ...] = ()  # one per entry, in request order
    metadata_offset: int | None = None


class QuotaMatch(IntEnum):
    """How a filter component matches, Kafka's match types."""

    EXACT = 0  # the component named ``match``
    DEFAULT = 1  # the default of the entity type
    ANY = 2  # any component of the entity type, named or default

    @classmethod
    def of(cls, code: int) -> QuotaMatch:
        """The match type of a wire code; EXACT for a code that is none."""
        try:
            return cls(code)
        except ValueError:
            return cls.EXACT


@dataclass(frozen=True, slots=True)
class QuotaFilterComponent:
    entity_type: str
    match_type: QuotaMatch = QuotaMatch.EXACT
    match: str = ""  # for EXACT


@dataclass(frozen=True, slots=True)
class DescribeClientQuotas:
    # The entities whose every component given here matches (each entity type at most once); empty: all.
    components: tuple[QuotaFilterComponent, ...] = ()
    strict: bool = False  # only entities with no component of a type the filter leaves out


@dataclass(frozen=True, slots=True)
class ClientQuotaEntry:
    entity: tuple[EntityComponent, ...]
    values: tuple[tuple[str, float], ...]  # (key, value), by key


@dataclass(frozen=True, slots=True)
class DescribeClientQuotasAnswer:
    error: int = NONE
    error_message: str = ""
    entries: tuple[ClientQuotaEntry, ...] = ()  # from the answering node's own metadata image
