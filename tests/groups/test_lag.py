"""The coordinator's consumer-lag gauges: the pure part, and the end-offset poller against fake leaders on loopback."""

from __future__ import annotations

import grpc

from odradek.broker.groups.lag import EndOffsetPoller, by_leader, lag_samples
from odradek.client.common.metadata_image import MetadataImage, image_from_records
from odradek.client.errors import ErrorCode
from odradek.client.structs import TopicPartition
from odradek.proto import broker_pb2 as bpb
from odradek.proto import broker_pb2_grpc
from odradek.proto import metadata_pb2 as md

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_lag_is_end_minus_commit_never_negative_and_unknown_ends_are_left_out() -> None:
    rows, sums = lag_samples({"g": {A0: 5, A1: 9, B0: 3}, "h": {A0: 10}}, {A0: 10, A1: 7})
    assert rows == [("g", A0, 5), ("g", A1, 0), ("h", A0, 0)]
    assert sums == {"g": 5, "h": 0}


def test_partitions_grouped_by_leader_skip_leaderless() -> None:
    leaders = {A0: 1, A1: 2, B0: -1}
    assert by_leader([A1, A0, B0, A0], leaders.__getitem__) == {1: [A0], 2: [A1]}


class FakeLeader(broker_pb2_grpc.BrokerServicer):
    """A broker answering ListOffsets LATEST from ``ends``; ``requests`` records what it was asked."""

    def __init__(self, ends: dict[TopicPartition, int]) -> None:
        self.ends = ends
        self.requests: list[list[TopicPartition]] = []

    async def ListOffsets(self, request, context):
        asked = [TopicPartition(t.name, p.partition) for t in request.topics for p in t.partitions]
        self.requests.append(asked)
        response = bpb.ListOffsetsResponse()
        for t in request.topics:
            rt = response.topics.add(name=t.name)
            for p in t.partitions:
                end = self.ends.get(TopicPartition(t.name, p.partition))
                if end is None:
                    rt.partitions.add(partition=p.partition, error=ErrorCode.NOT_LEADER_OR_FOLLOWER, offset=-1)
                else:
                    rt.partitions.add(partition=p.partition, offset=end)
        return response


async def serve(servicer: FakeLeader) -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server()
    broker_pb2_grpc.add_BrokerServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port


def image(ports: dict[int, int], leaders: dict[TopicPartition, int]) -> MetadataImage:
    records = []
    for b, port in ports.items():
        records += [
            md.MetadataRecord(
                register_broker=md.RegisterBrokerRecord(
                    broker_id=b,
                    incarnation_id=bytes([b]) * 16,
                    broker_epoch=b,
                    endpoint=md.BrokerEndpoint(host="127.0.0.1", port=port),
                )
            ),
        ]
    for i, name in enumerate(sorted({tp.topic for tp in leaders})):
        topic_id = bytes([i + 1]) * 16
        records.append(md.MetadataRecord(topic=md.TopicRecord(name=name, topic_id=topic_id)))
        for tp, leader in leaders.items():
            if tp.topic == name:
                replicas = sorted(ports)
                records.append(
                    md.MetadataRecord(
                        partition=md.PartitionRecord(
                            topic_id=topic_id,
                            partition=tp.partition,
                            replicas=replicas,
                            isr=[leader] if leader >= 0 else [],
                            leader=leader,
                        )
                    )
                )
    return image_from_records(records)


async def test_the_poller_asks_each_leader_once_and_keeps_the_last_answer_of_one_that_fails() -> None:
    one, two = FakeLeader({A0: 10, A1: 7}), FakeLeader({B0: 4})
    (server1, port1), (server2, port2) = await serve(one), await serve(two)
    C0 = TopicPartition("c", 0)  # leaderless: never asked
    state = {"image": image({1: port1, 2: port2}, {A0: 1, A1: 1, B0: 2, C0: -1}), "wanted": {A0, A1, B0, C0}}
    # The interval only bounds each ListOffsets (to half of it): a generous one keeps a first call on a busy machine
    # (channel set-up included) from timing out; the stopped broker below refuses at once.
    poller = EndOffsetPoller(lambda: set(state["wanted"]), lambda: state["image"], interval_s=20.0)
    try:
        await poller.poll_once()
        assert poller.ends == {A0: 10, A1: 7, B0: 4}
        assert sorted(map(sorted, one.requests + two.requests)) == [[A0, A1], [B0]]  # one request per leader

        one.ends = {A0: 12}  # A1's leadership moved away: its answer is an error, its old end is kept
        await server2.stop(None)  # broker 2 is down: B0 keeps its last known end
        await poller.poll_once()
        assert poller.ends == {A0: 12, A1: 7, B0: 4}

        state["wanted"] = {A0}  # no group commits the others any more: they are forgotten
        await poller.poll_once()
        assert poller.ends == {A0: 12}
    finally:
        await poller.close()
        await server1.stop(None)
        await server2.stop(None)
