"""Which topics DeleteRecords may trim: the rule, apart from the rpc that applies it (broker/dataplane.py).

As Kafka: records can be deleted from the start of a log only where its ``cleanup.policy`` includes ``delete``. A
compacted log keeps the last record of every key by design (the offsets topic holds the groups' commits), so a
trim there would silently lose state; and internal topics belong to the cluster.
"""

from __future__ import annotations

from collections.abc import Set

from odradek.client.common.topic_rules import INTERNAL_TOPICS
from odradek.client.errors import ErrorCode, OdradekError


def check_topic(topic: str, policies: Set[str]) -> None:
    """Raise the typed error (POLICY_VIOLATION) when ``topic``'s records may not be deleted; ``policies`` is its
    effective cleanup.policy."""
    if topic in INTERNAL_TOPICS:
        raise OdradekError(f"cannot delete records of internal topic {topic}", code=ErrorCode.POLICY_VIOLATION)
    if "delete" not in policies:
        raise OdradekError(
            f"cannot delete records of {topic}: its cleanup.policy is {','.join(sorted(policies))} (records are only "
            "deleted from topics whose policy includes delete)",
            code=ErrorCode.POLICY_VIOLATION,
        )
