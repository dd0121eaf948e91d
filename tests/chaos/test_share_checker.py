"""The share group workload's checker (chaos/share_checker.py) on hand-made histories: a clean history with
accepts, releases, rejects and a record archived at the delivery count limit passes; a record lost, accepted twice,
delivered past the limit or after it was finished, or delivered with another value than was produced is caught;
an acknowledgement sent past the record's lock counts for nothing, and one of unknown outcome is indeterminate."""

from __future__ import annotations

from odradek.chaos.history import Ack, Event, Fault, FinalRead, Send, ShareAck, ShareDelivered
from odradek.chaos.share_checker import check, unfinished

T = "chaos"
LIMIT, LOCK_MS = 3, 3000


def produced(*values: str, partition: int = 0, final: bool = True) -> list[Event]:
    """``values`` acknowledged at offsets 0.. of ``partition`` (and in the final read)."""
    events: list[Event] = []
    for offset, v in enumerate(values):
        events += [Send(v, T, partition, process="p0"), Ack(v, T, partition, offset, process="p0")]
        if final:
            events.append(FinalRead("final", T, partition, offset, v, process="final"))
    return events


def delivered(consumer: str, offset: int, value: str, count: int, at: float) -> ShareDelivered:
    return ShareDelivered(consumer, T, 0, offset, value, count, process=consumer, time=at)


def acked(
    consumer: str, offset: int, kind: str, count: int, at: float, result: str = "ok", definite: bool = False
) -> list[Event]:
    """The acknowledgement sent at ``at`` and its answer just after (``result`` "" for none)."""
    sent: list[Event] = [ShareAck(consumer, T, 0, offset, kind, "invoke", count, process=consumer, time=at)]
    if result:
        sent.append(
            ShareAck(consumer, T, 0, offset, kind, result, count, "", definite, process=consumer, time=at + 0.01)
        )
    return sent


def handled(
    consumer: str, offset: int, value: str, kind: str, count: int, at: float, result: str = "ok"
) -> list[Event]:
    """Delivered at ``at``, acknowledged right away."""
    return [delivered(consumer, offset, value, count, at), *acked(consumer, offset, kind, count, at + 0.01, result)]


def violations(history: list[Event]) -> dict[str, int]:
    report = check(history, T, LIMIT, LOCK_MS)
    return {name: v.count for name, v in report.violations.items() if v.count}


def test_accepts_releases_rejects_and_an_archived_record_pass() -> None:
    history = [
        *produced("a", "b", "c"),
        *handled("g0", 0, "a", "accept", 1, 1.0),
        *handled("g0", 1, "b", "release", 1, 1.0),
        *handled("g1", 1, "b", "reject", 2, 1.5),
        *handled("g0", 2, "c", "release", 1, 1.0),  # poison: released until the limit archives it
        *handled("g1", 2, "c", "release", 2, 1.5),
        *handled("g0", 2, "c", "release", 3, 2.0),
    ]
    report = check(history, T, LIMIT, LOCK_MS)
    assert report.ok, report.summary_table()
    t = report.totals
    assert (t["records"], t["accepted"], t["rejected"], t["archived"], t["lost"]) == (3, 1, 1, 1, 0)
    assert (t["deliveries"], t["redeliveries"], t["max_delivery_count"]) == (6, 3, 3)
    assert (t["ack.accept.ok"], t["ack.release.ok"], t["ack.reject.ok"]) == (1, 4, 1)
    assert t["log.acked"] == 3 and "chaos check (share group): OK" in report.summary_table()
    assert unfinished(history, T, LIMIT, LOCK_MS) == []


def test_a_record_never_delivered_or_never_finished_is_lost() -> None:
    history = [
        *produced("a", "b", "c"),
        *handled("g0", 0, "a", "accept", 1, 1.0),
        *handled("g0", 1, "b", "release", 1, 1.0),  # released, and then never delivered again
    ]
    assert violations(history) == {"share_lost": 2}
    assert unfinished(history, T, LIMIT, LOCK_MS) == [(0, 1), (0, 2)]
    # A record whose accept was refused (the lock was gone) is not finished either.
    refused = [*produced("a"), delivered("g0", 0, "a", 1, 1.0), *acked("g0", 0, "accept", 1, 1.1, "fail", True)]
    assert violations(refused) == {"share_lost": 1}


def test_a_record_one_below_the_limit_may_be_archived_unseen_after_a_member_crash() -> None:
    """A crashed member may have held a record librdkafka fetched and never handed over: its lock expires and the
    record comes back one count higher, or is archived if that was its last delivery. Only a record last seen one
    below the limit, with a crash after that delivery, is excused; one seen lower, or with no crash after it, is
    lost."""
    crash = Fault("kill-consumer", "g0.1", process="nemesis", time=5.0)
    below = [*produced("a"), *handled("g0", 0, "a", "release", 1, 1.0), *handled("g1", 0, "a", "release", 2, 2.0)]
    report = check([*below, crash], T, LIMIT, LOCK_MS)
    assert report.ok, report.summary_table()
    assert (report.totals["unseen"], report.totals["lost"]) == (1, 0)
    assert unfinished([*below, crash], T, LIMIT, LOCK_MS) == []
    assert violations(below) == {"share_lost": 1}  # no crash after its last delivery
    early = Fault("kill-consumer", "g0.1", process="nemesis", time=1.5)
    assert violations([*below, early]) == {"share_lost": 1}  # the crash came before its last delivery
    lower = [*produced("a"), *handled("g0", 0, "a", "release", 1, 1.0), crash]
    assert violations(lower) == {"share_lost": 1}  # two unseen deliveries would be needed


def test_an_accept_of_unknown_outcome_is_indeterminate_not_lost() -> None:
    history = [
        *produced("a", "b"),
        delivered("g0", 0, "a", 1, 1.0),
        *acked("g0", 0, "accept", 1, 1.01, result=""),  # the consumer was killed before the answer
        delivered("g0", 1, "b", 1, 1.0),
        *acked("g0", 1, "reject", 1, 1.01, result="fail"),  # a lost connection: may have been applied
    ]
    report = check(history, T, LIMIT, LOCK_MS)
    assert report.ok, report.summary_table()
    assert report.totals["indeterminate"] == 2 and report.totals["ack.unanswered"] == 1


def test_two_applied_accepts_of_one_record_are_caught() -> None:
    history = [
        *produced("a"),
        *handled("g0", 0, "a", "accept", 1, 1.0),
        *handled("g1", 0, "a", "accept", 2, 2.0),  # delivered again after the accept, and accepted again
    ]
    assert violations(history) == {"accepted_twice": 1, "delivered_after_done": 1}


def test_an_accept_sent_past_the_lock_is_a_no_op_even_when_answered_ok() -> None:
    """Kafka answers an acknowledgement of a record below the share-partition start offset (finished by another
    member) with success: that is no second accept, and it finishes nothing by itself."""
    history = [
        *produced("a"),
        delivered("g0", 0, "a", 1, 1.0),  # g0 holds it past its lock...
        *handled("g1", 0, "a", "accept", 2, 4.1),  # ...g1 gets it again and accepts it...
        *acked("g0", 0, "accept", 1, 5.5),  # ...then g0's late accept is answered ok
    ]
    report = check(history, T, LIMIT, LOCK_MS)
    assert report.ok, report.summary_table()
    assert report.totals["ack.stale_ok"] == 1 and report.totals["accepted"] == 1
    # Alone, a late accept answered ok finishes nothing: the broker applied an accept of a lock it no longer had.
    alone = [*produced("a"), delivered("g0", 0, "a", 1, 1.0), *acked("g0", 0, "accept", 1, 4.5)]
    assert violations(alone) == {"share_lost": 1}


def test_a_delivery_past_the_limit_or_after_a_reject_is_caught() -> None:
    history = [
        *produced("a", "b"),
        *handled("g0", 0, "a", "release", 1, 1.0),
        *handled("g0", 0, "a", "release", 2, 1.1),
        *handled("g0", 0, "a", "release", 3, 1.2),
        *handled("g0", 0, "a", "accept", 4, 1.3),  # the limit is 3: it should have been archived
        *handled("g0", 1, "b", "reject", 1, 1.0),
        *handled("g1", 1, "b", "accept", 2, 1.1),
    ]
    assert violations(history) == {"over_delivery_limit": 1, "delivered_after_done": 1}


def test_a_delivered_value_other_than_the_produced_one_is_caught() -> None:
    history = [
        *produced("a", "b"),
        *handled("g0", 0, "a", "accept", 1, 1.0),
        *handled("g0", 1, "x", "accept", 1, 1.0),  # offset 1 holds b
        *handled("g0", 7, "ghost", "accept", 1, 1.0),  # an offset nobody wrote, a value nobody sent
    ]
    assert violations(history) == {"wrong_record": 2}


def test_warm_up_records_are_not_the_groups_and_the_log_is_checked_too() -> None:
    warm = [Send("warm-0-00000", T, 0, process="warm"), Ack("warm-0-00000", T, 0, 0, process="warm")]
    history = [
        *warm,
        FinalRead(
            "final", T, 0, 0, "warm-0-00000", process="final"
        ),  # written before the group started: never delivered
        Send("a", T, 0, process="p0"),
        Ack("a", T, 0, 1, process="p0"),  # absent from the final read: the log lost it
        *handled("g0", 1, "a", "accept", 1, 1.0),
    ]
    report = check(history, T, LIMIT, LOCK_MS)
    assert {name: v.count for name, v in report.violations.items() if v.count} == {"log.lost": 1}
    assert report.totals["records"] == 1
