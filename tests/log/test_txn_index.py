"""The aborted-transaction index file of one segment."""

from pathlib import Path

from odradek.broker.log.txn_index import ENTRY_SIZE, AbortedTxnEntry, TransactionIndex

A = AbortedTxnEntry(1, 0, 10, 5)  # producer 1's transaction at 0..10; producer 2's still open from 5
B = AbortedTxnEntry(2, 5, 20, 21)
C = AbortedTxnEntry(3, 30, 40, 41)


def test_entries_persist_in_marker_order_and_duplicates_are_ignored(tmp_path: Path) -> None:
    index = TransactionIndex(tmp_path / "0.txnindex")
    assert not index.path.exists() and index.entries == []
    for entry in (A, C):
        assert index.add(entry)
    assert not index.add(C)  # a replay meets the same marker again
    assert index.add(B)  # a missing one in the middle is inserted in order
    index.sync()
    assert index.path.stat().st_size == 3 * ENTRY_SIZE
    assert TransactionIndex(index.path).entries == [A, B, C]


def test_collect_stops_at_an_entry_whose_last_stable_offset_reaches_the_bound(tmp_path: Path) -> None:
    index = TransactionIndex(tmp_path / "0.txnindex")
    for entry in (A, B, C):
        index.add(entry)
    assert index.collect(0, 100) == ([A, B, C], False)
    assert index.collect(11, 100) == ([B, C], False)
    assert index.collect(0, 6) == ([A, B], True)  # A's LSO (5) < 6: B may still overlap, and does; B's ends it
    assert index.collect(0, 21) == ([A, B], True)  # B's LSO 21 >= 21: nothing later can overlap
    assert index.collect(41, 50) == ([], False)


def test_truncation_and_a_torn_file(tmp_path: Path) -> None:
    index = TransactionIndex(tmp_path / "0.txnindex")
    for entry in (A, B, C):
        index.add(entry)
    index.truncate_to(20)  # B's marker at 20 is gone
    assert index.entries == [A]
    assert TransactionIndex(index.path).entries == [A]
    with open(index.path, "ab") as f:
        f.write(b"\x00" * 7)
    assert not TransactionIndex(index.path).check()
    index.reset()
    assert index.entries == [] and index.path.stat().st_size == 0
