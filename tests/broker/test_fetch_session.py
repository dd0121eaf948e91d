"""Fetch sessions (KIP-227), the sans-I/O cores: the leader's cache and session rounds (broker/fetch_session.py) and
the follower's side (ReplicaSession in broker/kafka/replica_fetch.py). Deterministic: explicit times, seeded ids."""

from __future__ import annotations

import random

from odradek.broker.fetch_response import PartitionFetch
from odradek.broker.fetch_session import (
    FETCH_SESSION_ID_NOT_FOUND,
    FETCH_SESSION_TOPIC_ID_ERROR,
    INVALID_FETCH_SESSION_EPOCH,
    MAX_EPOCH,
    FetchSession,
    FetchSessionCache,
    PartitionRead,
    Seen,
    SessionError,
    next_epoch,
)
from odradek.broker.kafka.replica_fetch import ReplicaSession

NO_ID = bytes(16)
QUIET = Seen(0, 10, 10, 0, False, False)  # caught up: high watermark 10, nothing to send


def read(partition: int, offset: int = 10) -> PartitionRead:
    return PartitionRead(partition, offset, 1 << 20, 3, 3, 0, -1)


def cache(slots: int = 10) -> FetchSessionCache:
    return FetchSessionCache(slots, eviction_ms=1000, ids=random.Random(7))


def session_of(c: FetchSessionCache, n: int, replica_id: int = 2, now_ms: int = 0) -> FetchSession:
    s = c.create(replica_id, False, [("t", NO_ID, read(i), QUIET) for i in range(n)], now_ms)
    assert s is not None
    return s


def keys(topics: list[tuple[str, list[PartitionRead]]]) -> set[tuple[str, int]]:
    return {(name, p.partition) for name, parts in topics for p in parts}


def test_a_full_request_creates_a_session_that_the_next_epoch_continues() -> None:
    c = cache()
    s = session_of(c, 3)
    assert s.id != 0 and s.epoch == 1 and len(c.sessions) == 1
    assert c.continue_session(s.id, 1, False, 2, 5) is s
    s.update([], [], 5)
    assert s.epoch == 2
    assert c.continue_session(s.id, 1, False, 2, 6) == SessionError(INVALID_FETCH_SESSION_EPOCH)
    assert c.continue_session(s.id + 1, 2, False, 2, 6) == SessionError(FETCH_SESSION_ID_NOT_FOUND)
    assert c.continue_session(s.id, 2, True, 2, 6) == SessionError(FETCH_SESSION_TOPIC_ID_ERROR)
    assert c.continue_session(s.id, 2, False, -1, 6) == SessionError(FETCH_SESSION_ID_NOT_FOUND)  # not its owner
    assert c.remove(s.id) is s and s.closed
    assert c.continue_session(s.id, 2, False, 2, 6) == SessionError(FETCH_SESSION_ID_NOT_FOUND)


def test_epochs_wrap_to_one() -> None:
    assert next_epoch(1) == 2
    assert next_epoch(MAX_EPOCH) == 1


def test_no_slots_creates_no_session_and_an_empty_answer_none() -> None:
    assert FetchSessionCache(0).create(2, False, [("t", NO_ID, read(0), QUIET)], 0) is None
    assert cache().create(2, False, [], 0) is None


def test_an_idle_round_reads_nothing_and_a_change_reads_only_that_partition() -> None:
    s = session_of(cache(), 500)
    s.update([], [], 1)
    assert s.next_pass() == []  # nothing listed, nothing dirty: no read at all
    s.answered({})
    s.update([], [], 2)
    woken = []
    s.wakeup = lambda: woken.append(True)
    s.changed(("t", 42))
    s.changed(("t", 43))
    assert woken == [True] and s.wakeup is None  # one wakeup, then the round reads
    assert keys(s.next_pass()) == {("t", 42), ("t", 43)}
    # 42 got a record; 43's change was nothing the fetcher sees (same high watermark): only 42 is news.
    assert s.has_news(("t", 42), Seen(0, 11, 11, 0, True, False))
    assert not s.has_news(("t", 43), QUIET)
    s.changed(("other", 0))  # not in the session: ignored
    assert s.dirty == set()


def test_what_an_answer_told_is_news_no_more_but_records_errors_and_divergence_are_read_again() -> None:
    s = session_of(cache(), 4)
    s.update([], [], 1)
    for p in range(4):
        s.changed(("t", p))
    s.next_pass()
    told = {
        ("t", 0): Seen(0, 12, 12, 0, False, False),  # a new high watermark
        ("t", 1): Seen(0, 10, 10, 0, True, False),  # records
        ("t", 2): Seen(6, -1, -1, -1, False, False),  # NOT_LEADER_OR_FOLLOWER
        ("t", 3): Seen(0, 10, 10, 0, False, True),  # a diverging epoch
    }
    assert all(s.has_news(k, v) for k, v in told.items())
    s.answered(told)
    assert s.dirty == {("t", 1), ("t", 2), ("t", 3)}
    assert not s.has_news(("t", 0), Seen(0, 12, 12, 0, False, False))
    assert s.has_news(("t", 0), Seen(0, 12, 12, 5, False, False))  # the log start moved
    assert s.has_news(("t", 0), Seen(0, 12, 11, 0, False, False))  # the last stable offset moved
    assert s.has_news(("t", 0), Seen(0, 12, 12, 0, False, False, all_replicas_offset=9))
    # After an error the cached high watermark is -1: the partition goes out again once the error is gone.
    assert s.has_news(("t", 2), QUIET)


def test_listed_partitions_take_their_new_position_new_ones_are_answered_and_forgotten_ones_leave() -> None:
    s = session_of(cache(), 3)
    s.update([("t", NO_ID, read(1, 15)), ("u", NO_ID, read(0, 0))], [("t", 2)], 1)
    assert set(s.partitions) == {("t", 0), ("t", 1), ("u", 0)}
    assert s.partitions[("t", 1)].read.fetch_offset == 15
    assert keys(s.next_pass()) == {("t", 1), ("u", 0)}
    assert s.has_news(("u", 0), Seen(0, 0, 0, 0, False, False))  # a new partition's first answer carries it
    assert not s.has_news(("t", 1), QUIET)
    s.changed(("t", 2))  # forgotten: no longer followed
    assert ("t", 2) not in s.dirty


def test_a_failed_round_gives_back_what_it_took() -> None:
    s = session_of(cache(), 5)
    s.update([("t", NO_ID, read(0, 11))], [], 1)
    s.changed(("t", 3))
    s.next_pass()
    s.changed(("t", 4))
    s.abandon_round()
    assert s.dirty == {("t", 0), ("t", 3), ("t", 4)}


def test_later_passes_read_again_what_had_news_and_what_became_dirty() -> None:
    s = session_of(cache(), 5)
    s.update([], [], 1)
    s.changed(("t", 0))
    s.changed(("t", 1))
    assert keys(s.next_pass()) == {("t", 0), ("t", 1)}
    assert s.has_news(("t", 0), Seen(0, 11, 11, 0, False, False))  # a high watermark alone: not enough bytes
    assert not s.has_news(("t", 1), QUIET)
    s.changed(("t", 2))
    assert keys(s.next_pass()) == {("t", 0), ("t", 2)}


def test_a_full_cache_evicts_an_idle_session_first() -> None:
    c = cache(slots=2)
    a = session_of(c, 5, replica_id=2, now_ms=0)
    b = session_of(c, 5, replica_id=3, now_ms=0)
    b.last_used_ms = 900
    assert c.create(-1, False, [("t", NO_ID, read(0), QUIET)], 1500) is not None  # a idle > 1000 ms
    assert a.closed and not b.closed and c.evictions == 1


def test_a_follower_takes_a_consumers_slot_but_a_consumer_takes_only_an_older_smaller_consumers() -> None:
    c = cache(slots=2)
    consumer = session_of(c, 50, replica_id=-1, now_ms=0)
    follower = session_of(c, 5, replica_id=2, now_ms=0)
    # A consumer's new session: the other sessions are recent (created < eviction_ms ago): no slot.
    assert c.create(-1, False, [("t", NO_ID, read(i), QUIET) for i in range(100)], 500) is None
    # A follower's: the consumer's session goes, however recent, even though it is larger.
    assert c.create(3, False, [("t", NO_ID, read(0), QUIET)], 500) is not None
    assert consumer.closed and not follower.closed
    c2 = cache(slots=1)
    small = session_of(c2, 2, replica_id=-1, now_ms=0)
    small.last_used_ms = 1400  # in use, but older than eviction_ms
    assert c2.create(-1, False, [("t", NO_ID, read(0), QUIET)], 1500) is None  # not larger than it
    assert c2.create(-1, False, [("t", NO_ID, read(i), QUIET) for i in range(3)], 1500) is not None
    assert small.closed


# ---- the follower's side ----


def fetch(partition: int, offset: int) -> PartitionFetch:
    return PartitionFetch(partition, 3, offset, 3, 0, 1 << 20, offset)


def test_the_follower_sends_everything_first_then_only_what_moved_and_what_it_forgets() -> None:
    s = ReplicaSession()
    first = s.build([("t", [fetch(0, 10), fetch(1, 10), fetch(2, 10)])])
    assert (first.session_id, first.epoch, len(first.topics[0][1]), first.forgotten) == (0, 0, 3, [])
    s.answered(0, 77)
    idle = s.build([("t", [fetch(0, 10), fetch(1, 10), fetch(2, 10)])])
    assert (idle.session_id, idle.epoch, idle.topics, idle.forgotten) == (77, 1, [], [])
    s.answered(0, 77)
    moved = s.build([("t", [fetch(0, 10), fetch(1, 12)])])  # 1 appended, 2 parked
    assert (moved.epoch, moved.topics, moved.forgotten) == (2, [("t", [fetch(1, 12)])], [("t", [2])])
    s.answered(0, 77)
    back = s.build([("t", [fetch(0, 10), fetch(1, 12), fetch(2, 10)])])
    assert (back.epoch, back.topics, back.forgotten) == (3, [("t", [fetch(2, 10)])], [])


def test_the_same_list_again_is_an_empty_round_until_a_full_request_is_due() -> None:
    """A fetcher hands the very list of its last request while no position moved: nothing to compare or send."""
    s = ReplicaSession()
    topics = [("t", [fetch(0, 10), fetch(1, 10)])]
    s.build(topics)
    s.answered(0, 77)
    for epoch in (1, 2):
        idle = s.build(topics)
        assert (idle.session_id, idle.epoch, idle.topics, idle.forgotten) == (77, epoch, [], [])
        s.answered(0, 77)
    moved = s.build([("t", [fetch(0, 10)])])  # a new list: compared with what the session holds
    assert (moved.epoch, moved.topics, moved.forgotten) == (3, [], [("t", [1])])
    s.answered(0, 77)
    again = s.build(topics)  # the old list, no longer the held one: compared, partition 1 is listed again
    assert (again.epoch, again.topics) == (4, [("t", [fetch(1, 10)])])
    s.failed()
    full = s.build(topics)  # after an error the same list is a full request
    assert (full.epoch, full.topics) == (0, topics)


def test_the_follower_starts_over_after_an_error_or_a_lost_answer() -> None:
    s = ReplicaSession()
    s.build([("t", [fetch(0, 10)])])
    s.answered(0, 77)
    s.build([("t", [fetch(0, 10)])])
    s.failed()  # a dropped connection: the answer may have moved the leader's epoch
    again = s.build([("t", [fetch(0, 10)])])
    assert (again.session_id, again.epoch, len(again.topics)) == (77, 0, 1)  # full, closing session 77
    s.answered(0, 78)
    s.build([("t", [fetch(0, 10)])])
    s.answered(FETCH_SESSION_ID_NOT_FOUND, 0)
    assert (s.session_id, s.epoch) == (0, 0)
    s.build([("t", [fetch(0, 10)])])
    s.answered(0, 0)  # the leader keeps no sessions: full requests from now on
    assert s.build([("t", [fetch(0, 10)])]).epoch == 0


def test_with_the_fetchers_changes_only_those_are_looked_at_and_sent() -> None:
    """The fetcher updates its list in place and says which entries moved: the session lists those (unless the
    leader already holds them as they are) and takes them as held once answered; an error makes the next request
    full again."""
    s = ReplicaSession()
    topics = [("t", [fetch(0, 10), fetch(1, 10), fetch(2, 10)])]
    assert s.build(topics, None).epoch == 0
    s.answered(0, 77)
    topics[0][1][1] = fetch(1, 12)
    moved = s.build(topics, {("t", 1): fetch(1, 12)})
    assert (moved.epoch, moved.topics, moved.forgotten) == (1, [("t", [fetch(1, 12)])], [])
    s.answered(0, 77)
    assert s.build(topics, {("t", 1): fetch(1, 12)}).topics == []  # held as it is: nothing to send
    s.answered(0, 77)
    topics[0][1][0] = fetch(0, 11)
    s.build(topics, {("t", 0): fetch(0, 11)})
    s.failed()  # the answer was lost: the leader may hold either position, so the next request is full
    full = s.build(topics, {})
    assert (full.epoch, full.topics) == (0, topics)
    s.answered(0, 78)
    assert s.build(topics, None).topics == []  # the very list held: nothing moved
