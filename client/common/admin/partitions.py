"""Who leads and who holds partitions: ElectLeaders (preferred and unclean elections) and
AlterPartitionReassignments."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from odradek.client.errors import ErrorCode

NONE = int(ErrorCode.NONE)


class ElectionType(IntEnum):
    """Kafka's election types (a request may carry another number, which is refused: INVALID_REQUEST)."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True, slots=True)
class ElectLeaders:
    election_type: int = ElectionType.PREFERRED
    # (topic, partition) pairs; None: every partition (answered only where an election was needed); empty: none.
    partitions: tuple[tuple[str, int], ...] | None = None


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """One partition's outcome: of an election, its leader; of a reassignment, its error alone."""

    topic: str
    partition: int
    error: int = NONE
    error_message: str = ""
    leader: int = 0


@dataclass(frozen=True, slots=True)
class ElectLeadersAnswer:
    error: int = NONE  # the whole request (NOT_CONTROLLER, CLUSTER_AUTHORIZATION_FAILED, INVALID_REQUEST...)
    results: tuple[ElectionResult, ...] = ()
    metadata_offset: int | None = None


@dataclass(frozen=True, slots=True)
class Reassignment:
    topic: str
    partition: int
    replicas: tuple[int, ...] | None  # the target replicas; None (or empty): cancel a pending reassignment


@dataclass(frozen=True, slots=True)
class AlterReassignments:
    reassignments: tuple[Reassignment, ...]


@dataclass(frozen=True, slots=True)
class AlterReassignmentsAnswer:
    error: int = NONE  # the whole request
    results: tuple[ElectionResult, ...] = ()  # one per reassignment, in request order
    metadata_offset: int | None = None
