"""``odradek share-group ...`` against a real one-node cluster with a real share group (confluent-kafka's
``ShareConsumer``): list, describe (members and their assignment while a consumer runs, start offsets and lag),
reset-offsets refused while the group has a member and taking effect once it is empty (a new consumer reads from
there), ``--dry-run`` changing nothing, delete-offsets, delete, ``group describe`` of a share group, and bad input
answered with one ``error:`` line. The commands run in this process (``main``), each with its own admin client."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from odradek.client.admin import Admin
from odradek.client.cli.main import main
from odradek.deploy.local import DevCluster

pytestmark = pytest.mark.integration

NODE = {
    "broker.heartbeat.interval.ms": 500,
    "broker.session.timeout.ms": 3000,
    "offsets.topic.num.partitions": 1,
    "offsets.topic.replication.factor": 1,
    "share.coordinator.state.topic.num.partitions": 1,
    "share.coordinator.state.topic.replication.factor": 1,
    "share.coordinator.state.topic.min.isr": 1,
    "group.share.heartbeat.interval.ms": 500,
    "group.share.session.timeout.ms": 10000,
}
TOPIC = "shared"
RECORDS = 10


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    directory = tmp_path_factory.mktemp("share-cli")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("ODRADEK_HOME", str(directory / "home"))  # no profile of the machine's
        env.delenv("ODRADEK_BOOTSTRAP_SERVERS", raising=False)
        c = DevCluster.create(directory, controllers=1, brokers=0, combined=True, overrides=NODE)
        c.start_all_and_wait(60)
        try:
            with Admin({"bootstrap.servers": c.admin_servers, "request.timeout.ms": 10000}) as admin:
                admin.create_topic(TOPIC, partitions=1, replication_factor=1)
            producer = Producer({"bootstrap.servers": c.kafka_bootstrap_servers, "acks": "all"})
            for i in range(RECORDS):
                producer.produce(TOPIC, b"v%d" % i, partition=0)
            assert producer.flush(30) == 0
            yield c
        finally:
            c.stop_all(timeout=10)


def run(cluster: DevCluster, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([*args, "-X", cluster.admin_servers, "--timeout-ms", "10000"])
    out = capsys.readouterr()
    return code, out.out, out.err


def as_json(cluster: DevCluster, capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    code, out, err = run(cluster, capsys, *args, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def one_error(cluster: DevCluster, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, _, err = run(cluster, capsys, *args)
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def wait_for(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


def earliest(cluster: DevCluster, group: str) -> None:
    """The group's first fetch starts at the log start (share.auto.offset.reset=earliest, a group config)."""
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


class Member(threading.Thread):
    """A share consumer accepting every record it gets, until stopped; it then closes (leaving the group)."""

    def __init__(self, cluster: DevCluster, group: str) -> None:
        super().__init__(daemon=True)
        self.config = {
            "bootstrap.servers": cluster.kafka_bootstrap_servers,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        }
        self.stopping = threading.Event()
        self.offsets: list[int] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            consumer = ShareConsumer(self.config)
            try:
                consumer.subscribe([TOPIC])
                while not self.stopping.is_set():
                    got = [m for m in consumer.poll(0.2) if m.error() is None]
                    for m in got:
                        self.offsets.append(m.offset())
                        consumer.acknowledge(m, AcknowledgeType.ACCEPT)
                    if got:
                        consumer.commit_sync()
            finally:
                consumer.close()
        except BaseException as e:
            self.error = e

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)
        assert not self.is_alive() and self.error is None, self.error


def start_offsets(description: dict) -> dict[int, int | None]:
    return {r["partition"]: r["start_offset"] for r in description["offsets"] if r["topic"] == TOPIC}


def test_share_group_operations(cluster: DevCluster, capsys: pytest.CaptureFixture[str]) -> None:
    group = f"sg-{uuid.uuid4().hex[:8]}"
    earliest(cluster, group)
    member = Member(cluster, group)
    member.start()
    try:
        listed = wait_for(
            lambda: [g for g in as_json(cluster, capsys, "share-group", "list") if g["group_id"] == group],
            20,
            "the group listed",
        )
        assert listed[0]["state"] == "Stable" and listed[0]["coordinator"] >= 0

        def caught_up() -> dict | None:
            d = as_json(cluster, capsys, "share-group", "describe", group)
            return d if start_offsets(d) == {0: RECORDS} and d["members"] else None

        d = wait_for(caught_up, 20, "every record acknowledged")
        assert d["state"] == "Stable" and d["group_type"] == "share" and d["group_epoch"] >= 1
        [m] = d["members"]
        assert m["assignment"] == [{"topic": TOPIC, "partition": 0}] and m["subscribed_topics"] == [TOPIC]
        assert d["offsets"] == [
            {"topic": TOPIC, "partition": 0, "start_offset": RECORDS, "log_end_offset": RECORDS, "lag": 0}
        ]
        code, human, _ = run(cluster, capsys, "share-group", "describe", group)
        assert code == 0 and human.startswith(f"share group {group}: Stable") and m["member_id"] in human
        assert "START_OFFSET" in human and f"{TOPIC}:0" in human

        # ``group describe`` shows it as a share group, in the shape it shows every group.
        g = as_json(cluster, capsys, "group", "describe", group)
        assert g["group_type"] == "share" and g["generation"] == d["group_epoch"]
        assert set(g) == {
            "group_id",
            "state",
            "protocol",
            "generation",
            "coordinator",
            "group_type",
            "members",
            "offsets",
        }
        code, human, _ = run(cluster, capsys, "group", "describe", group)
        assert code == 0 and "share protocol" in human.splitlines()[0]

        # While the group has a member: no reset (the coordinator's NON_EMPTY_GROUP), no dry run, no delete.
        for extra in ((), ("--dry-run",)):
            refused = one_error(
                cluster, capsys, "share-group", "reset-offsets", group, "--topic", TOPIC, "--to-earliest", *extra
            )
            assert "NON_EMPTY_GROUP" in refused and "stop them first" in refused
        assert "NON_EMPTY_GROUP" in one_error(cluster, capsys, "share-group", "delete-offsets", group, "--topic", TOPIC)
        assert "NON_EMPTY_GROUP" in one_error(cluster, capsys, "share-group", "delete", group)
    finally:
        member.stop()
    assert sorted(member.offsets) == list(range(RECORDS))
    wait_for(lambda: as_json(cluster, capsys, "share-group", "describe", group)["state"] == "Empty", 20, "empty")

    plan = as_json(
        cluster, capsys, "share-group", "reset-offsets", group, "--topic", TOPIC, "--to-earliest", "--dry-run"
    )
    assert plan == {
        "group_id": group,
        "dry_run": True,
        "offsets": [{"topic": TOPIC, "partition": 0, "current_offset": RECORDS, "new_offset": 0}],
    }
    assert start_offsets(as_json(cluster, capsys, "share-group", "describe", group)) == {0: RECORDS}

    done = as_json(cluster, capsys, "share-group", "reset-offsets", group, "--topic", f"{TOPIC}:0", "--to-offset", "4")
    assert done["offsets"][0]["new_offset"] == 4 and not done["dry_run"]
    d = as_json(cluster, capsys, "share-group", "describe", group)
    assert d["offsets"] == [{"topic": TOPIC, "partition": 0, "start_offset": 4, "log_end_offset": RECORDS, "lag": 6}]

    again = Member(cluster, group)  # the records from the new start offset are delivered again
    again.start()
    try:
        wait_for(lambda: len(again.offsets) >= RECORDS - 4, 20, "the records from offset 4")
    finally:
        again.stop()
    assert sorted(again.offsets) == list(range(4, RECORDS))

    wait_for(lambda: as_json(cluster, capsys, "share-group", "describe", group)["state"] == "Empty", 20, "empty")
    deleted = as_json(cluster, capsys, "share-group", "delete-offsets", group, "--topic", TOPIC)
    assert deleted == {"group_id": group, "topics": [TOPIC]}
    assert as_json(cluster, capsys, "share-group", "describe", group)["offsets"] == []

    # An unknown topic or partition of an existing (empty) group: one error line, nothing changed.
    reset = ("share-group", "reset-offsets", group, "--to-earliest", "--topic")
    assert "UNKNOWN_TOPIC_OR_PARTITION" in one_error(cluster, capsys, *reset, "no-such-topic")
    assert "no partition 5" in one_error(cluster, capsys, *reset, f"{TOPIC}:5")
    gone = one_error(cluster, capsys, "share-group", "delete-offsets", group, "--topic", "no-such-topic")
    assert "UNKNOWN_TOPIC_OR_PARTITION" in gone

    assert as_json(cluster, capsys, "share-group", "delete", group) == {"group_id": group, "deleted": True}
    assert group not in [g["group_id"] for g in as_json(cluster, capsys, "share-group", "list")]


def test_bad_input_is_one_error_line(cluster: DevCluster, capsys: pytest.CaptureFixture[str]) -> None:
    missing = "no-such-share-group"
    for args in (("describe", missing), ("delete", missing), ("delete-offsets", missing, "--topic", TOPIC)):
        assert "GROUP_ID_NOT_FOUND" in one_error(cluster, capsys, "share-group", *args)
    reset = ("share-group", "reset-offsets", missing, "--to-earliest", "--topic")
    assert "GROUP_ID_NOT_FOUND" in one_error(cluster, capsys, *reset, TOPIC)
    assert "partitions must be integers" in one_error(cluster, capsys, *reset, f"{TOPIC}:x")
    assert "give T or T:P[,P]" in one_error(cluster, capsys, *reset, ":0")
    assert "whole topic" in one_error(
        cluster, capsys, "share-group", "delete-offsets", missing, "--topic", f"{TOPIC}:0"
    )
    assert "GROUP_ID_NOT_FOUND" in one_error(cluster, capsys, "group", "describe", missing)
