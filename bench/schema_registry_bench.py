#!/usr/bin/env python3
"""What a schema registry request costs, against baselines measured in the same run on a 1+3 dev cluster (RF 3):

- a registration of a new schema (one acks=all append to ``_schemas``, then applied by the writer's copy) through
  the writer, and through another broker (forwarded, then applied by that broker's copy too), one at a time,
  against one acks=all produce of a record of the same size to a topic of RF 3 with odradek's producer;
- a read of a schema by id (``GET /schemas/ids/{id}``) and a lookup under a subject (``POST /subjects/{s}``), one at
  a time on a kept-alive connection, against ``GET /`` on the same listener (the HTTP round trip alone).

    python bench/schema_registry_bench.py [--writes 200] [--reads 2000]
"""

from __future__ import annotations

import argparse
import http.client
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from odradek.client import Producer
from odradek.client.admin import Admin
from odradek.deploy.local import DevCluster


def schema(i: int) -> str:
    return json.dumps({"type": "record", "name": f"R{i}", "fields": [{"name": "a", "type": "long"}]})


class Connection:
    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=30)

    def call(self, method: str, path: str, body: object = None) -> object:
        data = None if body is None else json.dumps(body)
        self.conn.request(method, path, data, {"Content-Type": "application/vnd.schemaregistry.v1+json"})
        response = self.conn.getresponse()
        answer = json.loads(response.read())
        if response.status != 200:
            raise RuntimeError(f"{method} {path}: {response.status} {answer}")
        return answer


ROUNDS = 10


def rates(count: int, runs: dict[str, Callable[[int], object]]) -> dict[str, float]:
    """Requests per second of each of ``runs``, measured in ROUNDS interleaved slices (so that the machine's other
    load falls on all of them alike); ``run(i)`` makes request ``i``."""
    spent = dict.fromkeys(runs, 0.0)
    per_round = count // ROUNDS
    for r in range(ROUNDS):
        for name, run in runs.items():
            start = time.perf_counter()
            for i in range(r * per_round, (r + 1) * per_round):
                run(i)
            spent[name] += time.perf_counter() - start
    return {name: per_round * ROUNDS / seconds for name, seconds in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--reads", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        cluster = DevCluster.create(Path(directory), 1, 3, schema_registry=True)
        cluster.start_all_and_wait(60)
        try:
            urls = cluster.schema_registry_urls.split(",")
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    Connection(urls[0]).call("GET", "/subjects")
                    break
                except (OSError, RuntimeError):
                    time.sleep(0.5)
            with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
                admin.create_topic("baseline", 1, 3)
                leader = admin.describe_topic("_schemas").partitions[0].leader
            writer = f"http://127.0.0.1:{cluster.node(leader).schema_registry_port}"
            other = next(u for u in urls if u != writer)
            size = len(json.dumps({"schema": schema(0)}))
            direct, forwarded = Connection(writer), Connection(other)
            direct.call("PUT", "/config", {"compatibility": "NONE"})  # every registration is a new, unrelated record
            with Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"}) as producer:
                producer.send("baseline", b"x" * size).result()
                writes = rates(
                    args.writes,
                    {
                        "produce": lambda i: producer.send("baseline", b"x" * size).result(),
                        "writer": lambda i: direct.call("POST", "/subjects/w/versions", {"schema": schema(i)}),
                        "other": lambda i: forwarded.call(
                            "POST", "/subjects/f/versions", {"schema": schema(args.writes + i)}
                        ),
                    },
                )
            reader = Connection(other)
            reads = rates(
                args.reads,
                {
                    "root": lambda i: reader.call("GET", "/"),
                    "by_id": lambda i: reader.call("GET", "/schemas/ids/1"),
                    "lookup": lambda i: reader.call("POST", "/subjects/w", {"schema": schema(0)}),
                },
            )
        finally:
            cluster.stop_all(timeout=10)
    print(f"one at a time, {size}-byte bodies; 1 controller + 3 brokers, RF 3, on this machine")
    produce, root = writes["produce"], reads["root"]
    print(f"baseline acks=all produce:     {produce:8.0f}/s")
    print(f"register via the writer:       {writes['writer']:8.0f}/s  ratio {writes['writer'] / produce:.2f}")
    print(f"register via another broker:   {writes['other']:8.0f}/s  ratio {writes['other'] / produce:.2f}")
    print(f"baseline GET /:                {root:8.0f}/s")
    print(f"GET /schemas/ids/1:            {reads['by_id']:8.0f}/s  ratio {reads['by_id'] / root:.2f}")
    print(f"POST /subjects/w (lookup):     {reads['lookup']:8.0f}/s  ratio {reads['lookup'] / root:.2f}")


if __name__ == "__main__":
    main()
