"""Exactly-once copy under failures, after Kafka's transactions system test.

100,000 records on 2 input partitions are copied to a 2-partition output topic by two processes of
``examples/exactly_once_copier.py`` in one group (each poll's records and the group's positions in one transaction),
while, one after another, a copier, the leaders of each input and output partition and the transaction coordinator
of a copier are SIGKILLed and brought back. Then the output read ``read_committed`` must be the input exactly: every
record once, and the records of each input partition in their input order within every output partition. A
``read_committed`` reader follows the output during the run and must never see a record twice.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from odradek.client import Admin, Consumer, Producer, TopicPartition

from .conftest import FAST, wait_for

NODE = {
    **FAST,
    "transaction.state.log.num.partitions": 2,
    "offsets.topic.num.partitions": 1,
    "replica.lag.time.max.ms": 3000,
    "group.initial.rebalance.delay.ms": 300,
    "group.min.session.timeout.ms": 2000,
}
pytestmark = [
    pytest.mark.integration,
    pytest.mark.odradek_cluster(controllers=1, brokers=3, config=NODE, shared=False),
]
COPIER = Path(__file__).resolve().parents[2] / "examples" / "exactly_once_copier.py"
INPUT, OUTPUT, GROUP = "eos-in", "eos-out", "eos-copiers"
PARTITIONS = 2
RECORDS = 60_000
TXN_IDS = ("eos-copier-0", "eos-copier-1")


def value(partition: int, seq: int) -> bytes:
    return b"%d:%06d" % (partition, seq)


def parse(v: bytes) -> tuple[int, int]:
    p, s = v.split(b":")
    return int(p), int(s)


class Copiers:
    """The copier processes, each started again with its transactional id after a kill."""

    def __init__(self, servers: str, logs: Path) -> None:
        self.servers = servers
        self.logs = logs
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.starts = Counter[int]()

    def start(self, i: int) -> None:
        self.starts[i] += 1
        log = open(self.logs / f"copier-{i}.{self.starts[i]}.log", "wb")  # noqa: SIM115 (owned by the process)
        args = [
            sys.executable,
            str(COPIER),
            f"--bootstrap-servers={self.servers}",
            f"--input={INPUT}",
            f"--output={OUTPUT}",
            f"--group={GROUP}",
            f"--transactional-id={TXN_IDS[i]}",
            "--consumer-property=session.timeout.ms=4000",
            "--consumer-property=heartbeat.interval.ms=500",
            "--consumer-property=request.timeout.ms=5000",
            "--consumer-property=max.poll.records=100",  # 1,000 transactions: more of them for the faults to hit
            "--producer-property=transaction.timeout.ms=10000",
        ]
        self.procs[i] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def kill(self, i: int) -> None:
        self.procs[i].send_signal(signal.SIGKILL)
        self.procs[i].wait(10)

    def check_running(self) -> None:
        """A copier that exits by itself (a crash, a fencing it should not see) fails the test with its log."""
        for i, proc in self.procs.items():
            if proc.poll() is not None:
                log = (self.logs / f"copier-{i}.{self.starts[i]}.log").read_text()[-4000:]
                pytest.fail(f"copier {i} exited with {proc.returncode} on its own:\n{log}")

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


class Follower(threading.Thread):
    """A ``read_committed`` reader of the output during the run: records every (value, partition, offset)."""

    def __init__(self, servers: str) -> None:
        super().__init__(daemon=True, name="eos-follower")
        self.servers = servers
        self.stop = threading.Event()
        self.seen: list[tuple[bytes, int, int]] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            config = {
                "bootstrap.servers": self.servers,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                "fetch.max.wait.ms": 200,
            }
            with Consumer(config) as consumer:
                consumer.assign([TopicPartition(OUTPUT, p) for p in range(PARTITIONS)])
                while not self.stop.is_set():
                    for r in consumer.poll(timeout_ms=200):
                        assert r.value is not None
                        self.seen.append((r.value, r.partition, r.offset))
        except BaseException as e:  # reported by the test
            self.error = e


def produce_input(servers: str) -> None:
    with Producer({"bootstrap.servers": servers, "acks": "all", "linger.ms": 5}) as producer:
        for seq in range(RECORDS // PARTITIONS):
            for p in range(PARTITIONS):
                producer.send(INPUT, value(p, seq), partition=p)
        producer.flush(120)


def committed_total(servers: str) -> int:
    with Consumer({"bootstrap.servers": servers, "group.id": GROUP, "enable.auto.commit": False}) as consumer:
        committed = consumer.committed([TopicPartition(INPUT, p) for p in range(PARTITIONS)])
    return sum(om.offset for om in committed.values() if om is not None)


def read_output(servers: str, timeout: float, isolation: str = "read_committed") -> dict[int, list[bytes]]:
    config = {"bootstrap.servers": servers, "isolation.level": isolation, "auto.offset.reset": "earliest"}
    out: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    with Consumer(config) as consumer:
        tps = [TopicPartition(OUTPUT, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        deadline = time.monotonic() + timeout
        # The position, not the last record's offset: a partition ends with a transaction marker.
        while any(consumer.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
            for r in consumer.poll(timeout_ms=500):
                assert r.value is not None
                out[r.partition].append(r.value)
    return out


@pytest.fixture
def copiers(odradek_cluster, tmp_path: Path) -> Iterator[Copiers]:
    c = Copiers(odradek_cluster.bootstrap_servers, tmp_path)
    yield c
    c.stop()


def test_exactly_once_copy_while_leaders_coordinators_and_copiers_are_killed(odradek_cluster, copiers) -> None:
    cluster = odradek_cluster
    servers = cluster.bootstrap_servers
    admin = Admin({"bootstrap.servers": servers, "request.timeout.ms": 10000})
    try:
        for topic in (INPUT, OUTPUT):
            admin.create_topic(topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
        wait_for(lambda: admin.cluster_health().healthy, 30, what="the topics' leaders")
        started = time.monotonic()
        produce_input(servers)
        print(f"input produced in {time.monotonic() - started:.1f}s")
        started = time.monotonic()
        follower = Follower(servers)
        follower.start()
        for i in range(len(TXN_IDS)):
            copiers.start(i)

        def leader(topic: str, partition: int) -> int:
            return admin.describe_topic(topic).partitions[partition].leader

        def coordinator(txn_id: str) -> int:
            return admin.describe_transactions([txn_id])[0].coordinator

        def kill_mid_transaction(i: int) -> None:
            """SIGKILL copier ``i`` while its transaction has records in an output partition: frozen first, so
            that what the brokers report is still true when it dies."""
            outputs = [TopicPartition(OUTPUT, p) for p in range(PARTITIONS)]
            deadline = time.monotonic() + 30  # a loaded machine may leave a copier between transactions a while
            while time.monotonic() < deadline:
                copiers.procs[i].send_signal(signal.SIGSTOP)
                txn = admin.describe_transactions([TXN_IDS[i]])[0]
                if txn.state == "Ongoing" and any(
                    s.producer_id == txn.producer_id and s.current_txn_start_offset >= 0
                    for pp in admin.describe_producers(outputs)
                    for s in pp.producers
                ):
                    copiers.kill(i)
                    return
                copiers.procs[i].send_signal(signal.SIGCONT)
                time.sleep(0.01)
            pytest.fail(f"copier {i} never had an open transaction with output records")

        # Each fault waits until the copy has moved on since the previous one, so every fault hits a running copy.
        faults = [
            ("copier", lambda: 0),
            ("broker", lambda: leader(INPUT, 0)),
            ("broker", lambda: leader(OUTPUT, 1)),
            ("broker", lambda: coordinator(TXN_IDS[1])),
            ("copier", lambda: 1),
            ("broker", lambda: leader(OUTPUT, 0)),
            ("broker", lambda: leader(INPUT, 1)),
            ("broker", lambda: coordinator(TXN_IDS[0])),
        ]
        step = RECORDS // (len(faults) + 2)
        done_faults: list[str] = []
        progress = 0
        for n, (kind, target) in enumerate(faults, start=1):

            def moved_on(goal: int = n * step) -> bool:
                copiers.check_running()
                return committed_total(servers) >= goal

            wait_for(moved_on, 120, interval=0.2, what=f"the copy to reach {n * step} before fault {n}")
            victim = target()
            if kind == "copier":
                kill_mid_transaction(victim)
                time.sleep(0.5)
                copiers.start(victim)
            else:
                cluster.signal(victim, signal.SIGKILL)

                # Restarted only once its partition has failed over: the copy goes on against the new leader
                # (or the new coordinator, which loads the transactions' state) while the victim is down.
                def failed_over(target: Callable[[], int] = target, victim: int = victim) -> bool:
                    return target() not in (victim, -1)

                wait_for(failed_over, 60, what=f"node {victim}'s partition to fail over")
                cluster.start(victim)
                wait_for(lambda: admin.cluster_health().healthy, 60, what=f"node {victim} back in every ISR")
            progress = committed_total(servers)
            done_faults.append(f"{kind} {victim} at {progress} ({time.monotonic() - started:.1f}s)")

        def copied_all() -> bool:
            copiers.check_running()
            return committed_total(servers) == RECORDS

        wait_for(copied_all, 180, interval=0.5, what="the group's offsets to reach the input's end")
        print(f"copied in {time.monotonic() - started:.1f}s")
        copiers.stop()
        follower.stop.set()
        follower.join(30)
        assert follower.error is None, follower.error
        output = read_output(servers, 120)
        uncommitted = sum(map(len, read_output(servers, 120, "read_uncommitted").values()))
    finally:
        admin.close()

    aborts = sum(log.read_text().count("transaction aborted") for log in copiers.logs.glob("copier-*.log"))
    print("faults:", "; ".join(done_faults), "| copier starts:", dict(copiers.starts), "| aborts:", aborts)
    print(f"output: {uncommitted - RECORDS} records of aborted transactions besides the {RECORDS} committed")
    assert uncommitted > RECORDS  # the killed copiers' open transactions left records that read_committed skips
    for log in sorted(copiers.logs.glob("copier-*.log")):
        print(log.name, *[line[:300] for line in log.read_text().splitlines() if " INFO " not in line][:12], sep="\n  ")
    everything = [v for records in output.values() for v in records]
    duplicates = [v for v, c in Counter(everything).items() if c > 1]
    assert not duplicates, f"{len(duplicates)} records copied twice, e.g. {duplicates[:5]}"
    missing = {value(p, s) for p in range(PARTITIONS) for s in range(RECORDS // PARTITIONS)} - set(everything)
    assert not missing, f"{len(missing)} records not copied, e.g. {sorted(missing)[:5]}"
    assert len(everything) == RECORDS
    for out_partition, records in output.items():
        for in_partition in range(PARTITIONS):
            seqs = [s for p, s in map(parse, records) if p == in_partition]
            assert seqs == sorted(seqs), f"input partition {in_partition}'s order broken in output {out_partition}"
    seen = Counter(v for v, _, _ in follower.seen)
    assert not [v for v, c in seen.items() if c > 1], "the read_committed reader saw a record twice during the run"
    assert len(follower.seen) > 0
    assert sum(copiers.starts.values()) == len(TXN_IDS) + 2
