"""The dependency graph and its cycle search on hand-built operations: each edge kind is built only where a correct
system orders the two commit points, a cycle of each kind is found and named (G1c, G1c-process, G1c-realtime), and
what Kafka allows (transactions writing two partitions in opposite orders, reads at or below an open record) makes
none."""

from __future__ import annotations

from odradek.chaos.cycles import Op, build, find_cycles, strongly_connected

T = "chaos"


def txn(name: str, after: float, before: float | None, writes=(), reads=(), process: str = "") -> Op:
    """A committed transaction; ``writes`` and ``reads`` are ``(partition, offset, value)``."""
    return Op(
        name,
        "txn",
        after,
        before,
        process,
        writes=[((T, p, o), v) for p, o, v in writes],
        reads=[((T, p, o), v) for p, o, v in reads],
    )


def read(name: str, at: float, partition: int, offset: int, value: str) -> Op:
    return Op(name, "read", None, at, reads=[((T, partition, offset), value)])


def test_a_read_after_the_commit_makes_an_edge_and_no_cycle() -> None:
    ops = [txn("t0", 1.0, 2.0, writes=[(0, 0, "a")]), read("r0", 3.0, 0, 0, "a"), txn("t1", 4.0, 5.0)]
    found = find_cycles(ops)
    assert (found.nodes, found.components, found.cycles) == (3, 0, [])
    assert found.edges["wr"] == 1 and found.edges["realtime"] > 0


def test_two_transactions_that_read_each_others_writes_are_a_g1c() -> None:
    """t0 read b, which t1 wrote, and t1 read a, which t0 wrote: each must have committed before the other."""
    ops = [
        txn("t0", 2.0, 3.0, writes=[(0, 0, "a")], reads=[(1, 0, "b")]),
        txn("t1", 2.0, 3.0, writes=[(1, 0, "b")], reads=[(0, 0, "a")]),
    ]
    found = find_cycles(ops)
    assert found.components == 1 and found.cyclic_ops == 2
    cycle = found.cycles[0]
    assert cycle["anomaly"] == "G1c" and cycle["cycle"] == "t0 -wr-> t1 -wr-> t0", cycle
    assert cycle["steps"] == [
        {"from": "t0", "edge": "wr", "value": "a", "topic": T, "partition": 0, "offset": 0, "to": "t1"},
        {"from": "t1", "edge": "wr", "value": "b", "topic": T, "partition": 1, "offset": 0, "to": "t0"},
    ]


def test_opposite_write_orders_in_two_partitions_are_no_cycle() -> None:
    """t0 is first in partition 0 and t1 first in partition 1, both committed: Kafka allows it (no ww edges)."""
    ops = [
        txn("t0", 2.0, 3.0, writes=[(0, 0, "a0"), (1, 1, "a1")]),
        txn("t1", 2.0, 3.0, writes=[(1, 0, "b1"), (0, 1, "b0")]),
        read("r0", 4.0, 0, 1, "b0"),
        read("r0", 4.0, 1, 1, "a1"),
    ]
    found = find_cycles(ops)
    assert found.components == 0 and found.edges["wr"] == 2


def test_a_read_before_its_writer_committed_is_a_g1c_realtime() -> None:
    ops = [txn("t0", 2.0, 3.0, writes=[(0, 0, "a")]), read("r0 read 0/0", 1.5, 0, 0, "a")]
    cycle = find_cycles(ops).cycles[0]
    assert cycle["anomaly"] == "G1c-realtime" and cycle["cycle"] == "t0 -wr-> r0 read 0/0 -realtime-> t0"
    assert cycle["steps"][1] == {
        "from": "r0 read 0/0",
        "edge": "realtime",
        "took_effect_by": 1.5,
        "not_before": 2.0,
        "to": "t0",
    }


def test_equal_times_order_nothing() -> None:
    ops = [txn("t0", 2.0, 3.0, writes=[(0, 0, "a")]), read("r0", 2.0, 0, 0, "a")]
    assert find_cycles(ops).components == 0


def test_a_read_past_an_open_transactions_record_is_a_cycle_through_lso() -> None:
    """r0 read offset 7 at 1.0 while t0's record at 5 was open (t0's commit was invoked at 2.0): the last stable
    offset forbids it. At or below 5 it is fine."""
    t0 = txn("t0", 2.0, 3.0, writes=[(0, 5, "a")])
    t1 = txn("t1", 0.1, 0.2, writes=[(0, 7, "b")])
    cycle = find_cycles([t0, t1, read("r0", 1.0, 0, 7, "b")]).cycles[0]
    assert cycle["anomaly"] == "G1c-realtime" and cycle["cycle"] == "t0 -lso-> r0 -realtime-> t0"
    assert cycle["steps"][0] == {
        "from": "t0",
        "edge": "lso",
        "topic": T,
        "partition": 0,
        "offset": 5,
        "read_offset": 7,
        "to": "r0",
    }
    t2 = txn("t2", 0.1, 0.2, writes=[(0, 4, "c")])
    assert find_cycles([t0, t2, read("r0", 1.0, 0, 4, "c")]).components == 0
    assert find_cycles([t0, read("r0", 1.0, 1, 7, "b")]).components == 0  # another partition


def test_a_producers_order_makes_a_g1c_process() -> None:
    """t1 began after t0 (same producer), t0 read what t1 wrote; no time says it (t1's commit outcome unknown)."""
    ops = [
        txn("t0", 2.0, 3.0, reads=[(0, 0, "b")], process="tp0"),
        txn("t1", 4.0, None, writes=[(0, 0, "b")], process="tp0"),
    ]
    cycle = find_cycles(ops).cycles[0]
    assert cycle["anomaly"] == "G1c-process" and cycle["cycle"] == "t0 -process-> t1 -wr-> t0"


def test_a_copier_that_copied_a_record_not_yet_sent_closes_a_cycle() -> None:
    """The copier's commit returned at 3.0, the plain write it read was sent at 4.0."""
    ops = [
        Op("write a", "write", 4.0, 4.5, writes=[(("in", 0, 0), "a")]),
        Op("x0-1", "txn", 2.0, 3.0, reads=[(("in", 0, 0), "a")], writes=[(("out", 0, 0), "a@x0-1")]),
    ]
    assert find_cycles(ops).cycles[0]["cycle"] == "write a -wr-> x0-1 -realtime-> write a"


def test_components_are_all_counted_and_examples_limited() -> None:
    ops = []
    for i in range(5):
        ops += [
            txn(f"t{i}", 10.0 * i + 2, 10.0 * i + 3, writes=[(0, i, f"v{i}")]),
            read(f"r{i}", 10.0 * i + 1, 0, i, f"v{i}"),
        ]
    found = find_cycles(ops, limit=2)
    assert (found.components, found.cyclic_ops, len(found.cycles)) == (5, 10, 2)
    assert [c["cycle"] for c in found.cycles] == ["t0 -wr-> r0 -realtime-> t0", "t1 -wr-> r1 -realtime-> t1"]


def test_tarjan_needs_no_recursion_on_long_paths() -> None:
    n = 200_000
    ring = [[i + 1] for i in range(n - 1)] + [[0]]
    assert [len(c) for c in strongly_connected(ring)] == [n]
    path = [[i + 1] for i in range(n - 1)] + [[]]
    assert len(strongly_connected(path)) == n


def test_tarjan_separates_components() -> None:
    successors = [[1], [2], [0, 3], [4], [3], []]
    assert sorted(sorted(c) for c in strongly_connected(successors)) == [[0, 1, 2], [3, 4], [5]]


def test_chains_keep_the_graph_linear() -> None:
    """n transactions one after another and n reads: real-time order of every pair, in O(n) edges."""
    n = 2000
    ops = [txn(f"t{i}", 2.0 * i, 2.0 * i + 1, writes=[(0, i, f"v{i}")]) for i in range(n)]
    ops += [read(f"r{i}", 2.0 * n + i, 0, i, f"v{i}") for i in range(n)]
    graph = build(ops)
    assert sum(graph.edges.values()) < 10 * n
    assert find_cycles(ops).components == 0
