"""The console's other server-side decisions without a cluster: what a republish reads and where each record goes
(broker/rest/republish.py), the offsets a group reset commits (offsets.py), the charts' figures picked out of a
metrics registry (throughput.py), and the bodies of the console's routes, refused with 400 when malformed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge

from odradek.broker.rest import bodies, offsets, republish, throughput
from odradek.broker.rest.errors import RestError
from odradek.broker.rest.requests import RepublishRecords, ResetGroupOffsets
from odradek.client.producer.partitioner import partition_for_key
from odradek.client.record.batch import Record, read_batches
from odradek.client.structs import TopicPartition


def refused(call: Any, *args: Any) -> RestError:
    with pytest.raises(RestError) as e:
        call(*args)
    return e.value


# ---- republish ----


def test_selected_records_are_read_as_one_range_per_partition() -> None:
    r = RepublishRecords("src", "dst", records=((1, 9), (0, 4), (1, 5), (0, 4)))
    ranges = republish.plan(r)
    assert ranges == [
        republish.SourceRange(0, 4, 5, frozenset({4})),
        republish.SourceRange(1, 5, 10, frozenset({5, 9})),
    ]
    assert [o for o in range(0, 12) if ranges[1].keeps(o)] == [5, 9]
    found = {0: [Record(4, 1, b"k", b"v")], 1: [Record(5, 1, None, b"v")]}
    assert republish.missing(ranges, found) == [(1, 9)]
    whole = republish.plan(RepublishRecords("src", "dst", partition=2, start_offset=10, end_offset=20))
    assert whole == [republish.SourceRange(2, 10, 20)] and whole[0].keeps(19) and not whole[0].keeps(20)
    assert republish.missing(whole, {2: []}) == []  # a range's gaps (compaction, markers) are not missing


def test_each_record_goes_where_a_producer_would_send_it_or_to_its_own_partition() -> None:
    keyed, unkeyed = Record(0, 1, b"order-17", b"v"), Record(1, 1, None, b"v")
    routed = republish.route([(3, keyed), (3, unkeyed), (0, keyed)], 4, False, lambda n: n - 1)
    assert routed == {partition_for_key(b"order-17", 4): [keyed, keyed], 3: [unkeyed]}
    assert republish.route([(3, keyed), (0, unkeyed)], 4, True, lambda n: 0) == {3: [keyed], 0: [unkeyed]}
    assert refused(republish.destination, 5, b"k", 4, True, lambda n: 0).status == 400


def test_batches_keep_keys_values_headers_and_order_within_a_size() -> None:
    records = [Record(i, 1000 + i, f"k{i}".encode(), b"x" * 200_000, (("h", b"1"), ("n", None))) for i in range(6)]
    built = republish.batches(records, now_ms=99, keep_timestamps=False)
    assert len(built) == 3  # two 200 kB records fit in 512 KiB, three do not
    copied = [r for data in built for batch in read_batches(data) for r in batch.records()]
    assert [(r.key, r.value, r.headers) for r in copied] == [(r.key, r.value, r.headers) for r in records]
    assert {r.timestamp for r in copied} == {99}
    kept = republish.batches(records[:2], now_ms=99, keep_timestamps=True)
    assert [r.timestamp for data in kept for b in read_batches(data) for r in b.records()] == [1000, 1001]
    huge = republish.batches([Record(0, 1, None, b"x" * 600_000)], 5, False)
    assert len(huge) == 1  # a record over the batch size goes alone


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"destination": "d"},
        {"destination": "d", "records": [{"partition_id": 0, "offset": 1}], "partition_id": 0},
        {"destination": "d", "partition_id": 0, "start_offset": 5, "end_offset": 5},
        {"destination": "d", "partition_id": 0, "start_offset": 0, "end_offset": 10_001},
        {"destination": "d", "records": [{"partition_id": 0, "offset": 1}], "start_offset": 0},
        {"destination": "d", "records": [{"partition_id": 0, "offset": -1}]},
        {"destination": "d", "records": [{"partition_id": 0, "offset": i} for i in range(10_001)]},
        {"destination": "d", "records": [{"partition_id": 0, "offset": 1}], "keep": True},
    ],
)
def test_a_bad_republish_is_refused(body: dict[str, Any]) -> None:
    assert refused(bodies.republish_records, "src", json.dumps(body).encode()).status == 400


def test_a_republish_body() -> None:
    found = bodies.republish_records(
        "src", b'{"destination": "d", "partition_id": 1, "start_offset": 3, "end_offset": 9, "keep_timestamps": true}'
    )
    assert found == RepublishRecords("src", "d", (), 1, 3, 9, False, True)


# ---- offset resets ----

TP0, TP1, OTHER = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def test_a_reset_covers_the_topics_named_or_every_one_committed() -> None:
    partitions_of = {"t": 2, "u": 1}
    everything = ResetGroupOffsets("g", "earliest")
    assert offsets.covered(everything, [TP0, OTHER], partitions_of) == [TP0, TP1, OTHER]
    assert offsets.covered(ResetGroupOffsets("g", "latest", topics=("t",)), [], partitions_of) == [TP0, TP1]
    one = ResetGroupOffsets("g", "latest", topics=("t",), partitions=(1,))
    assert offsets.covered(one, [], partitions_of) == [TP1]
    assert refused(offsets.covered, everything, [], partitions_of).status == 400  # nothing committed, none named
    assert refused(offsets.covered, ResetGroupOffsets("g", "latest", topics=("x",)), [], partitions_of).status == 404
    bad = ResetGroupOffsets("g", "latest", topics=("t",), partitions=(2,))
    assert refused(offsets.covered, bad, [], partitions_of).status == 404
    two = ResetGroupOffsets("g", "latest", topics=("t", "u"), partitions=(0,))
    assert refused(offsets.covered, two, [], partitions_of).status == 400


def test_each_target_is_kafkas() -> None:
    starts, ends = {TP0: 5, TP1: 0}, {TP0: 50, TP1: 0}

    def targets(r: ResetGroupOffsets, at_time: dict[TopicPartition, int] | None = None) -> dict[TopicPartition, int]:
        return offsets.targets(r, [TP0, TP1], starts, ends, at_time or {})

    assert targets(ResetGroupOffsets("g", "earliest")) == {TP0: 5, TP1: 0}
    assert targets(ResetGroupOffsets("g", "latest")) == {TP0: 50, TP1: 0}
    assert targets(ResetGroupOffsets("g", "offset", offset=2)) == {TP0: 5, TP1: 0}  # below the log: its start
    assert targets(ResetGroupOffsets("g", "offset", offset=70)) == {TP0: 50, TP1: 0}  # past it: its end
    assert targets(ResetGroupOffsets("g", "offset", offset=20)) == {TP0: 20, TP1: 0}
    at = ResetGroupOffsets("g", "timestamp", timestamp_ms=123)
    assert offsets.lookup_timestamp(at) == 123 and offsets.lookup_timestamp(ResetGroupOffsets("g", "latest")) is None
    assert targets(at, {TP0: 17, TP1: -1}) == {TP0: 17, TP1: 0}  # after the last record: the end


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"to": "start"},
        {"to": "offset"},
        {"to": "offset", "offset": -1},
        {"to": "latest", "offset": 3},
        {"to": "timestamp"},
        {"to": "earliest", "timestamp": 5},
        {"to": "earliest", "topics": [""]},
        {"to": "earliest", "dry": True},
    ],
)
def test_a_bad_reset_is_refused(body: dict[str, Any]) -> None:
    assert refused(bodies.reset_offsets, "g", json.dumps(body).encode()).status == 400


def test_a_reset_body() -> None:
    found = bodies.reset_offsets("g", b'{"to": "Timestamp", "timestamp": 1000, "topics": ["t"], "dry_run": true}')
    assert found == ResetGroupOffsets("g", "timestamp", 0, 1000, ("t",), (), True)


# ---- users, quotas, partitions ----


def test_scram_quota_and_partition_bodies() -> None:
    user = bodies.scram_user(b'{"user": "bob", "password": "pw", "mechanism": "scram-sha-512", "iterations": 8192}')
    assert (user.user, user.mechanism, user.iterations) == ("bob", "SCRAM-SHA-512", 8192)
    assert "pw" not in repr(user)
    for bad in (
        b'{"user": "bob"}',
        b'{"user": "", "password": "p"}',
        b'{"user": "b", "password": "p", "iterations": 1}',
    ):
        assert refused(bodies.scram_user, bad).status == 400
    assert refused(bodies.scram_user, b'{"user": "b", "password": "p", "mechanism": "MD5"}').status == 400
    quota = bodies.client_quota(
        b'{"entity": [{"entity_type": "user", "name": null}], "set": {"producer_byte_rate": 1024}, "remove": ["x"]}'
    )
    assert (quota.entity, quota.set, quota.remove) == ((("user", None),), (("producer_byte_rate", 1024.0),), ("x",))
    for bad in (
        b'{"entity": []}',
        b'{"entity": [{"entity_type": "ip", "name": "a"}], "remove": ["x"]}',
        b'{"entity": [{"entity_type": "user", "name": "a"}]}',
        b'{"entity": [{"entity_type": "user"}, {"entity_type": "user"}], "remove": ["x"]}',
        b'{"entity": [{"entity_type": "user", "name": "a"}], "set": {"producer_byte_rate": -1}}',
        b'{"entity": [{"entity_type": "user", "name": "a"}], "set": {"producer_byte_rate": true}}',
    ):
        assert refused(bodies.client_quota, bad).status == 400
    assert bodies.add_partitions("t", b'{"partitions_count": 6}').count == 6
    assert refused(bodies.add_partitions, "t", b'{"partitions_count": 0}').status == 400
    assert refused(bodies.add_partitions, "t", b"{}").status == 400


# ---- the charts' figures ----


def test_the_charts_read_counters_by_topic_and_lag_by_group() -> None:
    registry = CollectorRegistry()
    bytes_in = Counter("odradek_bytes_in", "", ["topic"], registry=registry)
    bytes_in.labels("a").inc(10)
    bytes_in.labels("b").inc(5)
    Counter("odradek_messages_in", "", ["topic"], registry=registry).labels("a").inc(2)
    lag = Gauge("odradek_consumer_group_lag_sum", "", ["group"], registry=registry)
    lag.labels("readers").set(30)
    Counter("odradek_requests", "", ["api"], registry=registry).labels("Fetch").inc()
    found = throughput.summary(2, 1234, registry.collect())
    assert found == {
        "broker_id": 2,
        "time_ms": 1234,
        "bytes_in": {"a": 10.0, "b": 5.0},
        "bytes_out": {},
        "messages_in": {"a": 2.0},
        "group_lag": {"readers": 30.0},
    }
