"""The source's planning and reading over a compacted partition whose offsets have gaps, without a JVM: the
driver's calls (BatchReader.partitions, StreamReader.latestOffset/partitions) and the executor's read run in this
process against a real cluster. Ranges count offsets, not records, so a range may end at, or lie wholly within,
offsets the cleaner removed: it must read what survives and finish, neither waiting for the missing offsets nor
failing."""

from __future__ import annotations

import json

import pytest

from ..integration.compaction_gaps import END, NODE, SURVIVING, compacted_with_gaps

pytest.importorskip("pyspark")
pytestmark = [
    pytest.mark.integration,
    pytest.mark.odradek_cluster(controllers=1, brokers=2, config=NODE),  # the same shared cluster as the clients'
]


@pytest.fixture
def short_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """A range that waits for offsets that will never come fails in seconds rather than after two minutes."""
    from odradek.spark_connector import source

    monkeypatch.setattr(source, "READ_TIMEOUT_S", 20.0)


def offsets(topic: str, offset: int) -> dict:
    """A streaming offset of partition 0 as Spark hands it to the source."""
    return {"offsets": json.dumps({topic: {"0": offset}}, separators=(",", ":"))}


def rows(reader, partitions) -> list[tuple[int, bytes, bytes]]:
    return [
        (row["offset"], row["key"], row["value"])
        for p in partitions
        for batch in reader.read(p)
        for row in batch.to_pylist()
    ]


def test_batch_and_micro_batch_ranges_over_compaction_gaps(odradek_cluster, short_reads) -> None:
    from pyspark.sql.streaming.datasource import ReadMaxRows

    from odradek.spark_connector.options import SourceOptions
    from odradek.spark_connector.source import BatchReader, StreamReader

    topic = "spark-gaps"
    expected = compacted_with_gaps(odradek_cluster, topic)
    options = {
        "kafka.bootstrap.servers": odradek_cluster.bootstrap_servers,
        "assign": json.dumps({topic: [0]}),
        "minPartitions": "6",
    }

    batch = BatchReader(SourceOptions.parse(options, batch=True))
    planned = batch.partitions()
    ends = [p.range.end for p in planned]
    assert len(planned) == 6 and ends[-1] == END, [p.range for p in planned]
    assert any(end - 1 not in SURVIVING for end in ends), ends  # some range's last offset was removed by compaction
    assert rows(batch, planned) == expected

    stream = StreamReader(SourceOptions.parse({**options, "startingOffsets": "earliest"}, batch=False))
    try:
        for start, end in ((0, 10), (15, 20), (25, 30)):  # wholly removed: nothing to read, and done
            assert rows(stream, stream.partitions(offsets(topic, start), offsets(topic, end))) == []
        # Micro-batches of at most 7 offsets from the start: the first holds no record at all.
        start, seen, batches = stream.initialOffset(), [], 0
        while json.loads(start["offsets"])[topic]["0"] < END:
            end = stream.latestOffset(start, ReadMaxRows(7))
            seen += rows(stream, stream.partitions(start, end))
            start, batches = end, batches + 1
            assert batches <= END // 7 + 1
        assert seen == expected
        assert stream.reportLatestOffset() == offsets(topic, END)
    finally:
        stream.stop()
