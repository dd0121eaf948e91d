"""The member's side of a rebalance: which listener callbacks run with which partitions, under each protocol."""

from __future__ import annotations

from odradek.client.consumer.protocol import Assignment
from odradek.client.consumer.rebalance import complete_join, lose_all, prepare_join, prepare_leave
from odradek.client.structs import TopicPartition as TP

A0, A1, B0 = TP("a", 0), TP("a", 1), TP("b", 0)


def test_eager_revokes_everything_before_joining_and_assigns_everything_after() -> None:
    step = prepare_join("eager", {A0, B0}, ["a", "b"])
    assert step.callbacks() == [("on_partitions_revoked", (A0, B0))] and step.owned == frozenset()
    # Even with nothing owned, eager calls on_partitions_revoked (as Kafka does) ...
    assert prepare_join("eager", set(), ["a"]).callbacks() == [("on_partitions_revoked", ())]
    step = complete_join("eager", set(), Assignment((A0, A1)), ["a", "b"])
    assert step.callbacks() == [("on_partitions_assigned", (A0, A1))]
    assert step.owned == {A0, A1} and not step.needs_rejoin
    # ... and on_partitions_assigned after every rebalance, even with nothing assigned.
    assert complete_join("eager", set(), Assignment(), ["a"]).callbacks() == [("on_partitions_assigned", ())]


def test_cooperative_keeps_what_stays_and_revokes_only_what_moves() -> None:
    step = prepare_join("cooperative", {A0, B0}, ["a", "b"])
    assert step.callbacks() == [] and step.owned == {A0, B0}
    step = complete_join("cooperative", {A0, B0}, Assignment((A0, A1)), ["a", "b"])
    assert step.callbacks() == [("on_partitions_revoked", (B0,)), ("on_partitions_assigned", (A1,))]
    assert step.owned == {A0, A1} and step.needs_rejoin  # B0 reaches its new owner in the next rebalance
    step = complete_join("cooperative", {A0}, Assignment((A0, A1)), ["a"])
    assert step.revoked == () and step.assigned == (A1,) and not step.needs_rejoin
    assert complete_join("cooperative", {A0}, Assignment((A0,)), ["a"]).callbacks() == [("on_partitions_assigned", ())]


def test_cooperative_join_revokes_topics_no_longer_subscribed() -> None:
    step = prepare_join("cooperative", {A0, B0}, ["a"])
    assert step.callbacks() == [("on_partitions_revoked", (B0,))] and step.owned == {A0}


def test_a_reset_generation_loses_instead_of_revoking() -> None:
    for protocol in ("eager", "cooperative"):
        step = prepare_join(protocol, {A0, B0}, ["a", "b"], generation_valid=False)
        assert step.callbacks() == [("on_partitions_lost", (A0, B0))] and step.owned == frozenset()
        assert prepare_join(protocol, set(), ["a"], generation_valid=False).callbacks() == []
    step = lose_all({B0})
    assert step.callbacks() == [("on_partitions_lost", (B0,))] and step.needs_rejoin and step.owned == frozenset()


def test_an_assignment_outside_the_subscription_is_not_applied() -> None:
    step = complete_join("cooperative", {A0}, Assignment((A0, B0)), ["a"])
    assert step.callbacks() == [] and step.owned == {A0} and step.needs_rejoin


def test_leaving() -> None:
    assert prepare_leave({A0}).callbacks() == [("on_partitions_revoked", (A0,))]
    assert prepare_leave({A0}, generation_valid=False).callbacks() == [("on_partitions_lost", (A0,))]
    assert prepare_leave({A0}, rebalance_in_progress=True).callbacks() == [("on_partitions_lost", (A0,))]
    assert prepare_leave(set()).callbacks() == []
