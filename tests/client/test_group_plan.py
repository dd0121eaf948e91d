"""The pure rules of ``group describe`` lag rows and ``group reset-offsets`` plans (Kafka's kafka-consumer-groups)."""

from __future__ import annotations

import pytest

from odradek.client.cli.common import CommandError
from odradek.client.cli.group_plan import PartitionOffsets, lag, offset_rows, parse_topic_spec, reset_plan
from odradek.client.structs import TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def test_topic_specs() -> None:
    assert parse_topic_spec("t") == ("t", None)
    assert parse_topic_spec("t:2,0,2") == ("t", [0, 2])
    for bad in ("", ":1", "t:", "t:x", "t:-1"):
        with pytest.raises(CommandError):
            parse_topic_spec(bad)


def test_reset_targets_clamp_into_the_log_as_kafka() -> None:
    parts = {T0: PartitionOffsets(5, 20, 10, at_time=12), T1: PartitionOffsets(0, 8, None, at_time=None)}
    new = lambda kind, value=None: [r["new_offset"] for r in reset_plan(kind, value, parts)]  # noqa: E731
    assert new("to-earliest") == [5, 0]
    assert new("to-latest") == [20, 8]
    assert new("to-offset", 3) == [5, 3]
    assert new("to-offset", 99) == [20, 8]
    assert new("to-datetime", 0) == [12, 8]  # no record that recent: the log end
    assert reset_plan("shift-by", -100, {T0: parts[T0]})[0] == {
        "topic": "t",
        "partition": 0,
        "current_offset": 10,
        "new_offset": 5,
    }
    assert reset_plan("shift-by", 100, {T0: parts[T0]})[0]["new_offset"] == 20
    with pytest.raises(CommandError, match="no committed offset"):
        reset_plan("shift-by", 1, parts)


def test_lag_rows_are_null_without_a_commit_and_never_negative() -> None:
    assert lag(None, 10) is None and lag(12, 10) == 0 and lag(4, 10) == 6 and lag(4, -1) is None
    rows = offset_rows([T1, T0, T0], {T0: 7}, {T0: 10, T1: 3}, {T1: "m1"})
    assert rows == [
        {"topic": "t", "partition": 0, "committed_offset": 7, "log_end_offset": 10, "lag": 3, "member_id": None},
        {"topic": "t", "partition": 1, "committed_offset": None, "log_end_offset": 3, "lag": None, "member_id": "m1"},
    ]
