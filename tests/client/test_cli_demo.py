"""``odradek demo``'s sample against fake brokers: with ``--keep`` the demo topic may hold records the demo did
not send, nulls included."""

from fake_broker import FakeCluster

from odradek.client.cli import demo
from odradek.client.producer.partitioner import partition_for_key
from odradek.client.record.builder import encode_batch

PARTITIONS = 9


def test_sample_shows_a_record_with_null_key_and_value(cluster: FakeCluster) -> None:
    cluster.create_topic("demo", PARTITIONS)
    last = PARTITIONS - 1
    # The demo's keys miss the last partition, so a record there sorts after all of them and is shown.
    assert all(partition_for_key(f"user-{i}".encode(), PARTITIONS) < last for i in range(4))
    for p in range(PARTITIONS):
        cluster.move_leader("demo", p, 0)  # one broker: a single fetch brings every partition's records
    cluster.append("demo", last, encode_batch([None]))  # a tombstone sent before `odradek demo --keep`
    sample = demo._sample(cluster.bootstrap)
    assert {"partition": last, "offset": 0, "key": None, "value": None} in sample["received"]
    assert len(sample["sent"]) == 10
