"""The classic group protocol's rules, one test each, on a simulated clock."""

from __future__ import annotations

import pytest
from group_harness import CONFIG, RANGE, REBALANCE, SESSION, Harness

from odradek.broker.groups.group import ClassicGroup, GroupConfig, GroupState
from odradek.broker.groups.messages import GroupSnapshot, LeavingMember
from odradek.client.consumer.protocol import Subscription
from odradek.client.errors import ErrorCode
from odradek.client.structs import TopicPartition

ROUNDROBIN = (("roundrobin", b"rr"),)


def test_a_new_member_gets_member_id_required_with_a_generated_id() -> None:
    h = Harness()
    answer = h.join_answer(h.join(client="app"))
    assert answer.error == ErrorCode.MEMBER_ID_REQUIRED
    assert answer.member_id == "app-1"
    assert h.group.members == {} and h.group.state is GroupState.EMPTY


def test_the_initial_rebalance_waits_the_delay_then_forms_one_generation() -> None:
    h = Harness()
    a, ta = h.new_member()
    h.advance(1000)
    b, tb = h.new_member()
    h.advance(1999)  # 2999 ms after the first join: still waiting
    assert ta not in h.answers and h.group.state is GroupState.PREPARING_REBALANCE
    h.advance(1)  # the first delay ended but b joined meanwhile: one more delay
    assert ta not in h.answers
    h.advance(3000)
    ja, jb = h.join_answer(ta), h.join_answer(tb)
    assert ja.generation_id == jb.generation_id == 1
    assert ja.leader == jb.leader == a and {m.member_id for m in ja.members} == {a, b} and jb.members == ()
    assert h.group.state is GroupState.COMPLETING_REBALANCE


def test_the_initial_delay_never_extends_beyond_the_rebalance_timeout() -> None:
    h = Harness()
    first = h.new_member(rebalance=7000)[1]
    for _ in range(10):  # a joiner every second keeps extending the delay ...
        h.advance(1000)
        h.new_member(rebalance=7000)
    # ... but only up to delay + (rebalance timeout - delay): about the rebalance timeout plus one delay at most
    assert h.join_answer(first).generation_id == 1
    assert h.now <= 7000 + CONFIG.initial_rebalance_delay_ms


def test_a_rebalance_completes_when_every_member_rejoined() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    t1 = h.join(leader)  # the leader rejoins: rebalance
    assert h.group.state is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(follower, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    t2 = h.join(follower)  # the last one in completes the join at once
    assert h.join_answer(t1).generation_id == h.join_answer(t2).generation_id == 2


def test_members_that_do_not_rejoin_within_the_rebalance_timeout_are_removed() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    t1 = h.join(leader)
    h.advance(SESSION - 1)
    h.heartbeat(follower, 1)  # keeps its session alive, but never rejoins
    h.advance(REBALANCE - SESSION + 1)
    assert h.join_answer(t1).generation_id == 2
    assert list(h.group.members) == [leader]


def test_generation_ids_increase_with_each_completed_join() -> None:
    h = Harness()
    (leader,) = h.stable_group(1)
    for generation in (2, 3, 4):
        t = h.join(leader)
        assert h.join_answer(t).generation_id == generation
        h.sync(leader, generation, ((leader, b"x"),))
        h.persisted()


def test_the_protocol_is_one_every_member_supports_chosen_by_votes() -> None:
    h = Harness()
    both_rr_first = (("roundrobin", b"1"), ("range", b"2"))
    both_range_first = (("range", b"3"), ("roundrobin", b"4"))
    t1 = h.new_member(protocols=both_rr_first)[1]
    h.new_member(protocols=both_range_first)
    h.new_member(protocols=both_range_first)
    h.until_answered(t1)
    answer = h.join_answer(t1)
    assert answer.protocol_name == "range"  # two votes against one
    assert {m.metadata for m in answer.members} == {b"2", b"3"}  # the leader sees each member's range metadata


def test_a_protocol_type_mismatch_or_no_common_protocol_is_inconsistent() -> None:
    h = Harness()
    h.stable_group(1)
    other_type = h.join_answer(h.join(protocol_type="connect"))
    no_common = h.join_answer(h.join(protocols=ROUNDROBIN))
    assert other_type.error == no_common.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert len(h.group.members) == 1 and h.group.state is GroupState.STABLE


def test_the_leader_supplies_assignments_and_followers_wait_for_them() -> None:
    h = Harness()
    _, ta = h.new_member()
    _, tb = h.new_member()
    h.until_answered(ta)
    leader, follower = h.join_answer(ta).member_id, h.join_answer(tb).member_id
    s_follower = h.sync(follower, 1)
    assert s_follower not in h.answers  # waits for the leader
    s_leader = h.sync(leader, 1, ((leader, b"L"), (follower, b"F")))
    assert s_follower not in h.answers and s_leader not in h.answers  # and for the append
    (persist,) = h.persists
    assert {m.member_id: m.assignment for m in persist.group.members} == {leader: b"L", follower: b"F"}
    h.persisted()
    assert h.sync_answer(s_leader).assignment == b"L" and h.sync_answer(s_follower).assignment == b"F"
    assert h.group.state is GroupState.STABLE


def test_a_failed_append_of_the_assignment_answers_an_error_and_rebalances() -> None:
    h = Harness()
    _, ta = h.new_member()
    h.until_answered(ta)
    leader = h.join_answer(ta).member_id
    s = h.sync(leader, 1, ((leader, b"L"),))
    h.persisted(ok=False, error=ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert h.sync_answer(s).error == ErrorCode.NOT_COORDINATOR
    assert h.group.state is GroupState.PREPARING_REBALANCE
    t = h.join(leader)
    assert h.join_answer(t).generation_id == 2


def test_members_that_do_not_sync_within_the_rebalance_timeout_are_removed() -> None:
    h = Harness()
    _, ta = h.new_member()
    _, tb = h.new_member()
    h.until_answered(ta)
    leader, follower = h.join_answer(ta).member_id, h.join_answer(tb).member_id
    h.sync(leader, 1, ((leader, b"L"), (follower, b"F")))
    h.persisted()
    for _ in range(REBALANCE // 5000):  # both heartbeat, but the follower never sends SyncGroup
        h.advance(5000)
        h.heartbeat(follower, 1)
        h.heartbeat(leader, 1)
    assert follower not in h.group.members
    assert h.group.state in (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE)


def test_heartbeat_errors_and_success() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    assert h.heartbeat("nobody", 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.heartbeat(follower, 0) == ErrorCode.ILLEGAL_GENERATION
    assert h.heartbeat(follower, 1) == ErrorCode.NONE
    h.join(leader)
    assert h.heartbeat(follower, 1) == ErrorCode.REBALANCE_IN_PROGRESS


def test_a_heartbeat_refreshes_the_session() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    for _ in range(5):
        h.advance(SESSION - 1)
        assert h.heartbeat(leader, 1) == h.heartbeat(follower, 1) == ErrorCode.NONE
    assert h.group.state is GroupState.STABLE and len(h.group.members) == 2


def test_session_expiry_removes_the_member_and_rebalances() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    h.advance(SESSION - 1)
    h.heartbeat(leader, 1)
    h.advance(1)
    assert follower not in h.group.members
    assert h.group.state is GroupState.PREPARING_REBALANCE
    assert any("session expired" in e for e in h.events)


def test_leave_group_takes_a_batch_with_per_member_errors() -> None:
    h = Harness()
    leader, a, b = h.stable_group(3)
    response = h.leave(LeavingMember(a), LeavingMember("ghost"), LeavingMember(b))
    assert [(m.member_id, m.error) for m in response.members] == [
        (a, ErrorCode.NONE),
        ("ghost", ErrorCode.UNKNOWN_MEMBER_ID),
        (b, ErrorCode.NONE),
    ]
    assert list(h.group.members) == [leader]
    assert h.group.state is GroupState.PREPARING_REBALANCE


def test_the_last_member_leaving_empties_the_group_at_a_new_generation() -> None:
    h = Harness()
    (leader,) = h.stable_group(1)
    h.leave(LeavingMember(leader))
    assert h.group.state is GroupState.EMPTY and h.group.generation_id == 2
    assert h.persists[-1].group.members == ()


def test_group_max_size_turns_away_new_members() -> None:
    h = Harness(group=ClassicGroup("g", GroupConfig(max_size=2)))
    h.stable_group(2)
    answer = h.join_answer(h.join(client="third"))
    assert answer.error == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert len(h.group.members) == 2 and h.group.state is GroupState.STABLE


@pytest.mark.parametrize("session", [CONFIG.min_session_timeout_ms - 1, CONFIG.max_session_timeout_ms + 1])
def test_a_session_timeout_out_of_bounds_is_refused_with_no_state_change(session: int) -> None:
    h = Harness()
    leader, _ = h.stable_group(2)
    before = (h.group.state, dict(h.group.pending_members), list(h.group.members))
    assert h.join_answer(h.join(session=session)).error == ErrorCode.INVALID_SESSION_TIMEOUT
    assert h.join_answer(h.join(leader, session=session)).error == ErrorCode.INVALID_SESSION_TIMEOUT
    assert (h.group.state, dict(h.group.pending_members), list(h.group.members)) == before


def test_a_pending_member_that_never_joins_is_forgotten() -> None:
    h = Harness()
    h.join(client="gone")
    assert h.group.pending_members
    h.advance(SESSION)
    assert not h.group.pending_members and h.group.next_deadline_ms() is None


# -- static membership -------------------------------------------------------------------------------------------


def test_a_static_member_joins_without_the_member_id_handshake() -> None:
    h = Harness()
    t = h.join(instance="i1")
    h.until_answered(t)
    answer = h.join_answer(t)
    assert answer.error == ErrorCode.NONE and answer.member_id.startswith("i1-")
    assert h.group.static_members == {"i1": answer.member_id}


def test_a_static_member_rejoining_a_stable_group_keeps_its_assignment_without_a_rebalance() -> None:
    h = Harness()
    leader, follower = h.stable_group(2, instances=("i0", "i1"))
    old_assignment = h.group.members[follower].assignment
    t = h.join(instance="i1", client="c1")  # the restarted process
    assert t not in h.answers  # answered once the new member id is stored
    (persist,) = h.persists
    new_id = next(m.member_id for m in persist.group.members if m.group_instance_id == "i1")
    h.persisted()
    answer = h.join_answer(t)
    assert answer.error == ErrorCode.NONE and answer.member_id == new_id != follower
    assert answer.generation_id == 1 and answer.leader == leader and not answer.skip_assignment
    assert h.group.state is GroupState.STABLE and h.group.generation_id == 1
    assert h.sync_answer(h.sync(new_id, 1, instance="i1")).assignment == old_assignment
    assert h.heartbeat(leader, 1, instance="i0") == ErrorCode.NONE  # the others see nothing


def test_a_static_leader_rejoining_is_told_to_skip_the_assignment() -> None:
    h = Harness()
    h.stable_group(2, instances=("i0", "i1"))
    t = h.join(instance="i0", client="c0")
    h.persisted()
    answer = h.join_answer(t)
    assert answer.leader == answer.member_id and answer.skip_assignment and len(answer.members) == 2
    assert h.group.generation_id == 1


def test_a_static_member_rejoining_with_a_new_subscription_rebalances() -> None:
    h = Harness()
    h.stable_group(2, instances=("i0", "i1"))
    h.join(instance="i1", client="c1", protocols=(("range", b"topics=t,u"),))
    assert h.persists == [] and h.group.state is GroupState.PREPARING_REBALANCE


def _subscription(*topics: str, generation: int = -1, owned: tuple[TopicPartition, ...] = (), rack: str = "") -> bytes:
    return Subscription(topics, None, owned, generation, rack or None).encode()


@pytest.mark.parametrize(
    "restarted",
    [
        _subscription("t", "u", generation=-1),  # a new process has seen no generation yet
        _subscription("u", "t", generation=7, owned=(TopicPartition("t", 0),)),  # cooperative: what it still owns
    ],
)
def test_a_restarted_static_consumer_with_the_same_topics_keeps_its_assignment(restarted: bytes) -> None:
    """Only the topics and the rack of a consumer's subscription decide its assignment; the generation it last saw
    and its owned partitions differ with every restart and must not cost the group a rebalance (a clean-clone run
    under load had every restart rebalance, because the stored subscription carried an older generation)."""
    h = Harness()
    h.stable_group(2, instances=("i0", "i1"), protocols=(("range", _subscription("t", "u", generation=1)),))
    h.join(instance="i1", client="c1", protocols=(("range", restarted),))
    assert len(h.persists) == 1 and h.group.state is GroupState.STABLE and h.group.generation_id == 1


@pytest.mark.parametrize("restarted", [_subscription("t"), _subscription("t", "u", rack="r2")])
def test_a_restarted_static_consumer_with_other_topics_or_rack_rebalances(restarted: bytes) -> None:
    h = Harness()
    h.stable_group(2, instances=("i0", "i1"), protocols=(("range", _subscription("t", "u", generation=1)),))
    h.join(instance="i1", client="c1", protocols=(("range", restarted),))
    assert h.persists == [] and h.group.state is GroupState.PREPARING_REBALANCE


def test_a_restarted_static_member_of_another_protocol_type_keeps_its_assignment() -> None:
    """As in Kafka, only the selected protocol decides for protocol types odradek does not parse (Connect workers
    and the like embed per-process data in their metadata)."""
    h = Harness()
    h.stable_group(2, instances=("i0", "i1"), protocol_type="connect")
    h.join(instance="i1", client="c1", protocols=(("range", b"something else"),), protocol_type="connect")
    assert len(h.persists) == 1 and h.group.state is GroupState.STABLE


def test_a_failed_append_of_a_static_member_id_restores_the_old_one() -> None:
    h = Harness()
    _, follower = h.stable_group(2, instances=("i0", "i1"))
    t = h.join(instance="i1", client="c1")
    h.persisted(ok=False, error=ErrorCode.REQUEST_TIMED_OUT)
    assert h.join_answer(t).error == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert h.group.static_members["i1"] == follower
    assert h.heartbeat(follower, 1, instance="i1") == ErrorCode.NONE


def test_the_old_process_of_a_static_member_is_fenced() -> None:
    h = Harness()
    _, follower = h.stable_group(2, instances=("i0", "i1"))
    h.join(instance="i1", client="c1")
    h.persisted()
    assert h.heartbeat(follower, 1, instance="i1") == ErrorCode.FENCED_INSTANCE_ID
    assert h.sync_answer(h.sync(follower, 1, instance="i1")).error == ErrorCode.FENCED_INSTANCE_ID
    assert h.join_answer(h.join(follower, instance="i1")).error == ErrorCode.FENCED_INSTANCE_ID


def test_an_admin_leave_by_instance_id_removes_the_static_member_and_rebalances() -> None:
    h = Harness()
    _leader, follower = h.stable_group(2, instances=("i0", "i1"))
    response = h.leave(LeavingMember("", "i1"))
    assert response.members[0].error == ErrorCode.NONE
    assert follower not in h.group.members and "i1" not in h.group.static_members
    assert h.group.state is GroupState.PREPARING_REBALANCE


def test_session_expiry_of_a_static_member_removes_it_and_rebalances() -> None:
    h = Harness()
    leader, _follower = h.stable_group(2, instances=("i0", "i1"))
    h.advance(SESSION - 1)
    h.heartbeat(leader, 1, instance="i0")
    h.advance(1)
    assert "i1" not in h.group.static_members and h.group.state is GroupState.PREPARING_REBALANCE


def test_a_static_member_that_did_not_rejoin_stays_through_the_rebalance() -> None:
    h = Harness()
    leader, follower = h.stable_group(2, instances=(None, "i1"))
    t = h.join(leader)
    for _ in range(REBALANCE // 5000):
        h.advance(5000)
        h.heartbeat(follower, 1, instance="i1")
    assert h.join_answer(t).generation_id == 2 and follower in h.group.members


# -- offsets, views, loading -------------------------------------------------------------------------------------


def test_offset_commit_validation_follows_membership() -> None:
    h = Harness()
    assert h.group.validate_offset_commit("", None, -1) == ErrorCode.NONE  # a simple commit to an Empty group
    _, ta = h.new_member()
    _, tb = h.new_member()
    h.until_answered(ta)
    leader, follower = h.join_answer(ta).member_id, h.join_answer(tb).member_id
    assert h.group.validate_offset_commit("", None, -1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.group.validate_offset_commit(leader, None, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    h.sync(leader, 1, ((leader, b"L"), (follower, b"F")))
    h.persisted()
    assert h.group.validate_offset_commit(leader, None, 1) == ErrorCode.NONE
    assert h.group.validate_offset_commit(leader, None, 0) == ErrorCode.ILLEGAL_GENERATION
    assert h.group.validate_offset_commit("ghost", None, 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.group.validate_offset_fetch() == ErrorCode.NONE


def test_offset_commit_of_a_fenced_static_member_is_refused() -> None:
    h = Harness()
    _, follower = h.stable_group(2, instances=("i0", "i1"))
    h.join(instance="i1", client="c1")
    h.persisted()
    assert h.group.validate_offset_commit(follower, "i1", 1) == ErrorCode.FENCED_INSTANCE_ID


def test_describe_and_list_show_members_and_assignments_when_stable() -> None:
    h = Harness()
    leader, follower = h.stable_group(2, instances=(None, "i1"))
    view = h.group.describe()
    assert (view.state, view.protocol_type, view.protocol_name, view.generation_id, view.leader) == (
        "Stable",
        "consumer",
        "range",
        1,
        leader,
    )
    assert {(m.member_id, m.group_instance_id, m.assignment) for m in view.members} == {
        (leader, None, f"g1:{leader}".encode()),
        (follower, "i1", f"g1:{follower}".encode()),
    }
    assert h.group.listing().state == "Stable"


def test_a_restored_group_is_stable_with_sessions_starting_at_load() -> None:
    h = Harness()
    leader, follower = h.stable_group(2, instances=(None, "i1"))
    stored = h.group.snapshot()
    loaded = ClassicGroup.restore(stored, now_ms=100_000, config=CONFIG)
    assert loaded.state is GroupState.STABLE and loaded.generation_id == 1 and loaded.leader_id == leader
    assert loaded.next_deadline_ms() == 100_000 + SESSION
    assert loaded.static_members == {"i1": follower}
    assert loaded.members[follower].assignment == f"g1:{follower}".encode()
    empty = ClassicGroup.restore(GroupSnapshot("e", "consumer", 3, None, None, 5, ()), now_ms=0)
    assert empty.state is GroupState.EMPTY and empty.generation_id == 3


def test_a_restored_static_member_rejoining_keeps_its_assignment() -> None:
    h = Harness()
    _, _follower = h.stable_group(2, instances=("i0", "i1"))
    loaded = Harness(group=ClassicGroup.restore(h.group.snapshot(), now_ms=0, config=CONFIG))
    t = loaded.join(instance="i1", client="c1", protocols=RANGE)
    loaded.persisted()
    assert loaded.join_answer(t).error == ErrorCode.NONE and loaded.group.generation_id == 1


def test_unload_answers_parked_calls_with_not_coordinator() -> None:
    h = Harness()
    _, t = h.new_member()
    h.take(h.group.unload(h.now))
    assert h.join_answer(t).error == ErrorCode.NOT_COORDINATOR
    assert h.group.state is GroupState.DEAD
    assert h.join_answer(h.join()).error == ErrorCode.COORDINATOR_NOT_AVAILABLE


def test_only_an_empty_group_can_be_deleted() -> None:
    h = Harness()
    (leader,) = h.stable_group(1)
    assert h.group.delete(h.now)[0] == ErrorCode.NON_EMPTY_GROUP
    h.leave(LeavingMember(leader))
    assert h.group.delete(h.now)[0] == ErrorCode.NONE and h.group.state is GroupState.DEAD
    assert h.group.validate_offset_fetch() == ErrorCode.GROUP_ID_NOT_FOUND


def test_a_bad_config_is_refused() -> None:
    with pytest.raises(ValueError):
        GroupConfig(min_session_timeout_ms=10, max_session_timeout_ms=5)
    with pytest.raises(ValueError):
        GroupConfig(max_size=0)
