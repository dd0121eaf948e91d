import threading
import time

import pytest

from odradek.client.config import ProducerConfig
from odradek.client.errors import ClientTimeoutError
from odradek.client.producer.accumulator import FIRST_RESERVATION, RecordAccumulator
from odradek.client.record.batch import read_batches
from odradek.client.structs import TopicPartition

VALUE = b"x" * 100
SIZE = len(VALUE) + 12  # the producer's estimate for this record


class Wakeups:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


def make(**overrides: object) -> tuple[RecordAccumulator, Wakeups]:
    config = ProducerConfig.from_mapping({"bootstrap.servers": "h:1", "batch.size": 1000, **overrides})
    wakeups = Wakeups()
    return RecordAccumulator(config, wakeups), wakeups


def append(acc: RecordAccumulator, partition: int = 0, value: bytes = VALUE, topic: str = "t"):
    future = acc.try_append(topic, partition, None, value, None, 1, len(value) + 12)
    if future is None:
        reserved = 1000
        assert acc.try_reserve(reserved)
        future = acc.append_new(topic, partition, None, value, None, 1, len(value) + 12, reserved)
    return future


def drain(acc: RecordAccumulator, now: float | None = None, max_bytes: int = 1 << 30, leader: int = 0):
    now = time.monotonic() if now is None else now
    return acc.drain(now, lambda topic, partition: leader, lambda node, full: True, max_bytes)


def test_batches_close_at_batch_size_and_are_sent_without_lingering() -> None:
    acc, wakeups = make(**{"linger.ms": 60_000})
    futures = [append(acc) for _ in range(20)]
    by_node, expired, next_ready, unknown = drain(acc)
    per_batch = (1000 - 61) // SIZE
    # Two full batches make the partition sendable; the open third one rides along in the same request.
    assert [b.record_count for b in by_node[0]] == [per_batch, per_batch, 20 - 2 * per_batch]
    assert not expired and not unknown and next_ready == float("inf")
    assert all(b.size <= 1000 for b in by_node[0])
    assert [f._index for f in futures[:per_batch]] == list(range(per_batch))
    # One wakeup per batch event (created, closed full), never per record, and only while none is pending.
    assert wakeups.count == 1
    acc.wakeup_pending = False
    for _ in range(per_batch):
        append(acc)
    assert wakeups.count == 2


def test_a_new_batch_lingers_then_goes() -> None:
    acc, _ = make(**{"linger.ms": 50})
    append(acc)
    created = time.monotonic()
    by_node, _, next_ready, _ = drain(acc, created)
    assert not by_node and created < next_ready <= created + 0.05
    by_node, _, _, _ = drain(acc, created + 0.06)
    assert [b.record_count for b in by_node[0]] == [1]
    assert append(acc)._index == 0  # the drained batch is closed: the next record opens another


def test_a_ready_leader_takes_every_partition_it_leads_up_to_max_bytes() -> None:
    acc, _ = make(**{"linger.ms": 60_000})
    for _ in range(10):  # partition 0: a closed batch and an open one
        append(acc, 0)
    append(acc, 1)
    append(acc, 2)
    by_node, _, _, _ = acc.drain(time.monotonic(), lambda t, p: 7 if p < 2 else 8, lambda n, full: True, 1 << 30)
    assert sorted((b.partition, b.record_count) for b in by_node[7]) == [(0, 2), (0, 8), (1, 1)]
    assert 8 not in by_node  # nothing of broker 8's is ready yet
    for _ in range(30):
        append(acc, 1)
    by_node, _, _, _ = drain(acc, max_bytes=1500)
    assert sorted(b.partition for b in by_node[0]) == [1, 2]  # one of partition 1's batches fits, and 2's
    assert sum(b.size for b in by_node[0]) <= 1500
    assert [b.partition for b in drain(acc, max_bytes=1)[0][0]] == [1]  # at least one batch always goes


def test_unknown_leader_and_busy_nodes_keep_batches() -> None:
    acc, _ = make(**{"linger.ms": 0})
    append(acc)
    by_node, _, _, unknown = acc.drain(time.monotonic(), lambda t, p: -1, lambda n, full: True, 1 << 30)
    assert not by_node and unknown
    by_node, _, _, unknown = acc.drain(time.monotonic(), lambda t, p: 0, lambda n, full: False, 1 << 30)
    assert not by_node and not unknown
    assert len(drain(acc)[0][0]) == 1


def test_expired_batches_are_returned() -> None:
    acc, _ = make(**{"delivery.timeout.ms": 31_000, "linger.ms": 0})
    append(acc)
    _, expired, _, _ = acc.drain(time.monotonic() + 32, lambda t, p: -1, lambda n, full: True, 1 << 30)
    assert [b.record_count for b in expired] == [1]


def test_batches_expire_at_their_own_deadline_between_expiry_checks_and_after_a_retry() -> None:
    """A drain looks for expired batches only once the oldest queued one can have expired; a batch queued later, or
    put back for a retry with an older creation time, still expires at its own deadline."""
    acc, _ = make(**{"delivery.timeout.ms": 31_000, "linger.ms": 0})
    append(acc, partition=0)
    (retried,) = drain(acc)[0][0]  # in flight
    time.sleep(0.05)
    append(acc, partition=1)
    muted = {TopicPartition("t", 1)}  # a request of its in flight: it waits

    def expired_at(now: float) -> list[tuple[int, bool]]:
        expired = acc.drain(now, lambda t, p: 0, lambda n, full: False, 1 << 30, muted)[1]
        return [(b.partition, b is retried) for b in expired]

    # Past the retried batch's deadline while it is in flight: the check finds partition 1's batch the oldest.
    assert expired_at(retried.created + 31.0001) == []
    acc.reenqueue([retried])  # older than partition 1's batch, and past its deadline
    assert expired_at(retried.created + 31.0002) == [(0, True)]
    assert expired_at(time.monotonic() + 31.0001) == [(1, False)]


def test_retried_batches_go_first_after_their_backoff() -> None:
    acc, _ = make(**{"linger.ms": 0})
    append(acc)
    (first,) = drain(acc)[0][0]
    append(acc)
    first.retry_at = time.monotonic() + 60
    acc.reenqueue([first])
    by_node, _, next_ready, _ = drain(acc)
    assert not by_node and next_ready == first.retry_at  # the batch behind it waits too: order is kept
    assert drain(acc, first.retry_at)[0][0][0] is first


def test_flush_makes_everything_sendable() -> None:
    acc, _ = make(**{"linger.ms": 60_000})
    append(acc)
    incomplete = acc.begin_flush()
    assert len(incomplete) == 1 and len(drain(acc)[0][0]) == 1
    acc.end_flush()


def test_buffer_memory_blocks_then_times_out() -> None:
    acc, _ = make(**{"buffer.memory": 2500})
    acc.reserve(1000, 0.1)
    acc.reserve(1000, 0.1)
    assert not acc.try_reserve(1000)
    started = time.monotonic()
    with pytest.raises(ClientTimeoutError, match=r"buffer\.memory within max\.block\.ms"):
        acc.reserve(1000, 0.2)
    assert time.monotonic() - started >= 0.19


def test_released_memory_unblocks_a_waiting_thread() -> None:
    acc, wakeups = make(**{"buffer.memory": 1000, "linger.ms": 60_000})
    append(acc)
    (batch,) = acc.unsent()
    acc.wakeup_pending = False  # as the sender does before each pass
    reserved = threading.Event()

    def blocked() -> None:
        acc.reserve(1000, 5)
        reserved.set()

    thread = threading.Thread(target=blocked)
    thread.start()
    time.sleep(0.05)
    assert not reserved.is_set() and wakeups.count == 2  # the shortage woke the sender to send everything
    acc.release(batch)
    thread.join(5)
    assert reserved.is_set()


def test_concurrent_appends_lose_nothing_and_keep_each_threads_order() -> None:
    acc, _ = make(**{"batch.size": 4096, "buffer.memory": 1 << 30})
    threads_count, per_thread = 4, 3000

    def producer(thread: int) -> None:
        for i in range(per_thread):
            append(acc, i % 2, b"%d:%d" % (thread, i))

    threads = [threading.Thread(target=producer, args=(n,)) for n in range(threads_count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    batches = acc.unsent()
    seen: dict[tuple[int, int], list[int]] = {}
    for batch in batches:
        encoded = batch.encode("none")
        for record in next(read_batches(encoded)).records():
            thread, i = map(int, record.value.split(b":"))
            seen.setdefault((batch.partition, thread), []).append(i)
    for thread in range(threads_count):
        assert seen[0, thread] == list(range(0, per_thread, 2))
        assert seen[1, thread] == list(range(1, per_thread, 2))


def test_muted_partitions_wait_for_their_request() -> None:
    acc, _ = make(**{"linger.ms": 0})
    append(acc, 0)
    append(acc, 1)
    muted = {TopicPartition("t", 0)}
    by_node, _, _, _ = acc.drain(time.monotonic(), lambda t, p: 0, lambda n, full: True, 1 << 30, muted)
    assert [b.partition for b in by_node[0]] == [1]
    assert [b.partition for b in drain(acc)[0][0]] == [0]


def test_a_batch_reserves_what_it_holds_and_grows_while_memory_allows() -> None:
    """A new batch reserves FIRST_RESERVATION, not batch.size (a producer spreading over thousands of partitions
    keeps a batch open on each), doubles up to batch.size as records fill it, and is closed, sendable, when memory
    is too short to grow."""
    acc, _ = make(**{"batch.size": 16384, "buffer.memory": 4096, "linger.ms": 60_000})
    assert acc.try_reserve(FIRST_RESERVATION)
    acc.append_new("t", 0, None, b"x" * 100, None, 1, 700, FIRST_RESERVATION)
    assert acc.try_append("t", 0, None, b"x" * 100, None, 1, 700) is not None  # grew to 2 KiB
    assert acc.try_reserve(2048)  # what is left: the batch cannot double again
    assert acc.try_append("t", 0, None, b"x" * 100, None, 1, 700) is None
    by_node, _, _, _ = acc.drain(time.monotonic(), lambda t, p: 1, lambda n, full: True, 1 << 20)
    assert [b.reserved for b in by_node[1]] == [2048] and by_node[1][0].record_count == 2
