"""KIP-890 verification of a producer's first transactional batch on a partition, and the guard that ties the append
to it: the coordinator's "in the transaction" can be overtaken by the transaction's marker before the batch is
appended, and the batch must then be refused, not open a transaction after the marker that nothing would end."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from txn_harness import Harness, ok

from odradek.broker.dataplane import BrokerService
from odradek.broker.log.log import Log
from odradek.broker.log.producer_state import NO_VERIFICATION, ProducerStateManager
from odradek.broker.partition import Partition
from odradek.broker.transactions.metadata import TxnState
from odradek.broker.txn_verifier import TxnVerifier
from odradek.client.common.metadata_image import PartitionRegistration
from odradek.client.common.request_context import internal
from odradek.client.errors import ErrorCode, InvalidTxnStateError, OdradekError
from odradek.client.record.batch import read_batches
from odradek.client.record.builder import encode_batch
from odradek.client.structs import TopicPartition

PID, OTHER = 5101, 5102
TS = int(time.time() * 1000)  # producer state expires by batch timestamps against the clock


def txn_batch(value: bytes, epoch: int = 0, seq: int = 0, pid: int = PID) -> bytes:
    return encode_batch(
        [value], timestamps=TS, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True
    )


def abort(log: Log, epoch: int = 0, pid: int = PID) -> None:
    """The coordinator's ABORT marker, at the epoch the transaction ran at (EndTxn below v5 keeps it)."""
    log.append_marker(False, pid, epoch, 0, 0, TS)


# -- the log: the guard is checked with the append, under the log's lock ----------------------------------------------


def test_a_marker_after_the_verification_started_voids_its_guard(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0")
    guard = log.start_transaction_verification(PID, 0)
    assert guard is not NO_VERIFICATION
    abort(log)  # the coordinator ends the transaction while the leader waits for its answer
    end = log.log_end_offset
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(txn_batch(b"late"), 0, verification=guard)
    assert log.log_end_offset == end
    assert not log.has_ongoing_transaction(PID, 0)
    log.high_watermark = end
    assert log.last_stable_offset == end
    log.close()


def test_the_current_guard_opens_the_transaction_and_a_later_one_never_revives_it(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0")
    first = log.start_transaction_verification(PID, 0)
    assert log.start_transaction_verification(PID, 0) is first  # concurrent requests share the verification
    assert log.append_as_leader(txn_batch(b"a"), 0, verification=first).first_offset == 0
    assert log.has_ongoing_transaction(PID, 0)
    assert log.start_transaction_verification(PID, 0) is NO_VERIFICATION  # open here: nothing to ask
    abort(log)
    second = log.start_transaction_verification(PID, 0)  # the next transaction's verification
    assert second is not first
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(txn_batch(b"stale", seq=1), 0, verification=first)
    log.append_as_leader(txn_batch(b"b", seq=1), 0, verification=second)
    assert log.has_ongoing_transaction(PID, 0)
    log.close()


def test_a_batch_expected_in_an_open_transaction_is_refused_once_its_marker_is_in(tmp_path: Path) -> None:
    """No verification was asked (the transaction was open), so NO_VERIFICATION is presented: it verifies nothing."""
    log = Log.open(tmp_path / "t-0")
    log.append_as_leader(txn_batch(b"a"), 0, verification=log.start_transaction_verification(PID, 0))
    expected_open = log.start_transaction_verification(PID, 0)
    assert expected_open is NO_VERIFICATION
    abort(log)
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(txn_batch(b"late", seq=1), 0, verification=expected_open)
    assert not log.has_ongoing_transaction(PID, 0)
    log.close()


def test_another_producers_marker_leaves_the_guard_valid(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0")
    guard = log.start_transaction_verification(PID, 0)
    abort(log, pid=OTHER)
    log.append_as_leader(txn_batch(b"a"), 0, verification=guard)
    assert log.has_ongoing_transaction(PID, 0)
    log.close()


def test_a_guard_of_another_epoch_does_not_verify(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0")
    old = log.start_transaction_verification(PID, 0)
    log.start_transaction_verification(PID, 1)  # the producer bumped its epoch (KIP-360) and asks again
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(txn_batch(b"a"), 0, verification=old)
    log.close()


def test_an_unused_guard_expires_with_the_producer_id_expiration(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path, expiration_ms=1_000)
    guard = state.start_verification(PID, 0, now_ms=10_000)
    state.remove_expired(10_999)
    assert state.verifies(PID, 0, guard)
    state.remove_expired(11_000)
    assert not state.verifies(PID, 0, guard)


# -- the produce path: the guard is taken before the coordinator is asked ---------------------------------------------

TOPIC_ID = b"\x05" * 16


class GatedCoordinator:
    """Answers every verification "in the ongoing transaction", but only once ``answer`` is set."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.answer = asyncio.Event()

    async def verify(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, int]:
        self.asked.set()
        await self.answer.wait()
        return dict.fromkeys(partitions, ErrorCode.NONE)


class Leaders:
    """The slice of ReplicaManager the data plane uses: this broker leads every partition of ``t``."""

    def __init__(self, root: Path, count: int) -> None:
        self.partitions: dict[tuple[str, int], Partition] = {}
        for index in range(count):
            p = Partition("t", index, Log.open(root / f"t-{index}"), 1)
            p.update(PartitionRegistration(TOPIC_ID, index, (1,), (1,), 1, 0, 0), 1, 0)
            self.partitions[("t", index)] = p

    def get(self, topic: str, partition: int) -> Partition:
        return self.partitions[(topic, partition)]


def read_committed_values(p: Partition) -> list[bytes]:
    """The record values a read_committed consumer of ``p`` is given."""
    data, _, aborted = p.read_committed(0, 1 << 20)
    aborted_from = {a.producer_id: a.first_offset for a in aborted}
    values: list[bytes] = []
    for b in read_batches(bytes(data.records)):
        h = b.header
        if h.is_control or (h.is_transactional and h.base_offset >= aborted_from.get(h.producer_id, 1 << 62)):
            continue
        values += [r.value for r in b.records()]
    return values


async def produce_while_the_coordinator_aborts(
    leaders: Leaders, batches: dict[int, bytes]
) -> dict[int, Exception | None]:
    """A transactional produce of ``batches`` (partition -> batch) whose verification is answered only after the
    coordinator aborted the transaction and wrote its marker to every partition of ``batches``."""
    coordinator = GatedCoordinator()
    service = BrokerService(1, "c", leaders, verifier=coordinator)  # type: ignore[arg-type]
    request = [("t", [(index, memoryview(b)) for index, b in batches.items()])]
    produce = asyncio.create_task(service.service.produce(-1, 30_000, "tx", request, internal()))
    await asyncio.wait_for(coordinator.asked.wait(), 5)
    for index in batches:
        leaders.get("t", index).append_marker(False, PID, 0, 0)
    coordinator.answer.set()
    answers, _ = await asyncio.wait_for(produce, 5)
    return {r.partition: r.error for r in answers[0][1]}


async def test_a_batch_verified_before_the_abort_marker_is_refused(tmp_path: Path) -> None:
    leaders = Leaders(tmp_path, 1)
    p = leaders.get("t", 0)
    errors = await produce_while_the_coordinator_aborts(leaders, {0: txn_batch(b"T1")})
    error = errors[0]
    assert isinstance(error, InvalidTxnStateError) and error.code == ErrorCode.INVALID_TXN_STATE
    assert not p.log.has_ongoing_transaction(PID, 0)
    p.append_as_leader(encode_batch([b"plain"] * 2, timestamps=TS))
    assert p.last_stable_offset() == p.log.high_watermark == p.log.log_end_offset  # nothing holds the LSO back
    # the producer's next transaction (epoch bumped) commits: only its own record becomes visible
    p.append_as_leader(txn_batch(b"T2", epoch=1), verification=p.log.start_transaction_verification(PID, 1))
    p.append_marker(True, PID, 1, 0)
    assert read_committed_values(p) == [b"plain", b"plain", b"T2"]


async def test_a_partition_whose_transaction_was_open_is_refused_too(tmp_path: Path) -> None:
    """t-0 has the transaction open (no question asked) and waits while t-1 is verified; the abort overtakes both."""
    leaders = Leaders(tmp_path, 2)
    first = leaders.get("t", 0)
    first.append_as_leader(txn_batch(b"T1-0"), verification=first.log.start_transaction_verification(PID, 0))
    errors = await produce_while_the_coordinator_aborts(leaders, {0: txn_batch(b"T1-1", seq=1), 1: txn_batch(b"x")})
    assert all(isinstance(e, InvalidTxnStateError) for e in errors.values())
    for index in (0, 1):
        p = leaders.get("t", index)
        assert not p.log.has_ongoing_transaction(PID, 0)
        assert p.last_stable_offset() == p.log.log_end_offset
        assert read_committed_values(p) == []


# -- the produce path with the coordinator's own answers ---------------------------------------------------------------


async def test_a_batch_verified_while_its_producers_markers_are_written_is_refused_retriably(tmp_path: Path) -> None:
    """The coordinator answers CONCURRENT_TRANSACTIONS while the producer's transaction is in PrepareCommit (as
    Kafka): the leader refuses the batch with NOT_ENOUGH_REPLICAS, which producers retry (Kafka's mapping), and
    appends nothing. Once the transaction is complete the same batch is in no transaction: TRANSACTION_ABORTABLE.
    The case is a Kafka client whose EndTxn (below v5) keeps the epoch, sending a late batch of that transaction."""
    h = Harness()
    pid, epoch = ok(h.init())
    t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
    ok(h.add(pid, epoch, t0))
    assert ok(h.end(pid, epoch, True, bump=False)) == (pid, epoch)
    assert h.md().state is TxnState.PREPARE_COMMIT

    async def local_verify(
        transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, int]:
        return h.core.verify(transactional_id, producer_id, producer_epoch, partitions)

    verifier = TxnVerifier(1, lambda _: (ErrorCode.NONE, 1, "localhost", 0), local_verify)
    leaders = Leaders(tmp_path, 2)
    service = BrokerService(1, "c", leaders, verifier=verifier)  # type: ignore[arg-type]
    request = [("t", [(0, memoryview(txn_batch(b"late", pid=pid))), (1, memoryview(txn_batch(b"new", pid=pid)))])]

    async def produce() -> dict[int, Exception | None]:
        answers, _ = await asyncio.wait_for(service.service.produce(-1, 30_000, "t", request, internal()), 5)
        return {r.partition: r.error for r in answers[0][1]}

    try:
        errors = await produce()
        for index, tp in ((0, t0), (1, t1)):
            error = errors[index]
            assert isinstance(error, OdradekError) and error.code == ErrorCode.NOT_ENOUGH_REPLICAS, error
            assert error.retriable
            p = leaders.get(tp.topic, tp.partition)
            assert p.log.log_end_offset == 0 and not p.log.has_ongoing_transaction(pid, epoch)
        h.write_markers()  # CompleteCommit durable: no transaction is open
        errors = await produce()
        assert all(isinstance(e, OdradekError) and e.code == ErrorCode.TRANSACTION_ABORTABLE for e in errors.values())
        assert all(leaders.get("t", index).log.log_end_offset == 0 for index in (0, 1))
    finally:
        await verifier.close()
