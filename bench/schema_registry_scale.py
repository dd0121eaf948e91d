#!/usr/bin/env python3
"""The schema registry at scale, with a writer failover and a broker that joins later, on a 1+4 dev cluster (RF 3):

1. register N distinct schemas (default 10,000) through the writer (the leader of ``_schemas`` partition 0) from a
   few threads, and time it (registrations per second, latency percentiles);
2. check the ids: unique and dense (1..N, as this registry gives them out);
3. SIGKILL the writer; time until a registration through another broker succeeds, and check its id is N+1 (no id
   given twice, none skipped);
4. check every schema reads back, by id, from every running broker, and time those reads (cached lookups, what
   Confluent's deserializers make once per id);
5. start a fourth broker that was not running before, and time until its registry serves all N+1.

Prints the figures; exits 1 if any check fails.

    python bench/schema_registry_scale.py [--schemas 10000] [--threads 4]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from odradek.client.admin import Admin
from odradek.deploy.local import DevCluster

sys.path.insert(0, str(Path(__file__).resolve().parent))
from schema_registry_bench import Connection  # the sibling benchmark's keep-alive HTTP client


def schema(i: int) -> str:
    return json.dumps({"type": "record", "name": f"S{i}", "fields": [{"name": "a", "type": "long"}]})


def url_of(cluster: DevCluster, node_id: int) -> str:
    return f"http://127.0.0.1:{cluster.node(node_id).schema_registry_port}"


def wait(condition, timeout: float, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
        except Exception as e:  # a node starting or failing over: keep asking
            last = e
        time.sleep(0.2)
    raise SystemExit(f"FAILED: {what} not within {timeout:.0f}s (last error: {last})")


def register_all(url: str, count: int, threads: int) -> tuple[dict[int, int], list[float], float]:
    """Register schema(0..count-1) under subjects of 100 versions; return {i: id}, latencies (s) and seconds."""
    local = threading.local()

    def one(i: int) -> tuple[int, int, float]:
        if not hasattr(local, "conn"):
            local.conn = Connection(url)
        start = time.perf_counter()
        answer = local.conn.call("POST", f"/subjects/scale-{i // 100}/versions", {"schema": schema(i)})
        return i, answer["id"], time.perf_counter() - start  # type: ignore[index]

    ids: dict[int, int] = {}
    latencies: list[float] = []
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        for i, schema_id, latency in pool.map(one, range(count)):
            ids[i] = schema_id
            latencies.append(latency)
    return ids, latencies, time.perf_counter() - start


def read_all(url: str, ids: dict[int, int]) -> tuple[int, float]:
    """Read every id back from one broker; return how many differ from what was registered, and seconds."""
    conn = Connection(url)
    wrong = 0
    start = time.perf_counter()
    for i, schema_id in ids.items():
        answer = conn.call("GET", f"/schemas/ids/{schema_id}")
        if json.loads(answer["schema"]) != json.loads(schema(i)):  # type: ignore[index]
            wrong += 1
    return wrong, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schemas", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args()
    failures: list[str] = []
    with tempfile.TemporaryDirectory() as directory:
        cluster = DevCluster.create(Path(directory), 1, 4, schema_registry=True)
        brokers = [n.node_id for n in cluster.nodes if "broker" in n.roles]
        late = brokers[-1]
        for n in cluster.nodes:
            if n.node_id != late:
                cluster.start(n.node_id)
        try:
            with Admin(
                {"bootstrap.servers": f"127.0.0.1:{cluster.node(brokers[0]).broker_port}", "request.timeout.ms": 10000}
            ) as admin:
                wait(lambda: len(admin.describe_cluster().brokers) == 3, 90, "three brokers registered")
                for b in brokers[:-1]:
                    wait(lambda b=b: Connection(url_of(cluster, b)).call("GET", "/subjects") == [], 60, f"registry {b}")
                writer = admin.describe_topic("_schemas").partitions[0].leader
                Connection(url_of(cluster, writer)).call("PUT", "/config", {"compatibility": "NONE"})

                ids, latencies, seconds = register_all(url_of(cluster, writer), args.schemas, args.threads)
                quantiles = statistics.quantiles(latencies, n=100)
                print(
                    f"registered {args.schemas} schemas through the writer (broker {writer}), {args.threads} threads:"
                )
                print(
                    f"  {args.schemas / seconds:.0f}/s; latency p50 {quantiles[49] * 1000:.1f} ms, "
                    f"p99 {quantiles[98] * 1000:.1f} ms, max {max(latencies) * 1000:.1f} ms"
                )
                dense = sorted(ids.values()) == list(range(1, args.schemas + 1))
                print(f"  ids unique and dense 1..{args.schemas}: {dense}")
                if not dense:
                    failures.append("ids are not unique and dense 1..N")

                survivors = [b for b in brokers[:-1] if b != writer]
                cluster.signal(writer, signal.SIGKILL)
                killed = time.monotonic()
                after = Connection(url_of(cluster, survivors[0]))

                def register_after() -> int | None:
                    answer = after.call("POST", "/subjects/after-failover/versions", {"schema": schema(args.schemas)})
                    return answer["id"]  # type: ignore[index,no-any-return]

                new_id = wait(register_after, 60, "a registration after the writer was killed")
                print(
                    f"writer killed: a registration through broker {survivors[0]} succeeded after "
                    f"{time.monotonic() - killed:.1f} s, id {new_id} (expected {args.schemas + 1})"
                )
                if new_id != args.schemas + 1:
                    failures.append(f"the first id after the failover is {new_id}, not {args.schemas + 1}")
                ids[args.schemas] = new_id

                for b in survivors:
                    url = url_of(cluster, b)
                    wait(
                        lambda url=url: Connection(url).call("GET", f"/schemas/ids/{new_id}"), 30, f"id {new_id} at {b}"
                    )
                    wrong, took = read_all(url, ids)
                    print(f"broker {b}: read all {len(ids)} ids back, {wrong} wrong, {len(ids) / took:.0f} reads/s")
                    if wrong:
                        failures.append(f"broker {b} answered {wrong} ids wrong")

                cluster.start(late)
                started = time.monotonic()
                url = url_of(cluster, late)
                wait(
                    lambda: Connection(url).call("GET", f"/schemas/ids/{new_id}"), 120, f"the new broker {late}'s copy"
                )
                print(f"broker {late} started later: serves id {new_id} after {time.monotonic() - started:.1f} s")
                wrong, took = read_all(url, ids)
                print(f"broker {late}: read all {len(ids)} ids back, {wrong} wrong, {len(ids) / took:.0f} reads/s")
                if wrong:
                    failures.append(f"the new broker {late} answered {wrong} ids wrong")
        finally:
            cluster.stop_all(timeout=10)
    if failures:
        print("FAILED: " + "; ".join(failures))
        raise SystemExit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
