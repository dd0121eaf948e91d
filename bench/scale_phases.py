"""``scale_bench.py --scale``: what a partition count costs a 1+3 cluster, phase by phase (see scale_bench's doc).

Every wait is bounded (``--timeout``); every cluster is stopped, whatever fails.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scale_spread import spread

from odradek.broker.config import NodeConfig
from odradek.client.admin import AsyncAdmin
from odradek.client.errors import OdradekError
from odradek.deploy.local import DevCluster, DevNode

TOPICS = 20
SPREAD_RECORDS = 50_000_000  # at most, per spread run: each is bounded by --seconds in practice
TICKS = os.sysconf("SC_CLK_TCK")
PY_SPY = Path.home() / ".local/bin/py-spy"
DEFAULT_MAX_PARTITIONS_PER_BROKER = 4000
PROBE_ROOM = 100


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def brokers(cluster: DevCluster) -> list[DevNode]:
    return [n for n in cluster.nodes if n.broker_port]


def idle_cpu(cluster: DevCluster, seconds: float) -> list[float]:
    """Each broker's share of one core over ``seconds`` of no client."""
    nodes = brokers(cluster)
    time.sleep(5)  # leadership and ISR changes settle
    before = {n.node_id: cpu_seconds(n.pid) for n in nodes}
    t0 = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - t0
    return [(cpu_seconds(n.pid) - before[n.node_id]) / elapsed for n in nodes]


@contextlib.contextmanager
def profiled(directory: Path | None, cluster: DevCluster, phase: str) -> Iterator[None]:
    """py-spy (raw, 50 Hz, non-blocking) on every live node for the phase, when ``--profile`` asks for it."""
    spies: list[subprocess.Popen[bytes]] = []
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
        for n in cluster.nodes:
            out = directory / f"{phase}-node{n.node_id}-{'+'.join(n.roles)}.txt"
            command = [str(PY_SPY), "record", "-p", str(n.pid), "-r", "50", "-f", "raw", "--nonblocking"]
            spies.append(
                subprocess.Popen([*command, "-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            )
    try:
        yield
    finally:
        for spy in spies:
            spy.send_signal(signal.SIGINT)
        for spy in spies:
            try:
                spy.wait(30)
            except subprocess.TimeoutExpired:
                spy.kill()
                spy.wait()


def admin_config(cluster: DevCluster, timeout_ms: int, exclude: int = -1) -> dict[str, Any]:
    servers = [f"{n.host}:{n.broker_port or n.controller_port}" for n in cluster.nodes if n.node_id != exclude]
    return {"bootstrap.servers": ",".join(servers), "request.timeout.ms": timeout_ms}


async def wait_whole(admin: AsyncAdmin, names: list[str], partitions: int, deadline: float) -> None:
    """Until each of ``partitions`` has a full ISR (3) and a leader that answers for it with its high watermark:
    the metadata alone names a leader and a full ISR from the moment the controller commits the topic, before any
    broker has created a log."""
    while True:
        with contextlib.suppress(OdradekError):
            whole = 0
            for name in names:
                info = await admin.describe_topic(name)
                whole += sum(1 for p in info.partitions if p.leader >= 0 and len(p.isr) == 3 and p.high_watermark >= 0)
            if whole == partitions:
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the partitions were not all led with a full ISR within {deadline:.0f}")
        await asyncio.sleep(1)


async def create(cluster: DevCluster, partitions: int, timeout: float) -> tuple[float, float, int]:
    """Create ``partitions`` over TOPICS topics; the seconds until every CreateTopics returned and until whole, and
    how many CreateTopics failed (a broker fenced meanwhile, its heartbeats late) and were sent again."""
    per_topic = max(1, partitions // TOPICS)
    names = [f"idle-{t}" for t in range(TOPICS)]
    deadline = time.monotonic() + timeout
    refused = 0
    async with AsyncAdmin(admin_config(cluster, 120_000)) as admin:
        t0 = time.monotonic()
        for name in names:
            while True:
                try:
                    await admin.create_topic(name, per_topic, 3)
                    break
                except OdradekError as e:
                    refused += 1
                    print(f"    CreateTopics {name} refused ({e}); again in 1 s", flush=True)
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(1)
        accepted = time.monotonic() - t0
        await wait_whole(admin, names, per_topic * TOPICS, deadline)
        return accepted, time.monotonic() - t0, refused


def session_timeout_ms(cluster: DevCluster) -> int:
    controller = next(n for n in cluster.nodes if "controller" in n.roles)
    return int(NodeConfig.load(controller.config)["broker.session.timeout.ms"])


async def broker_failover(cluster: DevCluster, timeout: float) -> dict[str, Any]:
    """SIGKILL the broker leading the most partitions; seconds from the kill until it is fenced and until its
    partitions have new leaders. Also how many partitions each broker led before (a broker fenced while the topics
    were created would lead none: leadership moves back only by a preferred-leader election)."""
    by_node = {n.node_id: n for n in brokers(cluster)}
    async with AsyncAdmin(admin_config(cluster, 10_000)) as admin:
        deadline = time.monotonic() + timeout
        while True:  # a census in which every partition has a live leader
            topics = await admin.describe_topics()
            census = Counter(p.leader for t in topics for p in t.partitions)
            if sum(census[n] for n in by_node) == sum(len(t.partitions) for t in topics) > 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"some partitions had no leader for {timeout:.0f} s: {dict(census)}")
            await asyncio.sleep(1)
    victim = by_node[max(by_node, key=lambda node_id: census[node_id])]
    async with AsyncAdmin(admin_config(cluster, 10_000, exclude=victim.node_id)) as admin:
        led = {
            (t.name, p.partition)
            for t in await admin.describe_topics()
            for p in t.partitions
            if p.leader == victim.node_id
        }
        os.kill(victim.pid, signal.SIGKILL)
        t0 = time.monotonic()
        deadline = t0 + timeout
        fenced = -1.0
        while True:  # leaders move only once the broker is fenced: until then only the cheap DescribeCluster
            with contextlib.suppress(OdradekError):
                if fenced < 0:
                    described = (await admin.describe_cluster()).brokers
                    if any(b.node_id == victim.node_id and b.fenced for b in described):
                        fenced = time.monotonic() - t0
                if fenced >= 0:  # describing 10,000 partitions costs the broker answering ~50 ms: not too often
                    topics = await admin.describe_topics()
                    leaders = {(t.name, p.partition): p.leader for t in topics for p in t.partitions}
                    if all(leaders.get(tp, -1) not in (-1, victim.node_id) for tp in led):
                        break
            if time.monotonic() > deadline:
                raise RuntimeError(f"broker {victim.node_id}'s partitions were not all led anew in {timeout:.0f} s")
            await asyncio.sleep(0.1 if fenced < 0 else 0.25)
        return {
            "leaders_before": {str(node_id): census[node_id] for node_id in sorted(by_node)},
            "led": len(led),
            "fenced_s": fenced,
            "all_led_s": time.monotonic() - t0,
        }


async def controller_failover(cluster: DevCluster, timeout: float) -> float:
    """SIGKILL the active controller; seconds from the kill until another one has created a topic."""
    async with AsyncAdmin(admin_config(cluster, 10_000)) as admin:
        active = (await admin.describe_cluster()).controller_leader
    os.kill(cluster.node(active).pid, signal.SIGKILL)
    t0 = time.monotonic()
    async with AsyncAdmin(admin_config(cluster, 2_000, exclude=active)) as admin:
        for attempt in range(1_000_000):
            try:
                await admin.create_topic(f"failover-probe-{attempt}", 1, 3)
                return time.monotonic() - t0
            except OdradekError:
                if time.monotonic() - t0 > timeout:
                    raise RuntimeError(f"no controller created a topic within {timeout:.0f} s") from None
                await asyncio.sleep(0.05)
    raise AssertionError("unreachable")


def overrides(count: int) -> dict[str, Any]:
    """The brokers' defaults, but for ``max.partitions.per.broker`` (4,000) where RF=3 on 3 brokers needs more
    (with room for the controller failover's probe topics)."""
    needed = count + PROBE_ROOM
    return {"max.partitions.per.broker": needed} if needed > DEFAULT_MAX_PARTITIONS_PER_BROKER else {}


def measure(tmp: Path, count: int, args: argparse.Namespace) -> dict[str, Any]:
    profile = args.profile / str(count) if args.profile else None
    cluster = DevCluster.create(tmp / f"{count}", controllers=1, brokers=3, overrides=overrides(count))
    try:
        cluster.start_all_and_wait(120)
        time.sleep(5)
        base = [rss_bytes(n.pid) for n in brokers(cluster)]
        with profiled(profile, cluster, "create"):
            accepted, whole, refused = asyncio.run(create(cluster, count, args.timeout))
        print(f"  {count:>6} partitions: accepted in {accepted:.1f} s, led with full ISRs in {whole:.1f} s", flush=True)
        with profiled(profile, cluster, "idle"):
            shares = idle_cpu(cluster, args.seconds)
        rss = [rss_bytes(n.pid) - b for n, b in zip(brokers(cluster), base, strict=True)]
        print(f"  {count:>6} partitions: idle broker CPU " + ", ".join(f"{s:.1%}" for s in shares), flush=True)
        spread_figures = None
        if not args.no_spread:
            with profiled(profile, cluster, "spread"):
                names = [f"idle-{t}" for t in range(TOPICS)]
                spread_figures = spread(cluster, names, max(1, count // TOPICS), SPREAD_RECORDS, args.seconds)
        with profiled(profile, cluster, "broker-failover"):
            failover = asyncio.run(broker_failover(cluster, args.timeout))
        print(f"  {count:>6} partitions: broker failover {failover}", flush=True)
    finally:
        cluster.stop_all(timeout=30)
    result = {
        "partitions": count,
        "create_accepted_s": accepted,
        "create_whole_s": whole,
        "create_refused": refused,
        "idle_broker_cpu": shares,
        "broker_rss_per_partition_bytes": sum(rss) / len(rss) / count,
        "broker_session_timeout_ms": session_timeout_ms(cluster),
        "overrides": overrides(count),
        "broker_failover": failover,
        "spread": spread_figures,
    }
    if not args.no_controller_failover:
        result["controller_failover_s"] = measure_controller_failover(tmp, count, args, profile)
    return result


def measure_controller_failover(tmp: Path, count: int, args: argparse.Namespace, profile: Path | None) -> float:
    cluster = DevCluster.create(tmp / f"{count}-3c", controllers=3, brokers=3, overrides=overrides(count))
    try:
        cluster.start_all_and_wait(120)
        asyncio.run(create(cluster, count, args.timeout))
        time.sleep(5)
        with profiled(profile, cluster, "controller-failover"):
            seconds = asyncio.run(controller_failover(cluster, args.timeout))
        print(f"  {count:>6} partitions: controller failover {seconds:.2f} s", flush=True)
        return seconds
    finally:
        cluster.stop_all(timeout=30)


def scale_main(args: argparse.Namespace) -> None:
    counts = args.partitions or [100, 2000, 10000]
    results = []
    with tempfile.TemporaryDirectory(prefix="odradek-scale-bench-") as tmp:
        for count in counts:
            results.append(measure(Path(tmp), count, args))
    print(f"\n1 controller + 3 brokers, {TOPICS} topics, RF=3 (controller failover: 3 controllers + 3 brokers)")
    header = [
        "partitions",
        "create s",
        "idle CPU/broker",
        "RSS/partition",
        "session ms",
        "fenced s",
        "all led s",
        "ctrl failover s",
    ]
    print("  ".join(f"{h:>15}" for h in header))
    for r in results:
        f = r["broker_failover"]
        row = [
            f"{r['partitions']:,}",
            f"{r['create_whole_s']:.1f}",
            f"{sum(r['idle_broker_cpu']) / len(r['idle_broker_cpu']):.1%}",
            f"{r['broker_rss_per_partition_bytes'] / 1024:.1f} KiB",
            str(r["broker_session_timeout_ms"]),
            f"{f['fenced_s']:.2f}",
            f"{f['all_led_s']:.2f}",
            f"{r.get('controller_failover_s', float('nan')):.2f}",
        ]
        print("  ".join(f"{c:>15}" for c in row))
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
