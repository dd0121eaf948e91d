"""VMs on one machine: each node in its own network namespace with its own address, installed the way a VM is.

This is the multi-host rehearsal of docs/deploy.md. The cluster description lists one host per node (its
namespace's address, the same ports on every host, as on real VMs); each node's config comes from the generator
(``deploy/cluster.py``), its storage is formatted with one cluster id by ``odradek storage format``, and it starts
with the ``ExecStart`` and ``Environment`` of its role's systemd unit and stops with the unit's ``KillSignal``
and ``TimeoutStopSec``, exactly as systemd would run it (paths mapped from /opt/odradek and /etc/odradek to the
working directory). Admin commands run from outside, in the root namespace, over the bridge.

A rolling restart goes node by node, controllers first, and waits after each until the restarted node is back
(a broker registered with a new epoch, a controller fetching from the leader again) and ``odradek cluster health
--exit-code`` passes, the gate the Ansible playbook uses.

    python -m odradek.deploy.vms DIR    # up, produce and consume across hosts, rolling restart under load, down
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from odradek.broker.config import NodeConfig
from odradek.chaos.netns import NetnsNetwork
from odradek.deploy.cluster import ClusterSpec, NodeSpec, config_name, write_config, write_configs
from odradek.deploy.process import random_cluster_id

if TYPE_CHECKING:
    from odradek.client.producer.batch import RecordFuture

UNITS = Path(__file__).resolve().parent / "systemd"
INSTALLED_BIN = "/opt/odradek/venv/bin/odradek"
INSTALLED_CONFIG = "/etc/odradek/node.toml"


@dataclass(frozen=True)
class UnitCommand:
    """What systemd runs for a unit: the command line, its environment, and how it stops the process."""

    argv: list[str]
    env: dict[str, str]
    kill_signal: signal.Signals
    stop_timeout: float


def unit_name(roles: Iterable[str]) -> str:
    roles = set(roles)
    role = "combined" if roles == {"broker", "controller"} else next(iter(roles))
    return f"odradek-{role}.service"


def parse_unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """A systemd unit as section -> key -> values, keeping repeated keys (``Environment=``) in order."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for raw in Path(path).read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        key, sep, value = line.partition("=")
        if not sep or value.endswith("\\"):
            raise ValueError(f"{Path(path).name}: not a one-line key=value: {raw!r}")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def read_unit(path: Path, *, executable: str, config: str) -> UnitCommand:
    """The ``[Service]`` section of a unit, with the installed binary and config path replaced by these; a key
    set more than once counts with its last value, as in systemd (``Environment=`` adds up)."""
    service = parse_unit(path).get("Service", {})

    def last(key: str, default: str) -> str:
        return service.get(key, [default])[-1]

    argv = [
        executable if a == INSTALLED_BIN else config if a == INSTALLED_CONFIG else a
        for a in shlex.split(last("ExecStart", ""))
    ]
    env = dict(item.split("=", 1) for value in service.get("Environment", []) for item in shlex.split(value))
    return UnitCommand(
        argv=argv,
        env=env,
        kill_signal=signal.Signals[last("KillSignal", "SIGTERM")],
        stop_timeout=float(last("TimeoutStopSec", "90").removesuffix("s")),
    )


class VmCluster:
    """``controllers`` + ``brokers`` nodes, one per namespace; node ids 1.. (controllers first)."""

    def __init__(
        self,
        directory: Path,
        controllers: int = 3,
        brokers: int = 3,
        properties: dict[str, Any] | None = None,
        executable: str | None = None,
        spare_hosts: int = 0,
    ) -> None:
        """``spare_hosts`` are VMs with nothing on them yet, for :meth:`add_broker`."""
        self.directory = directory.resolve()
        self.executable = executable or str(Path(sys.executable).parent / "odradek")
        self.net = NetnsNetwork(hosts=controllers + brokers + spare_hosts, attach_root=True)
        try:
            nodes = [NodeSpec(i + 1, self.net.host_ip(i), ("controller",)) for i in range(controllers)]
            nodes += [
                NodeSpec(controllers + i + 1, self.net.host_ip(controllers + i), ("broker",), rack=f"rack-{i % 3}")
                for i in range(brokers)
            ]
            props = {"log.dirs": str(self.directory / "var" / "node-{node_id}"), **(properties or {})}
            self.spec = ClusterSpec(tuple(nodes), cluster_id=random_cluster_id(), properties=props)
            self.configs = write_configs(self.spec, self.directory / "etc")
            self.procs: dict[int, subprocess.Popen[bytes]] = {}
            for node in self.spec.nodes:
                self.format_storage(node.node_id)
        except BaseException:
            self.net.close()
            raise

    def format_storage(self, node_id: int) -> None:
        """``odradek storage format`` with the cluster's id, on the node's VM, as the playbook runs it."""
        config = str(self.configs[node_id])
        self._run_on(
            node_id, [self.executable, "storage", "format", "--cluster-id", self.spec.cluster_id, "--config", config]
        )

    def add_broker(self, rack: str = "") -> NodeSpec:
        """docs/deploy.md "Adding a broker": the next node id on a spare VM, added to the description; only its
        own config is generated (the others do not list brokers), its storage is formatted, and it is started."""
        used = {n.host for n in self.spec.nodes}
        index = next(i for i in range(self.net.hosts) if self.net.host_ip(i) not in used)
        node = NodeSpec(max(n.node_id for n in self.spec.nodes) + 1, self.net.host_ip(index), ("broker",), rack)
        self.spec = replace(self.spec, nodes=(*self.spec.nodes, node))
        self.configs[node.node_id] = write_config(
            self.spec, node.node_id, self.directory / "etc" / config_name(node.node_id)
        )
        self.format_storage(node.node_id)
        self.start(node.node_id)
        return node

    def replace_controller(self, node_id: int) -> None:
        """docs/deploy.md "Replacing a dead controller": the VM is lost (killed, its disk gone); a new one with the
        same id and address gets the same config, storage formatted with the same cluster id, and is started."""
        proc = self.procs[node_id]
        proc.kill()
        proc.wait()
        for log_dir in NodeConfig.load(self.configs[node_id])["log.dirs"]:
            shutil.rmtree(log_dir)
        write_config(self.spec, node_id, self.configs[node_id])
        self.format_storage(node_id)
        self.start(node_id)

    # ---- addresses ----

    def host_index(self, node_id: int) -> int:
        host = self.spec.node(node_id).host
        return next(i for i in range(self.net.hosts) if self.net.host_ip(i) == host)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{n.host}:{self.spec.broker_port}" for n in self.spec.brokers)

    @property
    def admin_servers(self) -> str:
        controllers = [f"{n.host}:{self.spec.controller_port}" for n in self.spec.controllers]
        return ",".join([self.bootstrap_servers, *controllers])

    def unit(self, node_id: int) -> UnitCommand:
        node = self.spec.node(node_id)
        return read_unit(UNITS / unit_name(node.roles), executable=self.executable, config=str(self.configs[node_id]))

    # ---- processes, as systemd runs them ----

    def _run_on(self, node_id: int, argv: list[str]) -> None:
        subprocess.run(self.net.exec_argv(self.host_index(node_id), argv), check=True, capture_output=True, timeout=60)

    def start(self, node_id: int) -> None:
        unit = self.unit(node_id)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", **unit.env}
        with open(self.directory / f"node-{node_id}.log", "ab") as log:  # the journal
            self.procs[node_id] = self.net.popen(
                self.host_index(node_id),
                unit.argv,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd="/",
            )

    def stop(self, node_id: int) -> float:
        """``systemctl stop``: the unit's kill signal, SIGKILL after its stop timeout; returns seconds taken."""
        proc = self.procs[node_id]
        unit = self.unit(node_id)
        began = time.monotonic()
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(unit.kill_signal)
        try:
            proc.wait(unit.stop_timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        return time.monotonic() - began

    def start_all(self) -> None:
        """Controllers before brokers, as the playbook starts them."""
        for node in (*self.spec.controllers, *self.spec.brokers):
            self.start(node.node_id)

    def close(self) -> None:
        for node in (*self.spec.brokers, *self.spec.controllers):
            if node.node_id in self.procs and self.procs[node.node_id].poll() is None:
                self.stop(node.node_id)
        self.net.close()

    # ---- the admin CLI, from outside ----

    def cli(self, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != "ODRADEK_BOOTSTRAP_SERVERS"}
        env["ODRADEK_HOME"] = str(self.directory / "home")
        return subprocess.run(
            [self.executable, *args, "-X", self.admin_servers],
            capture_output=True,
            text=True,
            check=check,
            timeout=timeout,
            env=env,
        )

    def cli_json(self, *args: str) -> Any:
        return json.loads(self.cli(*args, "--format", "json").stdout)

    def healthy(self) -> bool:
        return self.cli("cluster", "health", "--exit-code", "--format", "json", check=False).returncode == 0

    def broker_epochs(self) -> dict[int, int]:
        return {b["node_id"]: b["epoch"] for b in self.cli_json("broker", "list")}

    def wait(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(subprocess.SubprocessError, ValueError, KeyError):
                if condition():
                    return
            time.sleep(0.5)
        raise TimeoutError(f"not {what} after {timeout:.0f} s")

    def wait_ready(self, timeout: float = 90) -> None:
        """Every running broker registered and unfenced, and the cluster healthy (a cluster whose brokers have not
        registered yet has nothing unhealthy to report)."""
        running = {n for n, proc in self.procs.items() if proc.poll() is None and self.spec.node(n).is_broker}

        def ready() -> bool:
            unfenced = {b["node_id"] for b in self.cli_json("broker", "list") if not b["fenced"]}
            return running <= unfenced and self.healthy()

        self.wait(ready, timeout, "ready")

    def restart(self, node_id: int, timeout: float = 120) -> dict[str, float]:
        """Restart one node and wait until it is back and the cluster healthy; returns the phases' seconds."""
        node = self.spec.node(node_id)
        epochs = self.broker_epochs() if node.is_broker else {}
        stopped = self.stop(node_id)
        began, started_ms = time.monotonic(), time.time() * 1000
        self.start(node_id)
        if node.is_broker:
            self.wait(lambda: self.broker_epochs().get(node_id, -1) > epochs.get(node_id, -1), timeout, "re-registered")
        if node.is_controller:

            def following() -> bool:  # the quorum JSON gives each voter's last fetch as an age in ms
                quorum = self.cli_json("cluster", "quorum")
                voter = next(v for v in quorum["voters"] if v["node_id"] == node_id)
                fresh = 0 <= voter["last_fetch_ms"] < time.time() * 1000 - started_ms
                return quorum["leader_id"] == node_id or (fresh and voter["lag"] == 0)

            self.wait(following, timeout, f"controller {node_id} following the leader")
        self.wait(self.healthy, timeout, "healthy")
        return {"stop_s": stopped, "back_s": time.monotonic() - began}

    def rolling_restart(self, timeout: float = 120) -> list[dict[str, float]]:
        return [
            {"node_id": n.node_id, **self.restart(n.node_id, timeout)}
            for n in (*self.spec.controllers, *self.spec.brokers)
        ]


def produce_and_consume_across_hosts(cluster: VmCluster, topic: str = "across-hosts") -> list[str]:
    """``odradek produce`` on the first controller's VM, ``odradek consume`` on the second's: both reach the
    brokers on their own VMs over the network. Returns the values consumed."""
    cluster.cli("topic", "create", topic, "--partitions", "3", "--replication-factor", "3")
    lines = [f"hello from vm {i}" for i in range(10)]
    produce = [cluster.executable, "produce", topic, "--acks", "all", "-X", cluster.bootstrap_servers]
    subprocess.run(
        cluster.net.exec_argv(0, produce),
        input="\n".join(lines) + "\n",
        text=True,
        check=True,
        capture_output=True,
        timeout=60,
    )
    consume = [
        cluster.executable,
        "consume",
        topic,
        "--offset",
        "earliest",
        "--num",
        str(len(lines)),
        "--format",
        "json",
        "-X",
        cluster.bootstrap_servers,
    ]
    out = subprocess.run(cluster.net.exec_argv(1, consume), text=True, check=True, capture_output=True, timeout=60)
    return [json.loads(line)["value"] for line in out.stdout.splitlines() if line.strip()]


class _RetryCounter(logging.Handler):
    """Counts the producer's retries (the sender logs each at DEBUG) and the errors behind them."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.retries: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("retrying"):
            self.retries[type(record.args[1]).__name__ if isinstance(record.args, tuple) else "?"] += 1


def rolling_restart_under_load(
    cluster: VmCluster, topic: str = "under-load", max_records: int = 200_000, rate: float = 2000.0
) -> dict[str, Any]:
    """Restart every node, one at a time, while one producer (acks=all, idempotent) writes from outside; then
    read the topic back. The report counts acknowledged, lost and duplicated records and the errors the
    application saw (none is expected: retriable errors stay inside the producer, which the retry counts show)."""
    from odradek.client import Consumer, Producer, TopicPartition

    cluster.cli(
        "topic", "create", topic, "--partitions", "3", "--replication-factor", "3", "--config", "min.insync.replicas=2"
    )
    cluster.wait_ready()
    acked: dict[bytes, tuple[int, int]] = {}
    app_errors: list[str] = []
    stop = threading.Event()
    counter = _RetryCounter()
    sender_log = logging.getLogger("odradek.client.producer.sender")
    sender_log.addHandler(counter)
    previous_level = sender_log.level
    sender_log.setLevel(logging.DEBUG)

    def delivered(value: bytes, future: RecordFuture) -> None:
        error = future.exception()
        if error is None:
            acked[value] = (future.result().partition, future.result().offset)
        else:
            app_errors.append(f"{type(error).__name__}: {error}")

    def load() -> None:
        config = {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "linger.ms": 5,
            "delivery.timeout.ms": 120_000,
        }
        with Producer(config) as producer:
            began = time.monotonic()
            for i in range(max_records):
                if stop.is_set():
                    break
                value = b"r-%08d" % i
                producer.send(topic, value).add_done_callback(functools.partial(delivered, value))
                ahead = (i + 1) / rate - (time.monotonic() - began)
                if ahead > 0:
                    time.sleep(ahead)
            producer.flush(150)

    thread = threading.Thread(target=load, name="load", daemon=True)
    thread.start()
    try:
        cluster.wait(lambda: len(acked) > 1000, 60, "acknowledging writes")
        restarts = cluster.rolling_restart()
        during = len(acked)
    finally:
        stop.set()
        thread.join(180)
        sender_log.removeHandler(counter)
        sender_log.setLevel(previous_level)
    if thread.is_alive():
        raise TimeoutError("the producer did not finish")

    partitions = [TopicPartition(topic, p) for p in range(3)]
    read: Counter[bytes | None] = Counter()
    mismatched = 0
    with Consumer({"bootstrap.servers": cluster.bootstrap_servers, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign(partitions)
        ends = consumer.end_offsets(partitions)
        deadline = time.monotonic() + 120
        while any(consumer.position(tp) < ends[tp] for tp in partitions) and time.monotonic() < deadline:
            for rec in consumer.poll(timeout_ms=500):
                read[rec.value] += 1
                if rec.value in acked and acked[rec.value] != (rec.partition, rec.offset):
                    mismatched += 1
    return {
        "acked": len(acked),
        "acked_during_restarts": during,
        "lost": sum(1 for v in acked if v not in read),
        "duplicated": sum(1 for n in read.values() if n > 1),
        "moved": mismatched,
        "application_errors": app_errors[:10],
        "application_error_count": len(app_errors),
        "producer_retries": dict(counter.retries),
        "restarts": restarts,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m odradek.deploy.vms", description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path, help="working directory (configs, logs, data)")
    parser.add_argument("--records", type=int, default=200_000, help="most records the load sends")
    args = parser.parse_args(argv)
    if not NetnsNetwork.available():
        print("error: network namespaces are not available here (needs root and iproute2)", file=sys.stderr)
        return 2
    args.directory.mkdir(parents=True, exist_ok=True)
    cluster = VmCluster(args.directory, properties={"broker.session.timeout.ms": 6000})
    try:
        cluster.start_all()
        cluster.wait_ready()
        for n in cluster.spec.nodes:
            namespace = cluster.net.host_ns(cluster.host_index(n.node_id))
            print(f"node {n.node_id}: {'+'.join(n.roles):10} {n.host} ({namespace})")
        print("across hosts:", produce_and_consume_across_hosts(cluster)[:3], "...")
        report = rolling_restart_under_load(cluster, max_records=args.records)
        print(json.dumps(report, indent=2))
        ok = report["lost"] == 0 and report["application_error_count"] == 0 and report["moved"] == 0
        return 0 if ok else 1
    finally:
        cluster.close()


if __name__ == "__main__":
    sys.exit(main())
