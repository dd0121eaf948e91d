"""Metadata image folding, topic creation/deletion records, elections and the broker lifecycle."""

from odradek.client.common.metadata_image import NO_LEADER, MetadataDelta, MetadataImage, image_from_records
from odradek.client.errors import ErrorCode
from odradek.controller.brokers import BrokerControl
from odradek.controller.topics import TopicRequest, create_topic, delete_topic
from odradek.proto import metadata_pb2 as md


def apply(image: MetadataImage, records: list[md.MetadataRecord]) -> MetadataImage:
    delta = MetadataDelta(image)
    delta.replay_all(records)
    return delta.image()


def cluster(n: int = 3, rack: str = "") -> tuple[MetadataImage, BrokerControl]:
    life = BrokerControl("c1", session_timeout_ms=9000, unclean_allowed=lambda _t: False)
    image = MetadataImage()
    for b in range(1, n + 1):
        d = life.register(
            image,
            broker_id=b,
            cluster_id="c1",
            incarnation_id=bytes([b]) * 16,
            host="127.0.0.1",
            port=9000 + b,
            rack=rack,
            log_dirs=[],
            next_offset=b * 10,
            now_ms=0,
        )
        image = apply(image, d.records)
        d = life.heartbeat(
            image,
            broker_id=b,
            broker_epoch=b * 10,
            metadata_offset=10_000,
            want_fence=False,
            want_shutdown=False,
            now_ms=0,
        )
        image = apply(image, d.records)
    return image, life


def test_registration_then_heartbeat_unfences_a_caught_up_broker() -> None:
    life = BrokerControl("c1", 9000, lambda _t: False)
    d = life.register(
        MetadataImage(),
        broker_id=1,
        cluster_id="c1",
        incarnation_id=b"x" * 16,
        host="h",
        port=1,
        rack="",
        log_dirs=[],
        next_offset=42,
        now_ms=0,
    )
    image = apply(MetadataImage(), d.records)
    assert image.brokers[1].fenced and image.brokers[1].epoch == 42
    lagging = life.heartbeat(
        image, broker_id=1, broker_epoch=42, metadata_offset=41, want_fence=False, want_shutdown=False, now_ms=1
    )
    assert lagging.records == [] and lagging.is_fenced
    d = life.heartbeat(
        image, broker_id=1, broker_epoch=42, metadata_offset=42, want_fence=False, want_shutdown=False, now_ms=2
    )
    assert not apply(image, d.records).brokers[1].fenced


def test_bad_registrations_and_heartbeats_get_typed_errors() -> None:
    image, life = cluster()
    d = life.register(
        image,
        broker_id=1,
        cluster_id="other",
        incarnation_id=b"y" * 16,
        host="h",
        port=1,
        rack="",
        log_dirs=[],
        next_offset=99,
        now_ms=1,
    )
    assert d.error == ErrorCode.INCONSISTENT_CLUSTER_ID and not d.records
    d = life.register(
        image,
        broker_id=1,
        cluster_id="c1",
        incarnation_id=b"y" * 16,
        host="h",
        port=1,
        rack="",
        log_dirs=[],
        next_offset=99,
        now_ms=1,
    )
    assert d.error == ErrorCode.DUPLICATE_BROKER_REGISTRATION and not d.records
    d = life.heartbeat(
        image, broker_id=1, broker_epoch=5, metadata_offset=0, want_fence=False, want_shutdown=False, now_ms=1
    )
    assert d.error == ErrorCode.STALE_BROKER_EPOCH
    d = life.heartbeat(
        image, broker_id=7, broker_epoch=5, metadata_offset=0, want_fence=False, want_shutdown=False, now_ms=1
    )
    assert d.error == ErrorCode.BROKER_ID_NOT_REGISTERED


def test_topic_creation_validates_and_places() -> None:
    image, _ = cluster()
    out = create_topic(image, TopicRequest("orders", 6, 3, {"retention.ms": "1000"}))
    assert out.error == ErrorCode.NONE
    image = apply(image, out.records)
    topic = image.topic("orders")
    assert topic is not None and len(topic.partitions) == 6
    assert all(p.isr == p.replicas and p.leader == p.replicas[0] for p in topic.partitions.values())
    assert image.topic_configs("orders") == {"retention.ms": "1000"}
    cases = [
        (TopicRequest("orders", 1, 1), ErrorCode.TOPIC_ALREADY_EXISTS),
        (TopicRequest("bad name!", 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (TopicRequest("..", 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (TopicRequest("x" * 250, 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (TopicRequest("t", 0, 1), ErrorCode.INVALID_PARTITIONS),
        (TopicRequest("t", 1, 4), ErrorCode.INVALID_REPLICATION_FACTOR),
        (TopicRequest("t", 1, 1, {"no.such": "1"}), ErrorCode.INVALID_CONFIG),
        (TopicRequest("t", 1, 1, {"retention.ms": "soon"}), ErrorCode.INVALID_CONFIG),
    ]
    for request, code in cases:
        result = create_topic(image, request)
        assert (result.error, result.records) == (code, []), request
    assert delete_topic(image, "missing").error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    image = apply(image, delete_topic(image, "orders").records)
    assert image.topic("orders") is None and image.topic_configs("orders") == {}


def test_session_expiry_fences_and_moves_all_leaders_in_one_batch() -> None:
    image, life = cluster()
    image = apply(image, create_topic(image, TopicRequest("t", 9, 3)).records)
    for b in (2, 3):
        life.heartbeat(
            image,
            broker_id=b,
            broker_epoch=b * 10,
            metadata_offset=10_000,
            want_fence=False,
            want_shutdown=False,
            now_ms=8000,
        )
    assert life.expire_sessions(image, now_ms=8999, next_offset=500) == []
    records = life.expire_sessions(image, now_ms=9000, next_offset=500)
    image = apply(image, records)
    assert image.brokers[1].fenced and not image.brokers[2].fenced
    for p in image.topic("t").partitions.values():
        assert p.leader in (2, 3) and 1 not in p.isr
    moved = [
        r for r in records if r.WhichOneof("record") == "partition_change" and r.partition_change.HasField("leader")
    ]
    assert len(moved) == 3  # broker 1 led a third of the 9 partitions
    assert all(p.leader_epoch == 1 for p in image.topic("t").partitions.values() if p.replicas[0] == 1)


def test_last_replica_standing_joins_the_elr_and_leads_again_when_it_returns() -> None:
    image, life = cluster(1)
    image = apply(image, create_topic(image, TopicRequest("solo", 1, 1)).records)
    image = apply(image, life.expire_sessions(image, now_ms=10_000, next_offset=500))
    p = image.partition("solo", 0)
    assert p.leader == NO_LEADER and p.isr == () and p.eligible_leader_replicas == (1,)
    d = life.heartbeat(
        image,
        broker_id=1,
        broker_epoch=10,
        metadata_offset=10_000,
        want_fence=False,
        want_shutdown=False,
        now_ms=10_001,
    )
    image = apply(image, d.records)
    assert image.partition("solo", 0).leader == 1


def test_a_fenced_broker_is_unfenced_only_after_its_metadata_reached_the_fence() -> None:
    """A broker resuming from a pause must not be unfenced while its metadata still shows its old leaderships."""
    image, life = cluster()
    image = apply(image, create_topic(image, TopicRequest("t", 3, 3)).records)
    image = apply(image, life.expire_sessions(image, now_ms=10_000, next_offset=700))
    assert image.brokers[1].fenced

    def beat(offset: int):
        return life.heartbeat(
            image,
            broker_id=1,
            broker_epoch=10,
            metadata_offset=offset,
            want_fence=False,
            want_shutdown=False,
            now_ms=10_001,
            next_offset=800,
        )

    stale = beat(699)  # caught up with its registration (10), not with the fence at 700
    assert stale.records == [] and stale.is_fenced and not stale.is_caught_up
    current = beat(700)
    assert current.is_caught_up and not current.is_fenced
    assert not apply(image, current.records).brokers[1].fenced


def test_controlled_shutdown_moves_leadership_before_allowing_shutdown() -> None:
    image, life = cluster()
    image = apply(image, create_topic(image, TopicRequest("t", 3, 2)).records)
    d = life.heartbeat(
        image, broker_id=2, broker_epoch=20, metadata_offset=10_000, want_fence=False, want_shutdown=True, now_ms=1
    )
    image = apply(image, d.records)
    assert d.should_shut_down
    assert all(p.leader != 2 and 2 not in p.isr for p in image.topic("t").partitions.values())


def test_snapshot_records_rebuild_the_same_image() -> None:
    image, _ = cluster(3, rack="r")
    image = apply(image, create_topic(image, TopicRequest("a", 4, 2, {"cleanup.policy": "delete"})).records)
    rebuilt = image_from_records(image.to_records(), offset=image.offset, epoch=image.epoch)
    assert rebuilt == image


def test_registered_listeners_are_in_the_image_survive_snapshots_and_follow_a_re_registration() -> None:
    life = BrokerControl("c1", session_timeout_ms=9000, unclean_allowed=lambda _t: False)

    def register(image: MetadataImage, incarnation: bytes, listeners: list, offset: int, now_ms: int) -> MetadataImage:
        d = life.register(
            image,
            broker_id=1,
            cluster_id="c1",
            incarnation_id=incarnation * 16,
            host="b1.example",
            port=9092,
            rack="",
            log_dirs=[],
            next_offset=offset,
            now_ms=now_ms,
            listeners=listeners,
        )
        assert d.error == ErrorCode.NONE
        return apply(image, d.records)

    image = register(MetadataImage(), b"a", [("KAFKA", "b1.example", 9192)], 10, 0)
    broker = image.brokers[1]
    assert broker.listeners == (("KAFKA", "b1.example", 9192),)
    assert broker.endpoint("KAFKA") == ("b1.example", 9192)
    assert broker.endpoint("OTHER") is None
    assert (broker.host, broker.port) == ("b1.example", 9092)  # the gRPC address is apart
    rebuilt = image_from_records(image.to_records(), offset=image.offset, epoch=image.epoch)
    assert rebuilt.brokers[1].endpoint("KAFKA") == ("b1.example", 9192)
    # a restart (new incarnation, still fenced) with a moved Kafka listener replaces the address...
    image = register(image, b"b", [("KAFKA", "b1.example", 19192)], 20, 1)
    assert image.brokers[1].endpoint("KAFKA") == ("b1.example", 19192)
    # ...and one without a Kafka listener leaves none behind
    image = register(image, b"c", [], 30, 2)
    assert image.brokers[1].listeners == () and image.brokers[1].endpoint("KAFKA") is None
