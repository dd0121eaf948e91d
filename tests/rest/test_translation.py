"""The HTTP API's pure pieces besides the router: a produced record's batch and partition, a read's records within
its bounds, HTTP Basic against SCRAM credentials, Kafka's error codes as Confluent's, and the answers' shapes."""

from __future__ import annotations

import base64

import pytest

from odradek.broker.api.data import FetchAnswer
from odradek.broker.rest import auth, errors, records, resources
from odradek.broker.rest import requests as rq
from odradek.broker.rest.errors import RestError
from odradek.broker.rest.service import fetched_of
from odradek.client.common.admin.configs import ConfigSource, DescribedConfig
from odradek.client.common.scram import Mechanism, make_credential
from odradek.client.errors import ErrorCode
from odradek.client.producer.partitioner import partition_for_key
from odradek.client.record.batch import read_batches
from odradek.client.record.builder import encode_batch
from odradek.client.record.control import ControlType, build_control_batch


def test_the_partition_is_the_one_asked_for_else_the_keys_else_any() -> None:
    keyed = rq.ProduceRecord("t", key=rq.Payload(b"user-1", "STRING"))
    assert records.partition_of(keyed, 6, lambda n: 99) == partition_for_key(b"user-1", 6)
    assert records.partition_of(rq.ProduceRecord("t", partition=4, key=keyed.key), 6, lambda n: 99) == 4
    assert records.partition_of(rq.ProduceRecord("t", key=rq.Payload(None, "JSON")), 6, lambda n: n - 1) == 5


def test_a_produced_record_is_one_batch_with_its_key_value_headers_and_time() -> None:
    record = rq.ProduceRecord(
        "t", key=rq.Payload(b"k", "BINARY"), value=rq.Payload(b"{}", "JSON"), headers=(("a", b"1"), ("b", None))
    )
    [batch] = list(read_batches(records.encode(record, 1234)))
    [decoded] = batch.records()
    assert (decoded.key, decoded.value, decoded.timestamp, decoded.headers) == (
        b"k",
        b"{}",
        1234,
        (("a", b"1"), ("b", None)),
    )
    [empty] = list(read_batches(records.encode(rq.ProduceRecord("t"), 1)))
    assert empty.records()[0][2:4] == (None, None)


def _batches(start: int, count: int, size: int = 10) -> bytes:
    return encode_batch([bytes(size)] * count, base_offset=start)


def test_a_read_starts_at_its_offset_and_stops_at_its_bounds() -> None:
    data = _batches(0, 5) + _batches(5, 5)
    read = records.select(data, 3, 4, 10_000)
    assert [r.offset for r in read.records] == [3, 4, 5, 6] and read.next_offset == 7
    read = records.select(data, 0, 100, 25)  # 10 bytes each: two fit
    assert [r.offset for r in read.records] == [0, 1] and read.next_offset == 2
    read = records.select(data, 8, 100, 1)  # one record over the byte bound is still answered
    assert [r.offset for r in read.records] == [8] and read.next_offset == 9
    read = records.select(data, 0, 1000, 10_000)
    assert len(read.records) == 10 and read.next_offset == 10
    assert records.select(b"", 7, 10, 10) == records.Read([], 7)


def test_a_read_passes_over_control_batches() -> None:
    marker = build_control_batch(ControlType.COMMIT, 1, 0, 0, 0, base_offset=2)
    data = _batches(0, 2) + marker + _batches(3, 1)
    read = records.select(data, 0, 100, 10_000)
    assert [r.offset for r in read.records] == [0, 1, 3] and read.next_offset == 4
    only_marker = records.select(marker, 2, 100, 10_000)
    assert only_marker.records == [] and only_marker.next_offset == 3


def test_record_data_is_json_where_it_parses_else_base64() -> None:
    assert resources.record_data(b'{"a": 1}') == {"type": "JSON", "data": {"a": 1}}
    assert resources.record_data(b"\xff\x00") == {"type": "BINARY", "data": base64.b64encode(b"\xff\x00").decode()}
    assert resources.record_data(b"plain text") == {"type": "BINARY", "data": base64.b64encode(b"plain text").decode()}
    assert resources.record_data(None) is None
    assert resources.iso_time(1612552482123) == "2021-02-05T19:14:42.123Z"


def test_basic_credentials_are_checked_against_the_scram_credential() -> None:
    header = "Basic " + base64.b64encode(b"alice:s3cr:t").decode()
    assert auth.basic_credentials(header) == ("alice", "s3cr:t")
    for bad in ("Bearer abc", "Basic !!", "Basic " + base64.b64encode(b"nocolon").decode()):
        with pytest.raises(errors.RestError) as e:
            auth.basic_credentials(bad)
        assert (e.value.status, e.value.code) == (401, 40101)
        assert e.value.headers[0][0] == "www-authenticate"
    for mechanism in Mechanism:
        credential = make_credential(mechanism, "s3cr:t", iterations=4096)
        assert auth.password_matches(credential, "s3cr:t")
        assert not auth.password_matches(credential, "s3cr:T")


def test_verified_passwords_are_remembered_with_their_credential() -> None:
    cache = auth.VerifiedPasswords(size=2)
    old = make_credential(Mechanism.SCRAM_SHA_256, "pw")
    cache.add("alice", "pw", old)
    assert cache.known("alice", "pw", old)
    assert not cache.known("alice", "other", old)
    assert not cache.known("alice", "pw", make_credential(Mechanism.SCRAM_SHA_256, "pw"))  # the credential changed
    cache.add("bob", "pw", old)
    cache.add("carol", "pw", old)  # full: forgets the others
    assert not cache.known("alice", "pw", old) and cache.known("carol", "pw", old)


@pytest.mark.parametrize(
    ("code", "status", "error_code"),
    [
        (ErrorCode.TOPIC_AUTHORIZATION_FAILED, 403, 40301),
        (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, 403, 40301),
        (ErrorCode.GROUP_AUTHORIZATION_FAILED, 403, 40301),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 404, 40403),
        (ErrorCode.MESSAGE_TOO_LARGE, 413, 41301),
        (ErrorCode.RECORD_LIST_TOO_LARGE, 413, 41301),
        (ErrorCode.TOPIC_ALREADY_EXISTS, 400, 40002),
        (ErrorCode.INVALID_CONFIG, 400, 40002),
        (ErrorCode.OFFSET_OUT_OF_RANGE, 400, 40002),
        (ErrorCode.THROTTLING_QUOTA_EXCEEDED, 429, 42901),
        (ErrorCode.LEADER_NOT_AVAILABLE, 503, 50302),
        (ErrorCode.NOT_ENOUGH_REPLICAS, 500, 50003),
        (ErrorCode.REQUEST_TIMED_OUT, 500, 50003),
        (ErrorCode.KAFKA_STORAGE_ERROR, 500, 50003),
        (ErrorCode.INVALID_PRODUCER_EPOCH, 500, 50002),
    ],
)
def test_kafka_errors_map_to_confluents_codes(code: int, status: int, error_code: int) -> None:
    e = errors.for_kafka_code(code, "detail")
    assert (e.status, e.code, e.body()) == (status, error_code, {"error_code": error_code, "message": "detail"})


def test_answers_carry_kind_self_and_related_links() -> None:
    links = resources.Links("http://h:1", "c1")
    t = resources.topic(links, "a b", False, 3, 2)
    assert t["kind"] == "KafkaTopic" and t["metadata"]["self"] == "http://h:1/v3/clusters/c1/topics/a%20b"
    assert t["partitions"] == {"related": "http://h:1/v3/clusters/c1/topics/a%20b/partitions"}
    listed = resources.collection("Topic", links.url("topics"), [t])
    assert listed["kind"] == "KafkaTopicList" and listed["data"] == [t]
    config = resources.topic_config(
        links, "t", DescribedConfig(name="retention.ms", value="1", source=ConfigSource.TOPIC_CONFIG)
    )
    assert (config["source"], config["is_default"], config["value"]) == ("DYNAMIC_TOPIC_CONFIG", False, "1")
    secret = resources.topic_config(links, "t", DescribedConfig(name="x", value="s", sensitive=True))
    assert secret["value"] is None
    assert "controller" not in resources.cluster(links, 1, [2, 3])
    assert resources.cluster(links, 2, [2, 3])["controller"] == {"related": "http://h:1/v3/clusters/c1/brokers/2"}


def test_a_read_held_back_by_the_fetch_quota_is_too_many_requests() -> None:
    """The data service answers a fetch over its client's quota with no partitions and the throttle: a 429 with
    Confluent's 42901 (it used to fail as a 500 on the missing partition)."""
    with pytest.raises(RestError) as refused:
        fetched_of(FetchAnswer([], 250))
    assert (refused.value.status, refused.value.code) == (429, 42901) and "250 ms" in refused.value.message
