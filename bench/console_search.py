#!/usr/bin/env python3
"""The console's server-side record search (``POST .../records:search``, docs/console.md) over a large topic.

Starts a 1+1 dev cluster with the HTTP API, fills a topic with ``--records`` small records (1,000,000 by default:
keys ``key-0000000``..., JSON values of about 40 bytes, one header) with odradek's producer, then, paging with the
search's cursor until every partition is at its end, times:

- a scan that matches nothing (a value substring no record has): records scanned per second, whole pages;
- a value-substring search for the two records that hold it, one near the start and one near the end, one match a
  page: the time to the first match and to the last (from the first request);
- an exact key and a JSON path search for the record near the end, and a header search for both (full scans).

    python bench/console_search.py [--records 1000000] [--partitions 1] [--timeout-ms 60000]
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.request
from typing import Any

from odradek.client import Producer
from odradek.client.admin import Admin
from odradek.deploy.local import running_cluster

TOPIC = "search-bench"


def post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=600) as answer:
        found: dict[str, Any] = json.loads(answer.read())
        return found


def fill(bootstrap: str, records: int, partitions: int, needles: set[int]) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 256 * 1024, "acks": "1"})
    started = time.perf_counter()
    try:
        for i in range(records):
            kind = "needle" if i in needles else "hay"
            value = b'{"n": %d, "kind": "%s", "pad": "xxxxxxxx"}' % (i, kind.encode())
            headers = [("source", b"bench-%d" % (i % 10))] + ([("trace", b"found")] if i in needles else [])
            producer.send(TOPIC, value, b"key-%07d" % i, i % partitions, headers)
        producer.flush()
    finally:
        producer.close()
    return time.perf_counter() - started


def scan(url: str, filter_: dict[str, Any], max_matches: int, timeout_ms: int) -> dict[str, Any]:
    """Page through the whole topic; the times of each match's page and the totals."""
    body: dict[str, Any] = {"filter": filter_, "max_matches": max_matches, "max_scanned": 10_000_000}
    body["timeout_ms"] = timeout_ms
    started = time.perf_counter()
    matches: list[tuple[float, int]] = []
    scanned = pages = 0
    while True:
        page = post(url, body)
        pages += 1
        scanned += page["scanned"]
        at = time.perf_counter() - started
        matches += [(at, r["offset"]) for r in page["data"]]
        if page["cursor"] is None:
            return {"seconds": time.perf_counter() - started, "scanned": scanned, "pages": pages, "matches": matches}
        body["cursor"] = page["cursor"]


def report(name: str, found: dict[str, Any]) -> None:
    rate = found["scanned"] / found["seconds"]
    line = (
        f"{name:<24} {found['scanned']:>9,} scanned in {found['seconds']:6.2f} s ({rate:>9,.0f} records/s, "
        f"{found['pages']} page(s))"
    )
    if found["matches"]:
        first, last = found["matches"][0], found["matches"][-1]
        line += f"; {len(found['matches'])} match(es): first (offset {first[1]:,}) at {first[0]:.3f} s"
        line += f", last (offset {last[1]:,}) at {last[0]:.3f} s"
    print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--timeout-ms", type=int, default=60_000, help="one page's time bound")
    args = parser.parse_args()
    early, late = args.records // 1000, args.records - args.records // 1000
    with running_cluster(1, 1, http_api=True) as cluster:  # in a temporary directory, deleted after
        admin = Admin({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topic(TOPIC, args.partitions, 1)
        admin.close()
        took = fill(cluster.bootstrap_servers, args.records, args.partitions, {early, late})
        print(f"filled {args.records:,} records in {took:.1f} s ({args.records / took:,.0f} records/s)")
        url = f"{cluster.http_urls.split(',')[0]}/v3/clusters/{cluster.cluster_id}/topics/{TOPIC}/records:search"
        report("no match", scan(url, {"value_contains": "no record has this"}, 100, args.timeout_ms))
        report("value substring", scan(url, {"value_contains": '"needle"'}, 1, args.timeout_ms))
        report("exact key", scan(url, {"key": f"key-{late:07d}"}, 100, args.timeout_ms))
        report("header value", scan(url, {"header": "trace", "header_value": "found"}, 100, args.timeout_ms))
        report("JSON path", scan(url, {"json_path": "$.n", "json_value": late}, 100, args.timeout_ms))


if __name__ == "__main__":
    main()
