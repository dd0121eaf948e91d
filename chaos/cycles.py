"""Cycles of dependencies between committed operations (G1c and its process and real-time variants, as Elle names
them): the graph the transactional checkers build from a history, and the search for its cycles.

A node is an operation that took effect: a committed transaction (or one of unknown outcome that the final read
shows committed), a write made without a transaction, or one record a ``read_committed`` reader read. Each has a
moment at which it took effect, its *commit point*: when the coordinator decided the commit, when the broker
appended the record, when the reader fetched the record. An edge ``a -> b`` is built only where the history proves
that a correct system put ``a``'s commit point before ``b``'s, so a cycle is impossible in a correct run:

- ``wr``: ``b`` read a record that ``a`` wrote. ``read_committed`` returns a record only once its transaction
  committed, and a reader reads before it commits.
- ``lso``: ``b`` read a record of a partition at a higher offset than a record of ``a``. ``read_committed``
  returns nothing at or above the first record of a transaction still open (the last stable offset), and offsets
  are handed out in append order, so ``a`` was decided, or its plain write appended, before ``b`` read.
- ``process``: ``a`` and ``b`` are transactions of one producer, ``a`` first. A producer begins a transaction only
  once the previous one's commit returned, or once a new instance's ``init_transactions()`` completed it.
- ``realtime``: ``a`` had taken effect (its commit returned, its write was acknowledged, its read was recorded)
  before ``b`` could (its commit was invoked, its write sent).

Log order is not an edge (``ww``): two transactions that write partitions A and B in opposite orders may each come
first in one of them, and both commit; within a partition, the append order of transactions is not their commit
order either. Such write cycles are legitimate in Kafka, which promises atomic visibility, not serializable writes.

Real-time and ``lso`` edges are built as chains: one node per distinct invocation time, and per partition one node
per distinct offset read, linked in order, so the graph stays linear in the history (its edge counts are those of
the chains). A cycle found through a chain is reported with the chain folded into one edge.
``find_cycles`` is pure; ``strongly_connected`` is Tarjan's algorithm without recursion.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise

Location = tuple[str, int, int]  # topic, partition, offset
EDGE_KINDS = ("wr", "lso", "process", "realtime")


@dataclass(slots=True)
class Op:
    """One node. ``after`` and ``before`` bound its commit point (None: unknown); ``process`` names the sequence it
    belongs to (consecutive operations of one process, in the order given, each decided before the next began);
    ``writes`` and ``reads`` are records with their locations (a write's, as the final read found it)."""

    name: str
    kind: str = "txn"  # "txn", "write" (without a transaction) or "read" (read-only)
    after: float | None = None
    before: float | None = None
    process: str = ""
    writes: list[tuple[Location, str]] = field(default_factory=list)
    reads: list[tuple[Location, str]] = field(default_factory=list)


@dataclass(slots=True)
class Graph:
    """Nodes ``0 .. len(ops) - 1`` are the operations; the rest are the chains' links (``links[node]``: the kind
    of chain, and the time or the location it stands for)."""

    ops: list[Op]
    successors: list[list[int]]
    links: dict[int, tuple[str, float | Location]]
    labels: dict[tuple[int, int], tuple[str, dict[str, object]]]  # (from, to) -> kind, what proves it
    edges: Counter[str]

    def node(self, link: tuple[str, float | Location]) -> int:
        self.successors.append([])
        self.links[len(self.successors) - 1] = link
        return len(self.successors) - 1

    def edge(self, a: int, b: int, kind: str, proof: dict[str, object] | None = None) -> None:
        self.successors[a].append(b)
        self.edges[kind] += 1
        if proof is not None:
            self.labels.setdefault((a, b), (kind, proof))


def _loc(location: Location) -> dict[str, object]:
    return {"topic": location[0], "partition": location[1], "offset": location[2]}


def build(ops: Sequence[Op]) -> Graph:
    """The dependency graph of ``ops``."""
    graph = Graph(list(ops), [[] for _ in ops], {}, {}, Counter())
    writer: dict[str, int] = {}
    for i, op in enumerate(ops):
        for _, value in op.writes:
            writer.setdefault(value, i)
    for i, op in enumerate(ops):
        for location, value in op.reads:
            w = writer.get(value)
            if w is not None and w != i:
                graph.edge(w, i, "wr", {"value": value, **_loc(location)})
    last: dict[str, int] = {}
    for i, op in enumerate(ops):
        if op.process:
            if op.process in last:
                graph.edge(last[op.process], i, "process", {"process": op.process})
            last[op.process] = i
    _realtime(graph)
    _lso(graph)
    return graph


def _realtime(graph: Graph) -> None:
    """A chain of the distinct ``after`` times: an operation enters it at the first time past its ``before`` and
    leaves it at its own ``after``, so a path exists exactly when ``a.before < b.after``."""
    times = sorted({op.after for op in graph.ops if op.after is not None})
    links = [graph.node(("realtime", t)) for t in times]
    for a, b in pairwise(links):
        graph.edge(a, b, "realtime")
    for i, op in enumerate(graph.ops):
        if op.after is not None:
            graph.edge(links[bisect_right(times, op.after) - 1], i, "realtime")
        if op.before is not None:
            k = bisect_right(times, op.before)
            if k < len(links):
                graph.edge(i, links[k], "realtime")


def _lso(graph: Graph) -> None:
    """Per partition, a chain of the distinct offsets read: a writer enters it at the first offset read past its
    first record there, a read leaves it at the offset it read."""
    read_at: dict[tuple[str, int], dict[int, list[int]]] = {}
    for i, op in enumerate(graph.ops):
        for (topic, partition, offset), _ in op.reads:
            read_at.setdefault((topic, partition), {}).setdefault(offset, []).append(i)
    first: dict[tuple[str, int], dict[int, int]] = {}  # partition -> writer -> its lowest offset there
    for i, op in enumerate(graph.ops):
        for (topic, partition, offset), _ in op.writes:
            lowest = first.setdefault((topic, partition), {})
            lowest[i] = min(offset, lowest.get(i, offset))
    for (topic, partition), readers in read_at.items():
        offsets = sorted(readers)
        links = [graph.node(("lso", (topic, partition, o))) for o in offsets]
        for a, b in pairwise(links):
            graph.edge(a, b, "lso")
        for link, o in zip(links, offsets):
            for i in readers[o]:
                graph.edge(link, i, "lso")
        for i, offset in first.get((topic, partition), {}).items():
            k = bisect_right(offsets, offset)
            if k < len(links):
                graph.edge(i, links[k], "lso", {**_loc((topic, partition, offset))})


def strongly_connected(successors: Sequence[Sequence[int]]) -> list[list[int]]:
    """Tarjan's strongly connected components, iteratively (a history's graph is far deeper than Python's stack)."""
    n = len(successors)
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    stack: list[int] = []
    components: list[list[int]] = []
    counter = 0
    for root in range(n):
        if index[root] != -1:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        work = [root]  # the DFS path
        position = [0]  # the next successor to visit, per node on the path
        while work:
            v = work[-1]
            if position[-1] < len(successors[v]):
                w = successors[v][position[-1]]
                position[-1] += 1
                if index[w] == -1:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack[w] = True
                    work.append(w)
                    position.append(0)
                elif on_stack[w]:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            position.pop()
            if work:
                low[work[-1]] = min(low[work[-1]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    component.append(w)
                    if w == v:
                        break
                components.append(component)
    return components


def _shortest_cycle(graph: Graph, start: int, member: set[int]) -> list[int]:
    """The shortest cycle through ``start`` within a strongly connected component (``member``), as the nodes from
    ``start`` back to it (breadth-first)."""
    parent: dict[int, int] = {start: start}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        for w in graph.successors[v]:
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return [*reversed(path), start]
            if w in member and w not in parent:
                parent[w] = v
                queue.append(w)
    raise AssertionError("a strongly connected component holds a cycle through each of its nodes")


def _steps(graph: Graph, path: list[int]) -> list[dict[str, object]]:
    """The cycle's edges between operations, each chain folded into one edge."""
    steps: list[dict[str, object]] = []
    i = 0
    while i < len(path) - 1:
        a = path[i]
        j = i + 1
        while path[j] in graph.links:  # through a chain to the next operation
            j += 1
        b = path[j]
        op_a, op_b = graph.ops[a], graph.ops[b]
        step: dict[str, object] = {"from": op_a.name}
        if j == i + 1:
            kind, proof = graph.labels[(a, b)]
            step |= {"edge": kind, **proof}
        else:
            kind, _ = graph.links[path[i + 1]]
            step["edge"] = kind
            if kind == "realtime":
                step |= {"took_effect_by": op_a.before, "not_before": op_b.after}
            else:
                _, proof = graph.labels[(a, path[i + 1])]
                read = graph.links[path[j - 1]][1]
                assert isinstance(read, tuple)
                step |= {**proof, "read_offset": read[2]}
        step["to"] = op_b.name
        steps.append(step)
        i = j
    return steps


def anomaly(kinds: set[str]) -> str:
    """Elle's name for a cycle of these edge kinds: read dependencies alone make G1c; with a real-time edge it is
    G1c-realtime, else with a process edge G1c-process."""
    if "realtime" in kinds:
        return "G1c-realtime"
    return "G1c-process" if "process" in kinds else "G1c"


@dataclass(slots=True)
class Cycles:
    """The search's outcome: ``cycles`` holds one shortest cycle per cyclic component (``components`` of them)."""

    nodes: int
    edges: Counter[str]
    components: int = 0
    cyclic_ops: int = 0  # operations in cyclic components
    cycles: list[dict[str, object]] = field(default_factory=list)


START_TRIES = 8  # operations of a component a cycle is looked for from; the shortest cycle found is reported


def find_cycles(ops: Sequence[Op], limit: int = 10) -> Cycles:
    """The dependency graph of ``ops`` and its cycles: every cyclic component is counted, the first ``limit``
    (in the order of ``ops``) get an example."""
    graph = build(ops)
    found = Cycles(len(graph.ops), graph.edges)
    components: list[tuple[list[int], set[int]]] = []
    for component in strongly_connected(graph.successors):
        real = sorted(v for v in component if v not in graph.links)
        if len(component) > 1 and real:  # a chain is acyclic: a cycle passes through an operation
            components.append((real, set(component)))
    components.sort(key=lambda c: c[0][0])
    for real, member in components:
        found.components += 1
        found.cyclic_ops += len(real)
        if len(found.cycles) >= limit:
            continue
        paths = [_shortest_cycle(graph, start, member) for start in real[:START_TRIES]]
        steps = min((_steps(graph, p) for p in paths), key=len)
        text = str(steps[0]["from"]) + "".join(f" -{s['edge']}-> {s['to']}" for s in steps)
        found.cycles.append(
            {
                "anomaly": anomaly({str(s["edge"]) for s in steps}),
                "cycle": text,
                "operations_in_component": len(real),
                "steps": steps,
            }
        )
    return found
