"""Producer ids on the broker (broker/producer_ids.py, BrokerService.InitProducerId) with a fake controller."""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace

import pytest

from odradek.broker.dataplane import BrokerService
from odradek.broker.lifecycle import BrokerLifecycleManager
from odradek.broker.producer_ids import ProducerIdBlocks, ProducerIdManager, ProducerIdsUnavailableError
from odradek.client.common.metadata_image import MetadataImage
from odradek.client.errors import ErrorCode
from odradek.proto import broker_pb2 as pb
from odradek.proto import controller_pb2 as cpb

# ---- the block arithmetic, deterministic ----


def test_blocks_hand_out_in_order_and_want_the_next_block_at_90_percent() -> None:
    blocks = ProducerIdBlocks()
    assert blocks.take() is None and blocks.wants_block()
    assert blocks.add_block(100, 10)
    assert not blocks.wants_block()
    assert [blocks.take() for _ in range(8)] == list(range(100, 108))
    assert not blocks.wants_block()
    assert blocks.take() == 108 and blocks.wants_block()  # 9 of 10 handed out
    assert blocks.add_block(500, 10) and not blocks.wants_block() and blocks.available == 11
    assert [blocks.take() for _ in range(3)] == [109, 500, 501]


def test_blocks_refuse_overlapping_empty_and_unwanted_blocks() -> None:
    blocks = ProducerIdBlocks()
    assert not blocks.add_block(0, 0)
    assert not blocks.add_block(-5, 10)
    assert blocks.add_block(10, 10)
    assert not blocks.add_block(15, 10)  # overlaps the current block
    assert not blocks.add_block(0, 5)  # below it
    assert blocks.add_block(20, 10)
    assert not blocks.add_block(30, 10)  # one prefetched block is enough
    ids = [blocks.take() for _ in range(21)]
    assert ids == [*range(10, 30), None]


def test_blocks_never_repeat_an_id_over_random_schedules() -> None:
    rng = random.Random(3)
    blocks = ProducerIdBlocks()
    next_start, seen = 0, set()
    for _ in range(5000):
        if blocks.wants_block() and rng.random() < 0.3:
            length = rng.randint(1, 20)
            assert blocks.add_block(next_start, length)
            next_start += length + rng.randint(0, 3)
        pid = blocks.take()
        if pid is not None:
            assert pid not in seen
            seen.add(pid)
    assert len(seen) > 1000


# ---- the manager ----


class FakeController:
    """``call`` for AllocateProducerIds: blocks of ``block_size`` from 0, or scripted failures first."""

    def __init__(self, block_size: int = 10, failures: list[int | None] | None = None) -> None:
        self.block_size = block_size
        self.next = 0
        self.failures = list(failures or [])  # None: no answer; a code: that error
        self.requests: list[cpb.AllocateProducerIdsRequest] = []
        self.in_flight = self.max_in_flight = 0
        self.gate = asyncio.Event()
        self.gate.set()
        self.delay = 0.0

    async def __call__(self, method: str, request: cpb.AllocateProducerIdsRequest):
        assert method == "AllocateProducerIds"
        self.requests.append(request)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await self.gate.wait()
            await asyncio.sleep(self.delay)
            if self.failures:
                code = self.failures.pop(0)
                return None if code is None else cpb.AllocateProducerIdsResponse(error=code, producer_id_start=-1)
            start, self.next = self.next, self.next + self.block_size
            return cpb.AllocateProducerIdsResponse(producer_id_start=start, producer_id_len=self.block_size)
        finally:
            self.in_flight -= 1


def manager(controller: FakeController, **kw) -> ProducerIdManager:
    kw.setdefault("timeout_s", 2.0)
    kw.setdefault("backoff_s", 0.01)
    return ProducerIdManager(7, lambda: 42, controller, **kw)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_first_id_fetches_a_block_with_the_broker_id_and_epoch() -> None:
    controller = FakeController()
    ids = manager(controller)
    assert [await ids.next_id() for _ in range(3)] == [0, 1, 2]
    assert controller.requests == [cpb.AllocateProducerIdsRequest(broker_id=7, broker_epoch=42)]


async def test_the_next_block_is_prefetched_at_90_percent_without_waiting() -> None:
    controller = FakeController()
    ids = manager(controller)
    assert [await ids.next_id() for _ in range(8)] == list(range(8))
    await settle()
    assert len(controller.requests) == 1
    controller.gate.clear()  # the prefetch will hang: ids of the current block must not wait for it
    assert await ids.next_id() == 8
    await settle()
    assert len(controller.requests) == 2 and controller.in_flight == 1
    assert await asyncio.wait_for(ids.next_id(), 0.5) == 9
    controller.gate.set()
    await settle()
    assert ids.blocks.available == 10
    assert [await ids.next_id() for _ in range(10)] == list(range(10, 20))
    await settle()
    assert len(controller.requests) == 3  # prefetching the block after
    await ids.close()


async def test_an_exhausted_block_waits_for_the_next_one() -> None:
    controller = FakeController(block_size=2)
    ids = manager(controller)
    controller.gate.clear()
    first = asyncio.create_task(ids.next_id())
    await asyncio.sleep(0.05)
    assert not first.done() and len(controller.requests) == 1
    controller.gate.set()
    assert await first == 0
    assert [await ids.next_id() for _ in range(5)] == [1, 2, 3, 4, 5]
    await ids.close()


async def test_controller_errors_are_retried_after_a_backoff() -> None:
    controller = FakeController(failures=[None, ErrorCode.NOT_CONTROLLER, ErrorCode.STALE_BROKER_EPOCH])
    ids = manager(controller, backoff_s=0.05)
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await ids.next_id() == 0
    assert len(controller.requests) == 4
    assert loop.time() - started >= 3 * 0.05 * 0.9  # one backoff after each failure, not a busy loop


async def test_no_block_within_the_timeout_is_a_retriable_request_timed_out() -> None:
    controller = FakeController(failures=[ErrorCode.UNKNOWN_SERVER_ERROR] * 1000)
    ids = manager(controller, timeout_s=0.3, backoff_s=0.05)
    with pytest.raises(ProducerIdsUnavailableError) as e:
        await ids.next_id()
    assert e.value.code == ErrorCode.REQUEST_TIMED_OUT and e.value.retriable
    assert "UNKNOWN_SERVER_ERROR" in str(e.value)
    assert 1 <= len(controller.requests) <= 8  # retried after backoffs, not in a busy loop
    controller.failures.clear()  # the controller recovers: the next caller gets an id
    assert await ids.next_id() == 0


async def test_a_hung_controller_times_out_and_a_cancelled_caller_does_not_cancel_the_request() -> None:
    controller = FakeController()
    controller.gate.clear()
    ids = manager(controller, timeout_s=0.1)
    with pytest.raises(ProducerIdsUnavailableError):
        await ids.next_id()
    waiter = asyncio.create_task(ids.next_id())
    await settle()
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    assert controller.in_flight == 1 and len(controller.requests) == 1  # still the one request
    controller.gate.set()
    assert await ids.next_id() == 0
    assert len(controller.requests) == 1


async def test_concurrent_callers_never_get_the_same_id_and_one_request_is_in_flight() -> None:
    controller = FakeController(block_size=7, failures=[None, ErrorCode.NOT_CONTROLLER])
    controller.delay = 0.002
    ids = manager(controller)
    rng = random.Random(5)

    async def caller() -> list[int]:
        got = []
        for _ in range(20):
            got.append(await ids.next_id())
            if rng.random() < 0.3:
                await asyncio.sleep(rng.random() * 0.003)
        return got

    results = await asyncio.gather(*(caller() for _ in range(40)))
    every = [pid for r in results for pid in r]
    assert len(every) == len(set(every)) == 800
    assert controller.max_in_flight == 1
    assert all(r == sorted(r) for r in results)  # each caller sees increasing ids
    await ids.close()


async def test_the_broker_epoch_is_read_for_every_request() -> None:
    controller = FakeController(block_size=1)
    epoch = [5]
    ids = ProducerIdManager(1, lambda: epoch[0], controller, prefetch_ratio=1.0)
    await ids.next_id()
    epoch[0] = 9
    await ids.next_id()
    assert [r.broker_epoch for r in controller.requests] == [5, 9]


# ---- InitProducerId ----


def service(next_producer_id: int, controller: FakeController | None = None) -> BrokerService:
    replicas = SimpleNamespace(image=MetadataImage(next_producer_id=next_producer_id))
    producer_ids = None if controller is None else manager(controller)
    return BrokerService(1, "cluster", replicas, producer_ids=producer_ids)  # type: ignore[arg-type]


def init(pid: int = -1, epoch: int = -1, transactional_id: str = "") -> pb.InitProducerIdRequest:
    return pb.InitProducerIdRequest(transactional_id=transactional_id, producer_id=pid, producer_epoch=epoch)


async def answer(s: BrokerService, request: pb.InitProducerIdRequest) -> tuple[int, int, int]:
    call = SimpleNamespace(peer=lambda: "ipv4:127.0.0.1:50000", invocation_metadata=lambda: ())
    r = await s.InitProducerId(request, call)  # type: ignore[arg-type]
    return r.error, r.producer_id, r.producer_epoch


async def test_init_producer_id_new_ids_and_epoch_bumps() -> None:
    controller = FakeController(block_size=100)
    s = service(1000, controller)
    assert await answer(s, init()) == (ErrorCode.NONE, 0, 0)
    # proto3 cannot tell an unset epoch from 0: producer_id -1 alone asks for a new id.
    assert await answer(s, pb.InitProducerIdRequest(producer_id=-1)) == (ErrorCode.NONE, 1, 0)
    assert await answer(s, init(0, 0)) == (ErrorCode.NONE, 0, 1)
    assert await answer(s, init(0, 32765)) == (ErrorCode.NONE, 0, 32766)
    # Kafka's limit: an epoch is not bumped past int16 max - 1; the producer starts over with a fresh id.
    assert await answer(s, init(0, 32766)) == (ErrorCode.NONE, 2, 0)
    assert await answer(s, init(0, 32767)) == (ErrorCode.NONE, 3, 0)
    # An id no block has covered yet is not the caller's to bump.
    assert await answer(s, init(1000, 3)) == (ErrorCode.NONE, 4, 0)


async def test_init_producer_id_refusals() -> None:
    s = service(1000, FakeController())
    invalid = (ErrorCode.INVALID_REQUEST, -1, -1)
    # A transactional id goes to the transaction coordinator; a service without one cannot answer it.
    assert await answer(s, init(transactional_id="txn")) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, -1)
    assert await answer(s, init(5, -1)) == invalid
    assert await answer(s, init(-7, 0)) == invalid
    assert await answer(s, init(5, 40000)) == invalid
    assert await answer(service(0), init()) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, -1)
    down = service(0, FakeController(failures=[None] * 1000))
    down.producer_id_service.producer_ids.timeout_s = 0.1  # type: ignore[union-attr]
    assert await answer(down, init()) == (ErrorCode.REQUEST_TIMED_OUT, -1, -1)


async def test_lifecycle_call_follows_not_controller_without_a_leader_in_the_response(monkeypatch) -> None:
    """AllocateProducerIdsResponse names no leader: NOT_CONTROLLER must still read as "no answer", and the next
    request goes to the leader the broker knows of."""
    answers = {1: cpb.AllocateProducerIdsResponse(error=ErrorCode.NOT_CONTROLLER), 2: cpb.AllocateProducerIdsResponse()}
    asked: list[int] = []

    class Stub:
        def __init__(self, channel) -> None:
            self.node = channel

        async def AllocateProducerIds(self, request, timeout):
            asked.append(self.node)
            return answers[self.node]

    leader = [1]
    lifecycle = BrokerLifecycleManager(4, "c", "h", 1, "", [], {1: "a1", 2: "a2"}, lambda: leader[0], lambda: 0, 500)
    monkeypatch.setattr(lifecycle._pool, "get", lambda address: int(address[1:]))
    monkeypatch.setattr("odradek.broker.lifecycle.controller_pb2_grpc.ControllerStub", Stub)
    assert await lifecycle.call("AllocateProducerIds", cpb.AllocateProducerIdsRequest()) is None
    leader[0] = 2
    assert await lifecycle.call("AllocateProducerIds", cpb.AllocateProducerIdsRequest()) == answers[2]
    assert asked == [1, 2]
