"""The checker of the share group workload (``--workload kafka-share``): what KIP-932 share groups promise about
the records of a topic, judged from the deliveries and acknowledgements the share consumers recorded.

A record is one offset of a partition. Every record the producers had acknowledged (acks=all) must be delivered to
some member of the group until it is *finished*: an acknowledged ACCEPT or REJECT, or a delivery whose count
reached ``group.share.delivery.count.limit`` (its lock's end then archives it, whatever the consumer does). The
workload ends with a drain in which the members accept everything, so a record still unfinished then was lost by
the group (``share_lost``). An ACCEPT or REJECT whose outcome is unknown (sent, then a timeout or a lost
connection, or the consumer killed before the answer) may have finished the record: such records are counted as
indeterminate, not lost. Only INVALID_RECORD_STATE proves an acknowledgement was not applied.

The other promises: no record is accepted twice (an accept is applied only while the consumer holds the record's
lock, and only once: a late accept after the lock expired is refused); no delivery counts more than the limit; a
record is never delivered again after an applied ACCEPT or REJECT (a delivery counted higher than the one that
finished it); every delivered record is the one produced at its offset. A delivery's count is the broker's, as
librdkafka reports it: counting deliveries in the history instead would overcount legitimately, since a share
partition leader that moves forgets its acquisitions (never stored) and delivers those records again with the
count of their last stored state.

The topic's log itself is judged by chaos/checker.py (nothing acknowledged lost, no duplicates...), over the
producers' events and the final read: its counts are in the report prefixed ``log.``. ``check`` is pure.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from odradek.chaos import checker
from odradek.chaos.checker import Report, Violations
from odradek.chaos.history import (
    Ack,
    Event,
    Fault,
    FinalRead,
    Heal,
    ProducerEpoch,
    Send,
    SendError,
    ShareAck,
    ShareDelivered,
)

VIOLATIONS: dict[str, str] = {
    "share_lost": "acknowledged, never accepted/rejected/archived",
    "accepted_twice": "two applied ACCEPTs of one record",
    "over_delivery_limit": "a delivery counted above the limit",
    "delivered_after_done": "delivered again after an applied ACCEPT/REJECT",
    "wrong_record": "delivered a value not produced at its offset",
}
# Workload bugs of the share workload (``--unsafe-bug``), each a defect this checker must catch: drop-records
# accepts every 20th record without processing (recording) it, so those records are never seen delivered.
BUGS = ("drop-records",)
DROP_EVERY = 20
WARM = "warm"  # the process that writes the warm-up records: written before the group's start, not its records

Key = tuple[int, int]  # partition, offset
FINISHED = ("accepted", "rejected", "archived")


@dataclass(slots=True)
class ShareIndex:
    """The history's share events per record, and what the producers and the final read say is at each offset."""

    deliveries: dict[Key, list[ShareDelivered]] = field(default_factory=dict)
    acks: dict[Key, list[ShareAck]] = field(default_factory=dict)
    acked: dict[Key, str] = field(default_factory=dict)  # the workload's producers' acknowledged records
    warm: dict[Key, str] = field(default_factory=dict)
    final: dict[Key, str] = field(default_factory=dict)
    sent: set[str] = field(default_factory=set)


def index(history: Iterable[Event], topic: str) -> ShareIndex:
    ix = ShareIndex()
    for e in history:
        if getattr(e, "topic", topic) != topic:
            continue
        if isinstance(e, ShareDelivered):
            ix.deliveries.setdefault((e.partition, e.offset), []).append(e)
        elif isinstance(e, ShareAck):
            ix.acks.setdefault((e.partition, e.offset), []).append(e)
        elif isinstance(e, Ack) and e.offset >= 0:
            (ix.warm if e.process == WARM else ix.acked)[(e.partition, e.offset)] = e.value
        elif isinstance(e, FinalRead):
            ix.final.setdefault((e.partition, e.offset), e.value)
        elif isinstance(e, Send):
            ix.sent.add(e.value)
    return ix


@dataclass(slots=True)
class Outcomes:
    """A record's acknowledgements, each sent one (invoke) paired with its answer in the order they came."""

    applied: list[ShareAck] = field(default_factory=list)  # ok answers to timely acknowledgements
    stale_ok: list[ShareAck] = field(default_factory=list)  # ok answers to stale ones: no-ops
    maybe: list[ShareAck] = field(default_factory=list)  # timely ACCEPTs/REJECTs of unknown outcome


def stale(invoke: ShareAck, deliveries: list[ShareDelivered], lock_s: float) -> bool:
    """Whether an acknowledgement was sent once the consumer surely no longer held the record's lock: more than
    the lock duration after it received the delivery (acquired before), or after the record was delivered again
    with a higher count. The broker cannot apply it: it refuses it, or (the record finished by another member
    meanwhile, below the share-partition's start offset) answers it as a no-op success, as Kafka does."""
    received = [
        d.time
        for d in deliveries
        if d.consumer == invoke.consumer and d.delivery_count == invoke.delivery_count and d.time <= invoke.time
    ]
    late = bool(received) and invoke.time - max(received) > lock_s
    return late or any(d.delivery_count > invoke.delivery_count and d.time < invoke.time for d in deliveries)


def outcomes(deliveries: list[ShareDelivered], acks: list[ShareAck], lock_s: float) -> Outcomes:
    sent: dict[tuple[str, str, int], list[ShareAck]] = {}
    answers: dict[tuple[str, str, int], list[ShareAck]] = {}
    for a in acks:
        (sent if a.result == "invoke" else answers).setdefault((a.consumer, a.kind, a.delivery_count), []).append(a)
    out = Outcomes()
    for key, invokes in sent.items():
        replies = answers.get(key, [])
        for i, invoke in enumerate(invokes):
            reply = replies[i] if i < len(replies) else None
            timely = not stale(invoke, deliveries, lock_s)
            if reply is not None and reply.result == "ok":
                (out.applied if timely else out.stale_ok).append(reply)
            elif timely and invoke.kind != "release" and (reply is None or not reply.definite):
                out.maybe.append(invoke)
    return out


def status(
    deliveries: list[ShareDelivered], acks: list[ShareAck], limit: int, lock_s: float, crashes: list[float]
) -> str:
    """What became of a record: accepted, rejected or archived (finished), indeterminate (an ACCEPT or REJECT of
    unknown outcome), unseen (maybe archived after a delivery nobody recorded, below), open (delivered, not
    finished) or undelivered.

    A member records a delivery when its poll returns it; a member crashed (``crashes``: the times of
    ``kill-consumer`` faults) may have held records librdkafka had fetched for it and not yet handed over. Such a
    record comes back when the lock expires, one delivery count higher, and is seen then, unless that unseen
    delivery was its last one: a record last seen at the count below the limit, with a member crashed after that
    delivery, may have been archived unseen. Only that case is excused: a record seen at a lower count needs
    several unseen deliveries in a row to reach the limit, and is reported as lost."""
    seen = outcomes(deliveries, acks, lock_s)
    for kind in ("accept", "reject"):
        if any(a.kind == kind for a in seen.applied):
            return f"{kind}ed"
    if any(d.delivery_count >= limit for d in deliveries):
        return "archived"
    if seen.maybe:
        return "indeterminate"
    if deliveries:
        last = max(deliveries, key=lambda d: (d.delivery_count, d.time))
        if last.delivery_count == limit - 1 and any(t > last.time for t in crashes):
            return "unseen"
    return "open" if deliveries else "undelivered"


def consumer_crashes(history: Iterable[Event]) -> list[float]:
    return [e.time for e in history if isinstance(e, Fault) and e.kind == "kill-consumer"]


def unfinished(history: Iterable[Event], topic: str, limit: int, lock_ms: int) -> list[Key]:
    """The producers' acknowledged records not (maybe) finished yet: what the workload's drain waits for."""
    events = list(history)
    ix, crashes = index(events, topic), consumer_crashes(events)
    return [
        k
        for k in ix.acked
        if status(ix.deliveries.get(k, []), ix.acks.get(k, []), limit, lock_ms / 1000, crashes)
        in ("open", "undelivered")
    ]


@dataclass(slots=True)
class ShareReport(Report):
    """The share checks, with the log's report: ``violations`` and ``totals`` hold both, the log's prefixed
    ``log.``."""

    sections: dict[str, Report] = field(default_factory=dict)

    def summary_table(self) -> str:
        t = self.totals
        lines = [
            f"chaos check (share group): {'OK' if self.ok else 'FAIL'}",
            f"records {t['records']}  accepted {t['accepted']}  rejected {t['rejected']}  archived {t['archived']}"
            f"  indeterminate {t['indeterminate']}  maybe archived unseen {t['unseen']}  lost {t['lost']}",
            f"deliveries {t['deliveries']}  redeliveries {t['redeliveries']}  highest delivery count"
            f" {t['max_delivery_count']} (limit {t['delivery_limit']})  consumers {t['consumers']}",
            f"acknowledgements applied: accept {t['ack.accept.ok']}  release {t['ack.release.ok']}  reject"
            f" {t['ack.reject.ok']} (of them sent past the lock, no-ops: {t['ack.stale_ok']}); refused"
            f" (INVALID_RECORD_STATE) {t['ack.refused']}, other failures {t['ack.failed']}, no answer"
            f" {t['ack.unanswered']}",
            "",
            f"{'check':<22} {'count':>7}  {'meaning':<46} first example",
        ]
        for name, meaning in VIOLATIONS.items():
            v = self.violations[name]
            example = json.dumps(v.examples[0], separators=(",", ":")) if v.examples else ""
            if len(example) > 100:
                example = example[:97] + "..."
            lines.append(f"{name:<22} {v.count:>7}  {meaning:<46} {example}".rstrip())
        for prefix, report in self.sections.items():
            lines += ["", f"{prefix}:", report.summary_table()]
        return "\n".join(lines)


def results_of(acks: list[ShareAck], result: str) -> int:
    return sum(1 for a in acks if a.result == result)


def _delivery(d: ShareDelivered) -> dict[str, object]:
    return {"consumer": d.consumer, "count": d.delivery_count, "value": d.value}


def check(history: Iterable[Event], topic: str, limit: int, lock_ms: int, max_examples: int = 10) -> ShareReport:
    """Judge ``history`` of ``topic`` whose group delivers a record at most ``limit`` times and locks a delivered
    record for ``lock_ms``."""
    events = list(history)
    log_events = [
        e
        for e in events
        if isinstance(e, Fault | Heal | ProducerEpoch)
        or (isinstance(e, Send | Ack | SendError | FinalRead) and e.topic == topic)
    ]
    sections: dict[str, Report] = {"log": checker.check(log_events, max_examples)}
    ix, crashes = index(events, topic), consumer_crashes(events)
    found = {name: Violations(max_examples) for name in VIOLATIONS}
    statuses: Counter[str] = Counter()
    for key, value in ix.acked.items():
        deliveries, acks = ix.deliveries.get(key, []), ix.acks.get(key, [])
        state = status(deliveries, acks, limit, lock_ms / 1000, crashes)
        statuses[state] += 1
        if state in ("open", "undelivered"):
            where = {"partition": key[0], "offset": key[1], "value": value}
            found["share_lost"].add({**where, "deliveries": [_delivery(d) for d in deliveries][: limit + 2]})
    stale_ok = 0
    for key, deliveries in ix.deliveries.items():
        seen = outcomes(deliveries, ix.acks.get(key, []), lock_ms / 1000)
        stale_ok += len(seen.stale_ok)
        where = {"partition": key[0], "offset": key[1]}
        accepts = [a for a in seen.applied if a.kind == "accept"]
        if len(accepts) > 1:
            found["accepted_twice"].add({**where, "by": [(a.consumer, a.delivery_count) for a in accepts]})
        for d in deliveries:
            if d.delivery_count > limit:
                found["over_delivery_limit"].add({**where, **_delivery(d), "limit": limit})
        done = [a.delivery_count for a in seen.applied if a.kind in ("accept", "reject")]
        if done and (later := [d for d in deliveries if d.delivery_count > min(done)]):
            found["delivered_after_done"].add({**where, "finished_at": min(done), "then": _delivery(later[0])})
        for d in deliveries:
            produced = ix.acked.get(key) or ix.warm.get(key) or ix.final.get(key)
            if (produced is not None and d.value != produced) or (produced is None and d.value not in ix.sent):
                found["wrong_record"].add({**where, **_delivery(d), "produced": produced})
    delivered = [d for ds in ix.deliveries.values() for d in ds]
    acks = [a for ack_list in ix.acks.values() for a in ack_list]
    results = Counter((a.kind, a.result) for a in acks)
    totals = {
        "records": len(ix.acked),
        "accepted": statuses["accepted"],
        "rejected": statuses["rejected"],
        "archived": statuses["archived"],
        "indeterminate": statuses["indeterminate"],
        "unseen": statuses["unseen"],
        "lost": statuses["open"] + statuses["undelivered"],
        "deliveries": len(delivered),
        "redeliveries": sum(1 for d in delivered if d.delivery_count > 1),
        "uncounted": sum(1 for d in delivered if d.delivery_count < 1),  # librdkafka gave no delivery count
        "max_delivery_count": max((d.delivery_count for d in delivered), default=0),
        "delivery_limit": limit,
        "consumers": len({d.consumer for d in delivered}),
        **{f"ack.{kind}.ok": results[(kind, "ok")] for kind in ("accept", "release", "reject")},
        "ack.stale_ok": stale_ok,
        "ack.refused": sum(1 for a in acks if a.result == "fail" and a.definite),
        "ack.failed": sum(1 for a in acks if a.result == "fail" and not a.definite),
        "ack.unanswered": max(0, results_of(acks, "invoke") - results_of(acks, "ok") - results_of(acks, "fail")),
    }
    faults: list[dict[str, object]] = []
    for prefix, report in sections.items():
        totals |= {f"{prefix}.{k}": n for k, n in report.totals.items()}
        found |= {f"{prefix}.{k}": v for k, v in report.violations.items()}
        faults = report.faults
    return ShareReport(totals, found, faults, sections)
