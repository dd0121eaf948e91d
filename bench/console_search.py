#!/usr/bin/env python3
"""The console's server-side record search (``POST .../records:search``, docs/console.md) over a large topic.

Starts a 1+1 dev cluster with the HTTP API, fills a topic with ``--records`` small records (1,000,000 by default:
keys ``key-0000000``..., JSON values of about 40 bytes, one header) with odradek's producer, then, paging with the
search's cursor until every partition is at its end, times:

- a scan that matches nothing (a value substring no record has): records scanned per second, whole pages;
- a value-substring search for the two records that hold it, one near the start and one near the end, one match a
  page: the time to the first match and to the last (from the first request);
- an exact key and a JSON path search for the record near the end, and a header search for both (full scans);
- a producer (another process, to another topic) alone for ``--window`` seconds, then with searches running over
  the same window: both rates, and the producer's with the search over its rate alone (in the same run);
- the searches again with a fetch quota (``--quota`` bytes/s) on the searching user (``ANONYMOUS``: the cluster
  does not authenticate): the bytes/s they read (the broker's own quota sensor, and records scanned times the
  topic's bytes per record) against the quota. The pages are the console's: 200,000 records a request.

    python bench/console_search.py [--records 1000000] [--partitions 1] [--timeout-ms 60000] [--window 8]
        [--quota 4000000]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import re
import time
import urllib.request
from typing import Any

from odradek.client import Producer
from odradek.client.admin import Admin
from odradek.deploy.local import running_cluster

TOPIC = "search-bench"
LOAD = "search-bench-load"
CONSOLE_PAGE = 200_000  # records a request, as the console's default


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


def load(bootstrap: str, seconds: float, done: Any) -> None:
    """A producer of 100-byte records for ``seconds`` (in a process of its own): its records/s into ``done``."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "1"})
    value, sent = b"v" * 100, 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        for _ in range(100):
            producer.send(LOAD, value)
        sent += 100
    producer.flush()
    done.put(sent / (time.perf_counter() - started))
    producer.close()


def searching(url: str, seconds: float, timeout_ms: int) -> tuple[int, float]:
    """Searches that match nothing, paged as the console pages, over and over for ``seconds``: records scanned and
    the time taken."""
    body: dict[str, Any] = {"filter": {"value_contains": "no record has this"}, "max_scanned": CONSOLE_PAGE}
    body["timeout_ms"] = timeout_ms
    scanned, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        page = post(url, body)
        scanned += page["scanned"]
        body.pop("cursor", None)
        if page["cursor"] is not None:
            body["cursor"] = page["cursor"]
    return scanned, time.perf_counter() - started


def producer_rate(bootstrap: str, seconds: float, search: str | None, timeout_ms: int) -> tuple[float, float]:
    """The producer's records/s over ``seconds``, and the search's records/s meanwhile (with ``search``, its URL)."""
    spawn = multiprocessing.get_context("spawn")
    done = spawn.Queue()
    process = spawn.Process(target=load, args=(bootstrap, seconds, done))
    process.start()
    rate = 0.0
    if search is not None:
        time.sleep(1)  # the producer connected and going
        scanned, took = searching(search, seconds - 2, timeout_ms)
        rate = scanned / took
    produced = float(done.get(timeout=seconds + 120))
    process.join()
    return produced, rate


def fetch_sensor(metrics: str) -> float:
    """The broker's fetch quota sensor of the searching user, bytes/s."""
    with urllib.request.urlopen(metrics, timeout=10) as answer:
        text = answer.read().decode()
    found = re.search(r'odradek_quota_fetch_byte_rate\{client_id="",user="ANONYMOUS"\} ([0-9.e+]+)', text)
    return float(found.group(1)) if found else 0.0


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
    parser.add_argument("--window", type=float, default=8.0, help="seconds of each producer and quota measurement")
    parser.add_argument("--quota", type=int, default=4_000_000, help="the searching user's fetch quota, bytes/s")
    args = parser.parse_args()
    early, late = args.records // 1000, args.records - args.records // 1000
    with running_cluster(1, 1, http_api=True) as cluster:  # in a temporary directory, deleted after
        admin = Admin({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topic(TOPIC, args.partitions, 1)
        admin.create_topic(LOAD, 1, 1)
        admin.close()
        took = fill(cluster.bootstrap_servers, args.records, args.partitions, {early, late})
        print(f"filled {args.records:,} records in {took:.1f} s ({args.records / took:,.0f} records/s)")
        url = f"{cluster.http_urls.split(',')[0]}/v3/clusters/{cluster.cluster_id}/topics/{TOPIC}/records:search"
        report("no match", scan(url, {"value_contains": "no record has this"}, 100, args.timeout_ms))
        report("value substring", scan(url, {"value_contains": '"needle"'}, 1, args.timeout_ms))
        report("exact key", scan(url, {"key": f"key-{late:07d}"}, 100, args.timeout_ms))
        report("header value", scan(url, {"header": "trace", "header_value": "found"}, 100, args.timeout_ms))
        report("JSON path", scan(url, {"json_path": "$.n", "json_value": late}, 100, args.timeout_ms))

        alone, _ = producer_rate(cluster.bootstrap_servers, args.window, None, args.timeout_ms)
        beside, search_rate = producer_rate(cluster.bootstrap_servers, args.window, url, args.timeout_ms)
        print(
            f"producer alone {alone:,.0f} records/s; with searches running {beside:,.0f} records/s "
            f"({beside / alone:.2f} of alone), the searches meanwhile {search_rate:,.0f} records/s",
            flush=True,
        )

        base = url.split("/topics/")[0]
        details = json.loads(urllib.request.urlopen(f"{base}/topics/{TOPIC}/details", timeout=30).read())
        per_record = sum(p["size_bytes"] or 0 for p in details["partitions"]) / args.records
        entity = [{"entity_type": "user", "name": "ANONYMOUS"}]
        post_quota = {"entity": entity, "set": {"consumer_byte_rate": args.quota}}
        request = urllib.request.Request(f"{base}/client-quotas:alter", json.dumps(post_quota).encode(), method="POST")
        request.add_header("Content-Type", "application/json")
        urllib.request.urlopen(request, timeout=30).close()
        time.sleep(1)  # the quota reaches the broker
        searching(url, 3, args.timeout_ms)  # the quota window fills
        scanned, took = searching(url, args.window, args.timeout_ms)
        node = next(n for n in cluster.nodes if n.http_port)
        sensor = fetch_sensor(f"http://127.0.0.1:{node.metrics_port}/metrics")
        measured = scanned * per_record / took
        print(
            f"with a fetch quota of {args.quota:,} bytes/s: {scanned / took:,.0f} records/s, {measured:,.0f} bytes/s "
            f"({measured / args.quota:.2f} of the quota; {per_record:.0f} bytes a record); the broker's quota sensor "
            f"{sensor:,.0f} bytes/s ({sensor / args.quota:.2f})",
            flush=True,
        )


if __name__ == "__main__":
    main()
