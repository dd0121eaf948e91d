"""The idempotent producer with real processes.

1. A gRPC proxy between the producer and the brokers drops the answers of a share of Produce calls after the
   broker has appended their batches: the producer retries them, and the leaders acknowledge the retries with the
   original offsets instead of appending them again. Every record is then in the log exactly once, in send order.
   The same run without idempotence appends duplicates, so the test can tell the two apart.
2. A partition leader restarted cleanly (SIGTERM: producer state snapshotted on close) or not (SIGKILL: rebuilt from
   the newest snapshot plus the log after it) still recognises a producer's retained batches and its sequence.
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Iterator

import grpc
import pytest

from odradek.client import Admin, Consumer, Producer, TopicPartition
from odradek.client.connection import channel_options
from odradek.client.errors import RETRIABLE_CODES, ErrorCode
from odradek.client.record.batch import read_batches
from odradek.client.record.builder import encode_batch
from odradek.deploy.local import DevCluster, process_state
from odradek.proto import broker_pb2 as pb
from odradek.proto import broker_pb2_grpc

from .conftest import start_cluster, wait_for
from .holding_proxy import HoldingProxy

pytestmark = pytest.mark.integration

# As test_replication.py: quick ISR changes and follower fetches.
SETTINGS = {"replica.lag.time.max.ms": 3000, "replica.fetch.backoff.ms": 200, "replica.fetch.wait.max.ms": 200}
RECORDS = 3000
PARTITIONS = 3
DROP_RATE = 0.3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    """Overrides conftest's: the same 3 controllers and 3 brokers, with SETTINGS (conftest's ``admin`` uses it)."""
    c = start_cluster(tmp_path_factory.mktemp("idempotence"), **SETTINGS)
    yield c
    c.stop_all(timeout=10)


def brokers_of(cluster: DevCluster) -> dict[int, int]:
    """Broker node id -> broker port."""
    return {n.node_id: n.broker_port for n in cluster.nodes if n.broker_port}


# ---- the proxy ---------------------------------------------------------------------------------------------------


class ProduceDropper:
    """The proxy's ``drop_answers``: notes every batch of every Produce request on its way to a broker, and drops the
    broker's answer to a ``drop_rate`` share of them: the batches were appended, but the client cannot know."""

    def __init__(self, drop_rate: float, seed: int = 1) -> None:
        self.drop_rate = drop_rate
        self._random = random.Random(seed)
        self.produce_batches: list[tuple[str, int, int, int, int]] = []  # (topic, partition, pid, epoch, seq) sent

    def __call__(self, method: str, request: bytes) -> bool:
        if method != "Produce":
            return False
        for t in pb.ProduceRequest.FromString(request).topics:
            for p in t.partitions:
                for batch in read_batches(p.records):
                    h = batch.header
                    self.produce_batches.append((t.name, p.partition, h.producer_id, h.producer_epoch, h.base_sequence))
        return self._random.random() < self.drop_rate


# ---- reading back ------------------------------------------------------------------------------------------------


def read_partitions(servers: str, topic: str, ends: dict[int, int], timeout: float = 60) -> dict[int, list]:
    """Every record of every partition up to ``ends``, as (offset, value), from the brokers directly."""
    out: dict[int, list] = {p: [] for p in ends}
    with Consumer({"bootstrap.servers": servers, "auto.offset.reset": "earliest"}) as consumer:
        tps = [TopicPartition(topic, p) for p in ends]
        consumer.assign(tps)
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < ends[tp.partition] for tp in tps):
            assert time.monotonic() < deadline, f"read {sum(map(len, out.values()))} records of {sum(ends.values())}"
            for r in consumer.poll(timeout_ms=200):
                out[r.partition].append((r.offset, r.value))
    return out


def log_batches(cluster: DevCluster, admin: Admin, topic: str) -> list[tuple[int, int, int, int, int]]:
    """(partition, pid, epoch, base sequence, record count) of every batch below each partition's high watermark,
    fetched from the leaders directly with raw Fetch calls."""
    out = []
    for p in admin.describe_topic(topic).partitions:
        address = f"127.0.0.1:{cluster.node(p.leader).broker_port}"
        with grpc.insecure_channel(address, options=channel_options()) as channel:
            stub = broker_pb2_grpc.BrokerStub(channel)
            offset = 0
            while offset < p.high_watermark:
                request = pb.FetchRequest(
                    replica_id=-1,
                    max_wait_ms=0,
                    min_bytes=0,
                    max_bytes=8 << 20,
                    topics=[
                        pb.FetchTopic(
                            name=topic,
                            partitions=[
                                pb.FetchPartition(
                                    partition=p.partition,
                                    current_leader_epoch=-1,
                                    fetch_offset=offset,
                                    partition_max_bytes=8 << 20,
                                )
                            ],
                        )
                    ],
                )
                r = stub.Fetch(request, timeout=10).topics[0].partitions[0]
                assert r.error == ErrorCode.NONE, ErrorCode.Name(r.error)
                for batch in read_batches(r.records):
                    h = batch.header
                    out.append((p.partition, h.producer_id, h.producer_epoch, h.base_sequence, h.records_count))
                    offset = h.next_offset
    return out


def run_through_dropping_proxy(cluster: DevCluster, admin: Admin, topic: str, **config) -> dict:
    """Send RECORDS numbered records (record i to partition i % PARTITIONS) through a proxy dropping DROP_RATE of
    the Produce answers; check every send succeeded and every record was read back at least once; return what was
    observed."""
    admin.create_topic(topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    wait_for(
        lambda: all(p.leader > 0 and len(p.isr) == 3 for p in admin.describe_topic(topic).partitions),
        15,
        what="leaders and full ISRs",
    )
    started = time.monotonic()
    dropper = ProduceDropper(DROP_RATE)
    with HoldingProxy(brokers_of(cluster), drop_answers=dropper) as proxy:
        with Producer({"bootstrap.servers": proxy.bootstrap_servers, **config}) as producer:
            futures = []
            for i in range(RECORDS):
                futures.append(producer.send(topic, b"%06d" % i, partition=i % PARTITIONS))
                if i % 5 == 4:
                    time.sleep(0.005)  # many small batches, so many requests to drop
            producer.flush(90)
            metadata = [f.result(0) for f in futures]  # every send succeeded
        elapsed = time.monotonic() - started
        calls, dropped, sent_batches = dict(proxy.calls), proxy.answers_dropped, list(dropper.produce_batches)
    assert calls.get("Metadata", 0) > 0 and calls.get("Produce", 0) > 0, calls
    assert dropped > 0, "the proxy dropped nothing: the test proved nothing"

    ends = {p.partition: p.high_watermark for p in admin.describe_topic(topic).partitions}
    read = read_partitions(cluster.bootstrap_servers, topic, ends)
    appended = log_batches(cluster, admin, topic)
    values = [v for records in read.values() for _, v in records]
    missing = set(range(RECORDS)) - {int(v) for v in values}
    assert not missing, f"{len(missing)} acknowledged records missing, e.g. {sorted(missing)[:5]}"
    return {
        "elapsed_s": round(elapsed, 1),
        "calls": calls,
        "dropped": dropped,
        "sent_batches": sent_batches,
        "appended_batches": appended,
        "read": read,
        "metadata": metadata,
        "duplicates": len(values) - RECORDS,
    }


def test_dropped_produce_answers_are_retried_without_duplicates(cluster: DevCluster, admin: Admin) -> None:
    topic = "dropped-idempotent"
    r = run_through_dropping_proxy(cluster, admin, topic)  # default config: acks=all, idempotence on
    sent, appended = r["sent_batches"], r["appended_batches"]
    for p, records in r["read"].items():
        expected = [b"%06d" % i for i in range(p, RECORDS, PARTITIONS)]
        assert [v for _, v in records] == expected, f"partition {p}: not every record exactly once, in send order"
    # Each record's acknowledged offset is where it is in the log, retries acknowledged with the original offsets.
    where = {v: (p, offset) for p, records in r["read"].items() for offset, v in records}
    for i, m in enumerate(r["metadata"]):
        assert (m.partition, m.offset) == where[b"%06d" % i], f"record {i} acknowledged at {m}"
    # The producer retried: more batches reached the brokers than the logs hold, and the logs hold each sequenced
    # batch once.
    pids = {pid for _, _, pid, _, _ in sent}
    assert len(pids) == 1 and -1 not in pids, pids
    keys = [(p, pid, epoch, seq) for p, pid, epoch, seq, _ in appended]
    assert len(keys) == len(set(keys)), "a batch was appended twice"
    assert set(keys) == {(p, pid, epoch, seq) for _, p, pid, epoch, seq in sent}
    # Every dropped answer made the producer send its batches once more (and errors from a broker would add more).
    assert len(sent) - len(appended) >= r["dropped"] > 0, f"{len(sent)} batches sent, {len(appended)} appended"
    assert r["duplicates"] == 0
    print(
        f"\nidempotent: {RECORDS} records in {r['elapsed_s']}s; Produce calls {r['calls']['Produce']}, answers "
        f"dropped {r['dropped']}, batches sent {len(sent)}, appended {len(appended)}, duplicates {r['duplicates']}"
    )


def test_without_idempotence_dropped_answers_duplicate_records(cluster: DevCluster, admin: Admin) -> None:
    """The control: the same run, idempotence off (acks=all still) appends the retried batches again."""
    r = run_through_dropping_proxy(cluster, admin, "dropped-plain", **{"enable.idempotence": False, "acks": "all"})
    sent, appended = r["sent_batches"], r["appended_batches"]
    assert {pid for _, _, pid, _, _ in sent} == {-1}
    assert r["duplicates"] > 0, "no duplicates without idempotence: the proxy's drops are not being retried"
    print(
        f"\nnot idempotent: {RECORDS} records in {r['elapsed_s']}s; Produce calls {r['calls']['Produce']}, answers "
        f"dropped {r['dropped']}, batches sent {len(sent)}, appended {len(appended)}, duplicates {r['duplicates']}"
    )


# ---- restarts ----------------------------------------------------------------------------------------------------

BATCHES = 12
PER_BATCH = 5


def produce(stub: broker_pb2_grpc.BrokerStub, topic: str, records: bytes) -> pb.ProducePartitionResponse:
    request = pb.ProduceRequest(
        acks=-1,
        timeout_ms=10000,
        topics=[pb.ProduceTopic(name=topic, partitions=[pb.ProducePartition(partition=0, records=records)])],
    )
    return stub.Produce(request, timeout=15).topics[0].partitions[0]


def produce_retrying(address: str, topic: str, records: bytes, timeout: float = 30) -> pb.ProducePartitionResponse:
    """Produce until the answer is not a retriable error (a restarted leader may not serve yet)."""
    deadline = time.monotonic() + timeout
    while True:
        with grpc.insecure_channel(address, options=channel_options()) as channel:
            try:
                r = produce(broker_pb2_grpc.BrokerStub(channel), topic, records)
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                    raise
            else:
                if r.error not in RETRIABLE_CODES or time.monotonic() > deadline:
                    return r
        time.sleep(0.2)


def init_producer_id(address: str, timeout: float = 30) -> int:
    """A new producer id (at epoch 0), retried on retriable errors."""
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(address, options=channel_options()) as channel:
        stub = broker_pb2_grpc.BrokerStub(channel)
        while True:
            r = stub.InitProducerId(pb.InitProducerIdRequest(producer_id=-1, producer_epoch=-1), timeout=15)
            if r.error == ErrorCode.NONE:
                assert r.producer_epoch == 0
                return r.producer_id
            assert r.error in RETRIABLE_CODES and time.monotonic() < deadline, ErrorCode.Name(r.error)
            time.sleep(0.2)


def latest_offset(address: str, topic: str) -> int:
    request = pb.ListOffsetsRequest(
        replica_id=-1,
        topics=[
            pb.ListOffsetsTopic(
                name=topic, partitions=[pb.ListOffsetsPartition(partition=0, current_leader_epoch=-1, timestamp=-1)]
            )
        ],
    )
    with grpc.insecure_channel(address, options=channel_options()) as channel:
        r = broker_pb2_grpc.BrokerStub(channel).ListOffsets(request, timeout=10).topics[0].partitions[0]
    assert r.error == ErrorCode.NONE, ErrorCode.Name(r.error)
    return r.offset


def now_ms() -> int:
    return int(time.time() * 1000)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["clean", "unclean"])
def test_restarted_leader_keeps_producer_state(cluster: DevCluster, admin: Admin, sig: signal.Signals) -> None:
    topic = f"restart-{sig.name.lower()}"
    # Small segments: rolls snapshot the producer state mid-log, so an unclean restart loads a snapshot and replays
    # the batches after it (the retained five straddle the two).
    # The manual recovery strategy keeps the operator's step below (balanced would recover the partition alone).
    admin.create_topic(topic, 1, 1, {"segment.bytes": "512", "unclean.recovery.strategy": "manual"})
    leader = wait_for(lambda: admin.describe_topic(topic).partitions[0].leader, 15, what="a leader")
    address = f"127.0.0.1:{cluster.node(leader).broker_port}"
    pid = init_producer_id(address)

    def batch(k: int, sequence: int | None = None) -> bytes:
        return encode_batch(
            [b"b%02d-r%d" % (k, j) for j in range(PER_BATCH)],
            timestamps=now_ms(),
            producer_id=pid,
            producer_epoch=0,
            base_sequence=PER_BATCH * k if sequence is None else sequence,
        )

    sent: list[tuple[bytes, int]] = []  # (records, base offset) per batch
    for k in range(BATCHES):
        records = batch(k)
        r = produce_retrying(address, topic, records)  # a retry is harmless: that is what is being tested
        assert (ErrorCode.Name(r.error), r.base_offset) == ("NONE", PER_BATCH * k)
        sent.append((records, r.base_offset))
    end = BATCHES * PER_BATCH
    # Before the restart, too: a retry of the last batch is acknowledged with its offset and not appended.
    r = produce_retrying(address, topic, sent[-1][0])
    assert (ErrorCode.Name(r.error), r.base_offset) == ("NONE", sent[-1][1])
    assert latest_offset(address, topic) == end

    partition_dir = cluster.node(leader).directory / "data" / f"{topic}-0"
    started = time.monotonic()
    cluster.signal(leader, sig)
    wait_for(lambda: process_state(cluster.node(leader).pid) == "stopped", 30, what="the broker to exit")
    snapshots = sorted(int(p.name.split(".")[0]) for p in partition_dir.glob("*.snapshot"))
    if sig is signal.SIGTERM:
        assert end in snapshots, f"no producer snapshot at the log end {end} after a clean stop: {snapshots}"
    else:
        retained_from = sent[-5][1]
        assert snapshots and retained_from < snapshots[-1] < end, (
            f"snapshots {snapshots}: the unclean restart should load one inside the last five batches and replay "
            f"the rest"
        )
    cluster.start(leader)
    if sig is signal.SIGKILL:
        # Its only replica stopped uncleanly (it may have lost acknowledged writes): the partition stays offline,
        # naming it as the last known eligible leader, until an operator accepts it with an unclean election.
        def needs_recovery() -> bool:
            p = admin.describe_topic(topic).partitions[0]
            return p.leader == -1 and p.last_known_elr == [leader]

        wait_for(needs_recovery, 40, what="the partition to wait for recovery")
        # Once the restarted broker is unfenced, the operator's unclean election takes its log, the only one.
        [result] = wait_for(
            lambda: [r for r in admin.elect_leaders("unclean", [(topic, 0)]) if r.error is None],
            40,
            what="an unclean election to succeed",
        )
        assert result.leader == leader
    wait_for(lambda: admin.describe_topic(topic).partitions[0].leader == leader, 40, what="the broker to lead again")

    # Every retained batch (the last five), retried, is acknowledged with its original offset and not appended.
    for records, base_offset in sent[-5:]:
        r = produce_retrying(address, topic, records)
        assert (ErrorCode.Name(r.error), r.base_offset) == ("NONE", base_offset)
    restarted = time.monotonic() - started
    assert latest_offset(address, topic) == end
    # A gap in the sequence is refused, and the next sequence continues the log.
    r = produce_retrying(address, topic, batch(BATCHES, sequence=PER_BATCH * (BATCHES + 1)))
    assert ErrorCode.Name(r.error) == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert latest_offset(address, topic) == end
    r = produce_retrying(address, topic, batch(BATCHES))
    assert (ErrorCode.Name(r.error), r.base_offset) == ("NONE", end)
    assert latest_offset(address, topic) == end + PER_BATCH
    print(f"\n{sig.name}: snapshots at {snapshots}, log end {end}, leading again after {restarted:.1f}s")
