"""Producer ids with real processes: InitProducerId on every broker hands out ids no other call ever got, across
block boundaries and a controller leader SIGKILL."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import grpc
import pytest

from odradek.client.admin import Admin
from odradek.client.errors import RETRIABLE_CODES, ErrorCode
from odradek.deploy.local import DevCluster
from odradek.proto import broker_pb2 as pb
from odradek.proto import broker_pb2_grpc

from .conftest import start_cluster, wait_for

pytestmark = pytest.mark.integration

BLOCK = 1000  # the controller's block size
BROKERS = (4, 5)


@pytest.fixture(scope="module")
def ids_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[DevCluster, dict[int, broker_pb2_grpc.BrokerStub]]]:
    cluster = start_cluster(tmp_path_factory.mktemp("producer-ids"), controllers=3, brokers=2)
    channels = {n: grpc.insecure_channel(f"127.0.0.1:{cluster.node(n).broker_port}") for n in BROKERS}
    yield cluster, {n: broker_pb2_grpc.BrokerStub(ch) for n, ch in channels.items()}
    for ch in channels.values():
        ch.close()
    cluster.stop_all(timeout=10)


def init(stub: broker_pb2_grpc.BrokerStub, pid: int = -1, epoch: int = -1) -> tuple[int, int]:
    """InitProducerId, retried on retriable errors (a controller failover) for up to 30 s."""
    deadline = time.monotonic() + 30
    while True:
        r = stub.InitProducerId(pb.InitProducerIdRequest(producer_id=pid, producer_epoch=epoch), timeout=15)
        if r.error == ErrorCode.NONE:
            return r.producer_id, r.producer_epoch
        assert r.error in RETRIABLE_CODES and time.monotonic() < deadline, ErrorCode.Name(r.error)
        time.sleep(0.1)


def new_ids(stub: broker_pb2_grpc.BrokerStub, count: int, window: int = 50) -> list[int]:
    """``count`` new producer ids, ``window`` calls in flight at a time (the broker serves them concurrently)."""
    out: list[int] = []
    request = pb.InitProducerIdRequest(producer_id=-1, producer_epoch=-1)
    while len(out) < count:
        futures = [stub.InitProducerId.future(request, timeout=15) for _ in range(min(window, count - len(out)))]
        for f in futures:
            r = f.result()
            if r.error == ErrorCode.NONE:
                assert r.producer_epoch == 0
                out.append(r.producer_id)
            else:
                assert r.error in RETRIABLE_CODES, ErrorCode.Name(r.error)
                out.append(init(stub)[0])
    return out


def test_brokers_hand_out_distinct_ids_and_bump_epochs(ids_cluster) -> None:
    _, stubs = ids_cluster
    a, b = init(stubs[4]), init(stubs[5])
    assert a[1] == b[1] == 0 and a[0] != b[0]
    assert a[0] // BLOCK != b[0] // BLOCK  # each broker draws from its own block
    assert init(stubs[5], a[0], 0) == (a[0], 1)  # KIP-360 bump: the same id, the next epoch, on any broker
    assert init(stubs[4], a[0], 1) == (a[0], 2)
    # With a transactional id it is the coordinator's: a broker that is not it (or before the transaction state
    # topic exists) says so, never hands out an id of its own.
    txn = stubs[4].InitProducerId(pb.InitProducerIdRequest(transactional_id="t", producer_id=-1, producer_epoch=-1))
    assert txn.error in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NONE)
    assert txn.error != ErrorCode.NONE or txn.producer_epoch == 0


def test_ids_stay_unique_across_blocks_and_a_controller_leader_kill(ids_cluster) -> None:
    cluster, stubs = ids_cluster
    seen = new_ids(stubs[4], BLOCK + 100)
    assert len({pid // BLOCK for pid in seen}) >= 2, "1100 ids should cross a block boundary"
    seen += new_ids(stubs[5], 100)
    assert len(seen) == len(set(seen))

    with Admin({"bootstrap.servers": cluster.admin_servers, "request.timeout.ms": 5000}) as admin:
        before = admin.describe_quorum()
        cluster.signal(before.leader_id, signal.SIGKILL)
        wait_for(
            lambda: admin.describe_quorum().leader_id not in (-1, before.leader_id), 20, 0.2, "a new controller leader"
        )
    # A broker holds at most its current block's last 10% plus one prefetched block (1100 ids), so 1200 calls
    # make each broker use a block allocated by the new leader.
    for broker in BROKERS:
        seen += new_ids(stubs[broker], BLOCK + 200)
    assert len(seen) == len(set(seen)), "a producer id was handed out twice"
