"""SourceOptions: Spark's Kafka source rules, with every error naming its option."""

from __future__ import annotations

import pytest

from odradek.client.structs import TopicPartition as TP
from odradek.spark_connector.options import (
    OptionError,
    SourceOptions,
    parse_offsets_json,
    serialize_offsets_json,
    topics_for,
)

BASE = {"bootstrap.servers": "h1:9092,h2:9092", "subscribe": "a"}


def parse(batch: bool = False, **extra: str) -> SourceOptions:
    return SourceOptions.parse({**BASE, **extra}, batch=batch)


def test_streaming_defaults_are_sparks() -> None:
    o = parse()
    assert o.bootstrap_servers == ("h1:9092", "h2:9092")
    assert (o.subscribe, o.subscribe_pattern, o.assign) == (("a",), None, None)
    assert (o.starting_offsets, o.ending_offsets) == ("latest", None)
    assert (o.max_offsets_per_trigger, o.min_partitions) == (None, None)
    assert (o.fail_on_data_loss, o.include_headers) == (True, False)


def test_batch_defaults_are_sparks() -> None:
    o = parse(batch=True)
    assert (o.starting_offsets, o.ending_offsets) == ("earliest", "latest")


@pytest.mark.parametrize(
    ("options", "field", "expected"),
    [
        ({"bootstrap.servers": None, "kafka.bootstrap.servers": "k:1"}, "bootstrap_servers", ("k:1",)),
        ({"bootstrap.servers": None, "KAFKA.BOOTSTRAP.SERVERS": "k:1"}, "bootstrap_servers", ("k:1",)),
        ({"bootstrap.servers": "k:1", "kafka.bootstrap.servers": " k:1 "}, "bootstrap_servers", ("k:1",)),
        ({"subscribe": " a, b,,a "}, "subscribe", ("a", "b")),
        ({"subscribe": None, "subscribePattern": "t-.*"}, "subscribe_pattern", "t-.*"),
        ({"subscribe": None, "SUBSCRIBEPATTERN": "t-.*"}, "subscribe_pattern", "t-.*"),
        ({"subscribe": None, "assign": '{"b":[1,0],"a":[0,0]}'}, "assign", (TP("a", 0), TP("b", 0), TP("b", 1))),
        ({"startingOffsets": " EARLIEST "}, "starting_offsets", "earliest"),
        (
            {"startingOffsets": '{"a":{"0":23,"1":-2,"2":-1}}'},
            "starting_offsets",
            {TP("a", 0): 23, TP("a", 1): -2, TP("a", 2): -1},
        ),
        ({"maxOffsetsPerTrigger": "1000"}, "max_offsets_per_trigger", 1000),
        ({"minPartitions": " 8 "}, "min_partitions", 8),
        ({"failOnDataLoss": "False"}, "fail_on_data_loss", False),
        ({"includeHeaders": "TRUE"}, "include_headers", True),
        ({"someUnknownOption": "x"}, "subscribe", ("a",)),
        (
            {"kafka.fetch.max.wait.ms": "50", "KAFKA.client.id": "c"},
            "consumer",
            (("client.id", "c"), ("fetch.max.wait.ms", "50")),
        ),
        ({"kafka.group.id": "g"}, "group_id", "g"),
        ({"kafka.group.id": "g"}, "consumer", ()),
        ({"groupIdPrefix": " ingest "}, "group_id_prefix", "ingest"),
        ({"kafka.group.id": "g", "commitToGroup": "TRUE"}, "commit_to_group", True),
    ],
)
def test_streaming_options_parse(options: dict[str, str | None], field: str, expected: object) -> None:
    merged = {k: v for k, v in {**BASE, **options}.items() if v is not None}
    assert getattr(SourceOptions.parse(merged, batch=False), field) == expected


@pytest.mark.parametrize(
    ("options", "field", "expected"),
    [
        ({"startingOffsets": '{"a":{"0":5}}'}, "starting_offsets", {TP("a", 0): 5}),
        ({"endingOffsets": "LATEST"}, "ending_offsets", "latest"),
        ({"endingOffsets": '{"a":{"0":9,"1":-1}}'}, "ending_offsets", {TP("a", 0): 9, TP("a", 1): -1}),
    ],
)
def test_batch_options_parse(options: dict[str, str], field: str, expected: object) -> None:
    assert getattr(parse(batch=True, **options), field) == expected


ASSIGN = '{"a":[0,1]}'


@pytest.mark.parametrize(
    ("options", "batch", "option"),
    [
        ({"bootstrap.servers": None}, False, "bootstrap.servers"),
        ({"bootstrap.servers": ""}, False, "bootstrap.servers"),
        ({"bootstrap.servers": "nohost:notaport"}, False, "bootstrap.servers"),
        ({"kafka.bootstrap.servers": "other:1"}, False, "bootstrap.servers"),
        ({"subscribe": None}, False, "subscribe/subscribePattern/assign"),
        ({"assign": ASSIGN}, False, "assign/subscribe"),
        ({"subscribePattern": "x"}, False, "subscribe/subscribePattern"),
        ({"subscribe": " , "}, False, "subscribe"),
        ({"subscribe": None, "subscribePattern": " "}, False, "subscribePattern"),
        ({"subscribe": None, "subscribePattern": "(["}, False, "subscribePattern"),
        ({"subscribe": None, "assign": "{not json"}, False, "assign"),
        ({"subscribe": None, "assign": "[0]"}, False, "assign"),
        ({"subscribe": None, "assign": '{"a":0}'}, False, "assign"),
        ({"subscribe": None, "assign": '{"a":[-1]}'}, False, "assign"),
        ({"subscribe": None, "assign": '{"a":[true]}'}, False, "assign"),
        ({"subscribe": None, "assign": "{}"}, False, "assign"),
        ({"subscribe": None, "assign": '{"a":[]}'}, False, "assign"),
        ({"startingOffsets": "newest"}, False, "startingOffsets"),
        ({"startingOffsets": '{"a":{"0":1}'}, False, "startingOffsets"),
        ({"startingOffsets": '{"a":[1]}'}, False, "startingOffsets"),
        ({"startingOffsets": '{"a":{"x":1}}'}, False, "startingOffsets"),
        ({"startingOffsets": '{"a":{"-1":1}}'}, False, "startingOffsets"),
        ({"startingOffsets": '{"a":{"0":-3}}'}, False, "startingOffsets"),
        ({"startingOffsets": '{"a":{"0":1.5}}'}, False, "startingOffsets"),
        ({"startingOffsets": '{"a":{"0":"1"}}'}, False, "startingOffsets"),
        ({"startingOffsets": "{}"}, False, "startingOffsets"),
        ({"startingOffsets": "latest"}, True, "startingOffsets"),
        ({"startingOffsets": '{"a":{"0":-1}}'}, True, "startingOffsets"),
        ({"endingOffsets": "latest"}, False, "endingOffsets"),
        ({"endingOffsets": "earliest"}, True, "endingOffsets"),
        ({"endingOffsets": '{"a":{"0":-2}}'}, True, "endingOffsets"),
        ({"endingOffsets": '{"a":{"0":1'}, True, "endingOffsets"),
        ({"subscribe": None, "assign": ASSIGN, "startingOffsets": '{"a":{"0":1}}'}, False, "startingOffsets"),
        ({"subscribe": None, "assign": ASSIGN, "endingOffsets": '{"a":{"0":1,"2":1}}'}, True, "endingOffsets"),
        ({"maxOffsetsPerTrigger": "0"}, False, "maxOffsetsPerTrigger"),
        ({"maxOffsetsPerTrigger": "-5"}, False, "maxOffsetsPerTrigger"),
        ({"maxOffsetsPerTrigger": "1.5"}, False, "maxOffsetsPerTrigger"),
        ({"maxOffsetsPerTrigger": "1_000"}, False, "maxOffsetsPerTrigger"),
        ({"minPartitions": "0"}, False, "minPartitions"),
        ({"minPartitions": "many"}, False, "minPartitions"),
        ({"failOnDataLoss": "yes"}, False, "failOnDataLoss"),
        ({"includeHeaders": "1"}, False, "includeHeaders"),
        ({"startingTimestamp": "1000"}, False, "startingTimestamp"),
        ({"minOffsetsPerTrigger": "10"}, False, "minOffsetsPerTrigger"),
        ({"kafkaConsumer.pollTimeoutMs": "10"}, True, "kafkaConsumer.pollTimeoutMs"),
        ({"kafka.auto.offset.reset": "earliest"}, False, "kafka.auto.offset.reset"),
        ({"kafka.enable.auto.commit": "true"}, False, "kafka.enable.auto.commit"),
        ({"kafka.value.deserializer": "x"}, False, "kafka.value.deserializer"),
        ({"kafka.fetch.max.wait": "5"}, False, "kafka.fetch.max.wait"),  # not a consumer config
        ({"kafka.fetch.max.wait.ms": "soon"}, False, "kafka.fetch.max.wait.ms"),
        ({"kafka.group.id": ""}, False, "kafka.group.id"),
        ({"groupIdPrefix": " "}, False, "groupIdPrefix"),
        ({"commitToGroup": "true"}, False, "commitToGroup"),  # no kafka.group.id to commit to
        ({"kafka.group.id": "g", "commitToGroup": "true"}, True, "commitToGroup"),  # batch queries have no commit
        ({"kafka.group.id": "g", "commitToGroup": "maybe"}, False, "commitToGroup"),
    ],
)
def test_bad_options_name_the_option(options: dict[str, str | None], batch: bool, option: str) -> None:
    merged = {k: v for k, v in {**BASE, **options}.items() if v is not None}
    with pytest.raises(OptionError) as e:
        SourceOptions.parse(merged, batch=batch)
    assert str(e.value).startswith(f"{option}: ")
    assert e.value.option == option
    assert isinstance(e.value, ValueError)


def test_consumer_config_uses_the_group_id_or_a_fresh_prefixed_one() -> None:
    named = parse(**{"kafka.group.id": "g", "kafka.client.id": "c"}).consumer_config("driver")
    assert named == {
        "bootstrap.servers": "h1:9092,h2:9092",
        "client.id": "c",
        "group.id": "g",
        "enable.auto.commit": "false",
    }
    prefixed = parse(groupIdPrefix="ingest")
    first, second = prefixed.consumer_config("executor"), prefixed.consumer_config("executor")
    assert first["group.id"].startswith("ingest-") and first["group.id"].endswith("-executor")
    assert first["group.id"] != second["group.id"]  # as Spark: a fresh id each time, so no two share a group
    assert parse().consumer_config("driver")["group.id"].startswith("spark-kafka-source-")
    assert parse().consumer_config("executor", **{"auto.offset.reset": "none"})["auto.offset.reset"] == "none"


def test_assign_with_offsets_for_exactly_its_partitions() -> None:
    options = {"bootstrap.servers": "h:1", "assign": ASSIGN, "startingOffsets": '{"a":{"1":-2,"0":4}}'}
    o = SourceOptions.parse(options, batch=True)
    assert o.starting_offsets == {TP("a", 0): 4, TP("a", 1): -2}


def test_offset_maps_are_read_only() -> None:
    o = parse(startingOffsets='{"a":{"0":1}}')
    with pytest.raises(TypeError):
        o.starting_offsets[TP("a", 0)] = 2  # type: ignore[index]


@pytest.mark.parametrize(
    ("offsets", "text"),
    [
        ({TP("a", 0): 23}, '{"a":{"0":23}}'),
        ({TP("b", 1): -1, TP("a", 10): 5, TP("a", 2): -2}, '{"a":{"2":-2,"10":5},"b":{"1":-1}}'),
        ({TP("topic.with-dots_", 0): 0}, '{"topic.with-dots_":{"0":0}}'),
    ],
)
def test_offsets_json_round_trips(offsets: dict[TP, int], text: str) -> None:
    assert serialize_offsets_json(offsets) == text
    assert parse_offsets_json(text) == offsets
    assert serialize_offsets_json(parse_offsets_json(text)) == text


def test_offsets_json_errors_name_the_given_option() -> None:
    with pytest.raises(OptionError, match=r"^endingOffsets: "):
        parse_offsets_json("nope", "endingOffsets")


TOPICS = ["b", "a", "__consumer_offsets", "t-1", "t-10", "xt-1", "t-"]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"subscribe": "t-1,missing,a"}, ["t-1", "a"]),
        ({"subscribe": "__consumer_offsets"}, ["__consumer_offsets"]),
        ({"subscribePattern": r"t-\d+"}, ["t-1", "t-10"]),
        ({"subscribePattern": r"t-1"}, ["t-1"]),  # whole-name match: not t-10 nor xt-1
        ({"subscribePattern": ".*"}, ["a", "b", "t-", "t-1", "t-10", "xt-1"]),  # never internal topics
        ({"assign": '{"b":[0],"missing":[0],"a":[1]}'}, ["a", "b", "missing"]),
    ],
)
def test_topics_for(options: dict[str, str], expected: list[str]) -> None:
    o = SourceOptions.parse({"bootstrap.servers": "h:1", **options}, batch=False)
    assert topics_for(o, TOPICS) == expected
