"""``odradek chaos run``: a cluster, a workload, a nemesis and the checker, from set-up to clean-up.

Nodes run as separate hosts in network namespaces this run creates (``chaos/netns.py``) when the machine allows
it; the runner itself stays in its own namespace, attached to the hosts' bridge by a link no fault cuts (as
Jepsen's control node), so clients and the nemesis always reach every node. Without namespaces the nodes run on
127.0.0.1 and only process faults are possible; the report says which was used. Everything created (namespaces,
processes, the run's directory unless ``keep``) is removed at the end, also after a failure; but a run whose check
finds a violation without an injected bug keeps its directory (the nodes' logs and data, and the history as
``history.jsonl``), so that the evidence of a real defect outlives the run.

Faults that need more than processes and namespaces get it set up before the nodes start: brokers' controller
links go through a :class:`~odradek.chaos.proxy.FaultProxy` in the runner for the response faults (every broker's
``controller.quorum.voters`` names the proxy's ports), the Kafka workloads' clients reach the brokers through the
same proxy for ``late-requests`` (every broker's advertised Kafka listener names its proxy port), brokers record
their fsyncs for ``crash-unsynced``, their data directories are tmpfs mounts for ``disk-full``, and every node
reads its wall-clock offset from a file for ``clock-skew``.

Meanwhile a metadata churn creates and deletes small topics, so the faults hit controller writes too. After the
faults: heal everything, restart stopped nodes, wait until every partition's ISR is whole again, stop the workload
(its producers flush), read everything back, check the history (chaos/checker.py), and check that every node's
metadata image agrees with the others.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import secrets
import shutil
import signal
import tempfile
import threading
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import tomli_w

from odradek.chaos import clock_skew, disks
from odradek.chaos.checker import Report, check
from odradek.chaos.combined import combine
from odradek.chaos.copy_checker import check as check_copy
from odradek.chaos.group_workload import GroupWorkload
from odradek.chaos.history import History, TxnEnd
from odradek.chaos.membership import brokers_needed
from odradek.chaos.nemesis import (
    CLIENT_TIMEOUT_MS,
    CLIENTS,
    CLOCK_FAULTS,
    COORDINATOR_FAULTS,
    GROUP_FAULTS,
    NETWORK_FAULTS,
    REQUEST_FAULTS,
    RESPONSE_FAULTS,
    Nemesis,
    data_dir,
    ledger_path,
    schedule,
)
from odradek.chaos.netns import NetnsNetwork
from odradek.chaos.proxy import FaultProxy
from odradek.chaos.share_checker import BUGS as SHARE_BUGS
from odradek.chaos.share_checker import check as check_share
from odradek.chaos.share_settings import DELIVERY_LIMIT, LOCK_MS, SHARE_NODE_SETTINGS
from odradek.chaos.txn_checker import check as check_transactions
from odradek.chaos.txn_workload import BUGS as WORKLOAD_BUGS
from odradek.chaos.txn_workload import TXN_NODE_SETTINGS, TxnWorkload
from odradek.chaos.workload import BUGS as CONSUMER_BUGS
from odradek.chaos.workload import Workload
from odradek.client import Admin
from odradek.client.acls import AclBinding
from odradek.client.admin import PartitionInfo
from odradek.deploy.local import DevCluster, process_state

# Failure detection fast enough for many faults a minute, still above a loaded 2-core machine's hiccups.
TMPFS_MB = 256  # per broker data directory with disk-full: far above what a run writes

NODE_SETTINGS = {
    "broker.heartbeat.interval.ms": 500,
    "broker.session.timeout.ms": 3000,
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.backoff.ms": 200,
    "replica.fetch.wait.max.ms": 200,
}
# The group workload's coordinator: a few offsets partitions (they all fail over in the run), quick first joins.
GROUP_NODE_SETTINGS = {
    "offsets.topic.num.partitions": 3,
    "group.initial.rebalance.delay.ms": 300,
    "group.min.session.timeout.ms": 2000,
}
# Each over odradek's own gRPC client, and with kafka- over the brokers' Kafka listener with librdkafka; kafka-copy
# copies the topic to COPY_TOPIC exactly once (a group, and transactions that commit its offsets).
# kafka-share: share consumers (KIP-932) that accept, release or reject what they get (kafka_share_workload.py).
SHARE_WORKLOAD = "kafka-share"
WORKLOADS = ("default", "group", "txn", "kafka", "kafka-group", "kafka-txn", "kafka-copy", SHARE_WORKLOAD)
GROUP_WORKLOADS = ("group", "kafka-group", SHARE_WORKLOAD)  # members that kill-consumer crashes
TXN_WORKLOADS = ("txn", "kafka-txn")
COPY_WORKLOAD = "kafka-copy"
KAFKA_WORKLOADS = ("kafka", "kafka-group", "kafka-txn", COPY_WORKLOAD, SHARE_WORKLOAD)
COPY_TOPIC = "chaos-copy"
# Per producer and second: writes, or transactions with the txn workloads.
RATES = {
    "default": 200.0,
    "group": 200.0,
    "txn": 20.0,
    "kafka": 200.0,
    "kafka-group": 200.0,
    "kafka-txn": 20.0,
    COPY_WORKLOAD: 200.0,
    SHARE_WORKLOAD: 50.0,
}


@dataclass
class RunOptions:
    duration: float = 60.0
    faults: list[str] = field(default_factory=lambda: ["kill", "pause", "kill-leader", "pause-leader"])
    seed: int = 1
    interval: float = 3.0  # one fault per interval
    partitions: int = 6
    producers: int = 2
    consumers: int = 2
    rate: float | None = None  # per producer: writes per second, transactions per second with txn (RATES)
    controllers: int = 3
    brokers: int = 3
    directory: Path | None = None
    keep: bool = False
    # unsafe.testing.bug for every node, or a workload bug (txn_workload.BUGS, workload.BUGS): the checker must fail
    bug: str = ""
    history_path: Path | None = None
    # "group": consumers in one group that commit (group_workload.py); "txn": transactions (txn_workload.py); each
    # also as "kafka", "kafka-group", "kafka-txn": librdkafka clients on the Kafka listener (kafka_*workload.py);
    # "kafka-copy": exactly-once copying (kafka_copy_workload.py).
    workload: str = "default"
    tls: bool = False  # a TLS cluster (mTLS between nodes); every client of the run connects with TLS
    # TLS plus SCRAM and the authorizer: the workload logs in as a SCRAM user holding only the ACLs it needs; the
    # nemesis and the metadata churn use the admin certificate (a super user).
    security: bool = False
    combine: float = 0.0  # the probability that a step injects two faults at once (chaos/combined.py)
    # Transactional workloads: once the faults are healed, keep the workload going until this many transactions
    # have ended (commit or abort acknowledged), and this many of them by an abort, for at most PROGRESS_WAIT_S
    # more: a run on a loaded machine may otherwise end before the transactions a check needs happened.
    min_transactions: int = 0
    min_aborts: int = 0


@dataclass
class RunResult:
    report: Report
    mechanism: str
    faults_injected: int
    metadata_consistent: bool
    metadata_detail: str
    directory: Path

    @property
    def ok(self) -> bool:
        return self.report.ok and self.metadata_consistent

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "mechanism": self.mechanism,
            "faults_injected": self.faults_injected,
            "metadata_consistent": self.metadata_consistent,
            "metadata_detail": self.metadata_detail,
            "report": self.report.to_dict(),
        }


def run(options: RunOptions, log=print) -> RunResult:
    if options.workload not in WORKLOADS:
        raise ValueError(f"unknown workload {options.workload!r}; choose from {', '.join(WORKLOADS)}")
    group_faults = [f for f in options.faults if f in GROUP_FAULTS]
    if options.workload in (*TXN_WORKLOADS, COPY_WORKLOAD):  # the coordinator faults hit a transaction coordinator
        group_faults = [f for f in group_faults if f not in COORDINATOR_FAULTS]
    if group_faults and options.workload not in GROUP_WORKLOADS:
        also = (
            " (the coordinator faults also run with the txn workloads)"
            if set(group_faults) & {*COORDINATOR_FAULTS}
            else ""
        )
        raise ValueError(f"faults {group_faults} need a group workload{also}")
    workload_bug = options.bug if options.bug in (*WORKLOAD_BUGS, *CONSUMER_BUGS, *SHARE_BUGS) else ""
    if workload_bug in SHARE_BUGS and options.workload != SHARE_WORKLOAD:
        raise ValueError(f"bug {workload_bug} needs the {SHARE_WORKLOAD} workload")
    if workload_bug in WORKLOAD_BUGS and options.workload not in TXN_WORKLOADS:
        raise ValueError(f"bug {workload_bug} needs a txn workload")
    if workload_bug in CONSUMER_BUGS and options.workload in KAFKA_WORKLOADS:
        raise ValueError(f"bug {workload_bug} needs a workload of odradek's own client")
    request_faults = sorted(set(options.faults) & set(REQUEST_FAULTS))
    if request_faults and options.workload not in KAFKA_WORKLOADS:
        # Clients find the brokers at the addresses the brokers advertise. The Kafka listener's serves clients
        # alone once followers fetch over gRPC; the gRPC listener's also carries the brokers' calls to each other
        # (transaction markers, KIP-890 verification, replica fetches), which through the proxy would cross the
        # runner's link, where no network fault cuts them.
        raise ValueError(
            f"faults {request_faults} run only with the Kafka workloads ({', '.join(KAFKA_WORKLOADS)}), not with "
            f"{options.workload!r}: odradek's own client would reach the brokers through their gRPC listener, "
            "which the brokers also use to call each other"
        )
    tls = options.tls or options.security
    if tls and set(options.faults) & {*RESPONSE_FAULTS, *REQUEST_FAULTS}:
        # The proxy follows the HTTP/2 frames and Kafka requests of the links it relays, which TLS hides; its
        # address is also not a name in the nodes' certificates.
        proxied = sorted(set(options.faults) & {*RESPONSE_FAULTS, *REQUEST_FAULTS})
        raise ValueError(f"faults {proxied} do not run with TLS")
    network_faults = [f for f in options.faults if f in NETWORK_FAULTS]
    use_netns = NetnsNetwork.available()
    if network_faults and not use_netns:
        raise RuntimeError(f"faults {network_faults} need network namespaces, which this machine does not allow")
    brokers = brokers_needed(options.faults, options.brokers)  # a membership fault moves replicas somewhere else
    if brokers != options.brokers:
        log(f"membership faults: {brokers} brokers, one more than the replication factor")
        options = replace(options, brokers=brokers)
    directory = Path(options.directory or tempfile.mkdtemp(prefix="odradek-chaos-"))
    nodes = options.controllers + options.brokers
    net = NetnsNetwork(hosts=nodes, attach_root=True) if use_netns else None
    mechanism = "netns" if net is not None else "loopback (process faults only)"
    log(
        f"chaos run: {options.workload} workload, seed {options.seed}, {options.duration:.0f}s, "
        f"faults {','.join(options.faults)}, {mechanism}"
        f"{', TLS, SCRAM and ACLs' if options.security else ', TLS' if tls else ''}"
    )
    overrides: dict[str, Any] = dict(NODE_SETTINGS)
    if options.workload in (*GROUP_WORKLOADS, COPY_WORKLOAD):
        overrides.update(GROUP_NODE_SETTINGS)
    if options.workload in (*TXN_WORKLOADS, COPY_WORKLOAD):
        overrides.update(TXN_NODE_SETTINGS)
    if options.workload == SHARE_WORKLOAD:
        overrides.update(SHARE_NODE_SETTINGS)
    if options.bug and not workload_bug:
        overrides["unsafe.testing.bug"] = options.bug
    cluster: DevCluster | None = None
    proxy: FaultProxy | None = None
    mounts: list[Path] = []
    client_log: Callable[[], None] | None = None  # detaches the kept librdkafka log
    keep = options.keep  # becomes true when the check finds a violation no injected bug explains
    try:
        hosts = (lambda node_id: (net.host_ip(node_id - 1), net.host_ns(node_id - 1))) if net is not None else None
        cluster = DevCluster.create(
            directory / "cluster",
            options.controllers,
            options.brokers,
            overrides=overrides,
            hosts=hosts,
            tls=tls,
            security=options.security,
        )
        security = cluster.security_config()
        client_servers: str | None = None  # the workload's bootstrap servers, when not the brokers' own
        if any(f in RESPONSE_FAULTS or f in REQUEST_FAULTS for f in options.faults):
            root_ip = "127.0.0.1" if net is None else net.root_ip
            assert root_ip is not None  # the network was made with attach_root: the runner has an address on it
            proxy = FaultProxy(root_ip)
            if any(f in RESPONSE_FAULTS for f in options.faults):
                route_controller_links(cluster, proxy)
            if request_faults:
                client_servers = route_kafka_listeners(cluster, proxy)
                log(f"clients reach the brokers' Kafka listeners through the proxy: {client_servers}")
        if any(f in CLOCK_FAULTS for f in options.faults):
            for n in cluster.nodes:
                offset_file = str(clock_skew.offset_file(cluster, n.node_id))
                patch_config(n.config, {"unsafe.testing.clock.offset.file": offset_file})
        if "crash-unsynced" in options.faults:
            for n in cluster.nodes:
                if "broker" in n.roles:
                    patch_config(n.config, {"unsafe.testing.fsync.ledger": str(ledger_path(cluster, n.node_id))})
        if "disk-full" in options.faults:
            for n in cluster.nodes:
                if "broker" in n.roles:
                    disks.mount_tmpfs(data_dir(cluster, n.node_id), TMPFS_MB)
                    mounts.append(data_dir(cluster, n.node_id))
        cluster.start_all()
        asyncio.run(cluster.wait_ready(60))
        topic = "chaos"
        topics = [topic, COPY_TOPIC] if options.workload == COPY_WORKLOAD else [topic]
        client_security = security
        with Admin({"bootstrap.servers": cluster.admin_servers, "request.timeout.ms": 10000, **security}) as admin:
            for name in topics:
                admin.create_topic(name, options.partitions, min(3, options.brokers), {"min.insync.replicas": "2"})
            _wait(lambda: all(p.leader > 0 for p in _partitions(admin, topics)), 30, "topic leaders")
            if options.security:
                client_security = workload_user(cluster, admin, topics, security)
                log(f"workload user {WORKLOAD_USER}: SCRAM, only the ACLs it needs")
        steps = schedule(options.seed, options.duration, options.faults, options.interval)
        steps = combine(steps, options.seed, options.faults, options.combine)
        log(f"schedule ({len(steps)} faults):")
        for s in steps:
            log(f"  {s.at:7.2f}s {s.kind} for {s.duration}s")
        history = History()
        if request_faults:  # librdkafka's request timeout, below the hold of late-requests
            client_security = {**client_security, "socket.timeout.ms": str(CLIENT_TIMEOUT_MS)}
        if options.workload in KAFKA_WORKLOADS:
            # librdkafka's idempotence decisions (epoch bumps, sequence errors), for the analysis of a kept run or
            # of one that finds a violation (about a thousand lines a run; removed with the run's directory).
            client_security = {**client_security, "debug": "eos"}
            client_log = _keep_client_log(directory)
        workload = make_workload(options, cluster, topic, history, workload_bug, client_security, client_servers)
        members = workload if options.workload in GROUP_WORKLOADS else None
        txn_ids = workload.transactional_ids if options.workload in (*TXN_WORKLOADS, COPY_WORKLOAD) else None
        nemesis = Nemesis(cluster, history, topic, net, log, proxy, members, txn_ids)
        workload.start()
        stop = threading.Event()
        churn = MetadataChurn(cluster.admin_servers, stop, security)
        churn.start()
        log("faults:")
        try:
            nemesis.run(steps, stop)
        finally:
            stop.set()
            nemesis.close()
            churn.join()
        log(f"metadata churn: {churn.created} topics created, {churn.deleted} deleted, {churn.failed} attempts failed")
        log("healing")
        if net is not None:
            net.heal()
        if proxy is not None:
            proxy.heal()
        for n in cluster.nodes:
            clock_skew.unskew(clock_skew.offset_file(cluster, n.node_id))
            if process_state(n.pid) == "paused":
                cluster.signal(n.node_id, signal.SIGCONT)
            elif process_state(n.pid) == "stopped":
                cluster.start(n.node_id)
        asyncio.run(cluster.wait_ready(60))
        with Admin({"bootstrap.servers": cluster.admin_servers, "request.timeout.ms": 10000, **security}) as admin:
            try:
                _wait(
                    lambda: all(len(p.isr) == len(p.replicas) for p in _partitions(admin, topics)),
                    90,
                    "every ISR whole again",
                )
            except TimeoutError as e:
                state = [(p.partition, p.leader, p.leader_epoch, p.isr) for p in _partitions(admin, topics)]
                raise TimeoutError(f"{e}: (partition, leader, epoch, ISR) {state}") from None
        if options.min_transactions or options.min_aborts:
            ended, aborted = _await_transactions(history, options.min_transactions, options.min_aborts, PROGRESS_WAIT_S)
            log(
                f"{ended} transactions ended, {aborted} by an abort "
                f"(at least {options.min_transactions} and {options.min_aborts} wanted)"
            )
        workload.stop()
        workload.final_read()
        if options.workload in KAFKA_WORKLOADS and hasattr(workload, "errors"):
            log(f"Kafka client errors: {workload.errors.summary()}")
        if options.workload == SHARE_WORKLOAD:
            log(workload.drain_summary)
        consistent, detail = metadata_agrees(cluster)
        if options.history_path is not None:
            history.write_jsonl(options.history_path)
        if options.workload == COPY_WORKLOAD:
            report: Report = check_copy(history, topic, COPY_TOPIC)
        elif options.workload == SHARE_WORKLOAD:
            report = check_share(history, topic, DELIVERY_LIMIT, LOCK_MS)
        else:
            report = check_transactions(history) if options.workload in TXN_WORKLOADS else check(history)
        if not report.ok and not options.bug:
            keep = True
            if options.history_path is None:
                history.write_jsonl(directory / "history.jsonl")
            log(f"violations found: the run's directory is kept for its analysis: {directory}")
        return RunResult(report, mechanism, nemesis.injected, consistent, detail, directory)
    finally:
        if cluster is not None:
            cluster.stop_all(timeout=20)
        if proxy is not None:
            proxy.close()
        if keep:
            for mount in mounts:  # the brokers' logs live on tmpfs: a kept run copies them out first
                shutil.copytree(mount, mount.parent / "data-kept", dirs_exist_ok=True)
        if client_log is not None:
            client_log()
        for mount in mounts:
            disks.unmount(mount)
        if net is not None:
            net.close()
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)


def _keep_client_log(directory: Path) -> Callable[[], None]:
    """Write the Kafka workloads' librdkafka log (``debug`` contexts included) to ``librdkafka.log`` of a kept run;
    returns what detaches it."""
    import logging

    # kafka_client's logger, by name: that module needs the chaos extra, which the runner itself does not
    LOG = logging.getLogger("odradek.chaos.kafka")
    handler = logging.FileHandler(directory / "librdkafka.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    level = LOG.level
    LOG.addHandler(handler)
    LOG.setLevel(logging.DEBUG)

    def detach() -> None:
        LOG.removeHandler(handler)
        LOG.setLevel(level)
        handler.close()

    return detach


# The Kafka workloads' classes, in modules loaded by name: they need confluent-kafka (librdkafka), which only the
# chaos extra installs; every other workload runs on a plain install.
KAFKA_WORKLOAD_CLASSES = {
    "kafka": ("kafka_workload", "KafkaWorkload"),
    "kafka-group": ("kafka_group_workload", "KafkaGroupWorkload"),
    "kafka-txn": ("kafka_txn_workload", "KafkaTxnWorkload"),
    COPY_WORKLOAD: ("kafka_copy_workload", "KafkaCopyWorkload"),
    SHARE_WORKLOAD: ("kafka_share_workload", "KafkaShareWorkload"),
}


def kafka_workload_class(workload: str) -> Any:
    """The class of a Kafka workload; a clear error when confluent-kafka is missing."""
    if importlib.util.find_spec("confluent_kafka") is None:
        raise ValueError(
            f"the {workload} workload runs librdkafka clients: pip install 'odradek[chaos]' (confluent-kafka)"
        )
    module, name = KAFKA_WORKLOAD_CLASSES[workload]
    return getattr(importlib.import_module(f"odradek.chaos.{module}"), name)


def make_workload(
    options: RunOptions,
    cluster: DevCluster,
    topic: str,
    history: History,
    bug: str,
    security: dict[str, str],
    servers: str | None = None,
) -> Any:
    """The workload ``options`` name: the Kafka ones connect to the brokers' Kafka listeners (or to ``servers``)."""
    kafka = options.workload in KAFKA_WORKLOADS
    servers = servers or (cluster.kafka_bootstrap_servers if kafka else cluster.bootstrap_servers)
    args = (servers, topic, options.partitions, history, options.producers, options.consumers)
    rate = options.rate or RATES[options.workload]
    max_seconds = options.duration + 300
    if kafka:
        kind = kafka_workload_class(options.workload)
        if options.workload in TXN_WORKLOADS:
            return kind(*args, rate, max_seconds=max_seconds, seed=options.seed, bug=bug, security=security)
        if options.workload == COPY_WORKLOAD:
            return kind(*args, rate, max_seconds=max_seconds, seed=options.seed, output=COPY_TOPIC, security=security)
        if options.workload == SHARE_WORKLOAD:
            return kind(*args, rate, max_seconds=max_seconds, seed=options.seed, bug=bug, security=security)
        return kind(*args, rate, max_seconds=max_seconds, security=security)
    if options.workload in TXN_WORKLOADS:
        return TxnWorkload(*args, rate, max_seconds=max_seconds, seed=options.seed, bug=bug, security=security)
    consumer = GroupWorkload if options.workload == "group" else Workload
    if bug:  # a consumer bug (workload.BUGS): the workloads of odradek's own client have them
        return consumer(*args, rate, max_seconds=max_seconds, security=security, bug=bug)
    return consumer(*args, rate, max_seconds=max_seconds, security=security)


def patch_config(path: str, changes: dict[str, Any]) -> None:
    """Change keys of a node's TOML config (written flat by DevCluster.create)."""
    props = tomllib.loads(Path(path).read_text())
    props.update(changes)
    Path(path).write_text(tomli_w.dumps({k: props[k] for k in sorted(props)}))


def route_controller_links(cluster: DevCluster, proxy: FaultProxy) -> None:
    """Every broker reaches each controller through its own proxy link (nodes named by host index, as in the
    netns network): its ``controller.quorum.voters`` lists the proxy's ports. Controllers keep their direct
    addresses among themselves."""
    index = {n.node_id: i for i, n in enumerate(cluster.nodes)}
    controllers = [n for n in cluster.nodes if n.controller_port]
    for b in cluster.nodes:
        if "broker" not in b.roles or b.controller_port:
            continue
        voters = []
        for c in controllers:
            host, port = proxy.add_link(index[b.node_id], index[c.node_id], (c.host, c.controller_port), http2=True)
            voters.append(f"{c.node_id}@{host}:{port}")
        patch_config(b.config, {"controller.quorum.voters": ",".join(voters)})


def route_kafka_listeners(cluster: DevCluster, proxy: FaultProxy) -> str:
    """Clients reach each broker's Kafka listener through a proxy link of their own (from ``CLIENTS``, which link
    faults never cut, as they never cut the runner's own link): every broker advertises its link's address, so
    the metadata, coordinators and leader hints clients get name the proxy. Followers fetch over gRPC
    (``replica.fetch.protocol = grpc``): from the advertised Kafka listener, replication would cross the runner's
    link too, where the network faults do not cut it. Returns the bootstrap servers through the proxy."""
    index = {n.node_id: i for i, n in enumerate(cluster.nodes)}
    proxy.exempt.add(CLIENTS)
    servers = []
    for b in cluster.nodes:
        if not b.kafka_port:
            continue
        host, port = proxy.add_link(CLIENTS, index[b.node_id], (b.host, b.kafka_port), kafka=True)
        patch_config(b.config, {"advertised.listeners": f"KAFKA://{host}:{port}", "replica.fetch.protocol": "grpc"})
        servers.append(f"{host}:{port}")
    return ",".join(servers)


WORKLOAD_USER = "chaos-workload"
# (resource type, name, operations) besides Read and Write on the workload's topic: every group (group members,
# readers) and transactional id, and idempotence.
WORKLOAD_ACLS = (
    ("GROUP", "*", ("READ",)),
    ("TRANSACTIONAL_ID", "*", ("WRITE",)),
    ("CLUSTER", "kafka-cluster", ("IDEMPOTENT_WRITE",)),
)


def workload_user(cluster: DevCluster, admin: Admin, topics: list[str], security: dict[str, str]) -> dict[str, str]:
    """Create the workload's SCRAM user with exactly the ACLs it needs and return its client security keys: the TLS
    files (every listener requires a certificate) and the SCRAM login, whose principal the brokers authorize the
    workload as (Read and Write on ``topics``). Returns once every broker lets the user describe them: the
    credential and the ACLs have reached them all through the metadata log."""
    password = secrets.token_urlsafe(18)
    admin.upsert_user_scram_credential(WORKLOAD_USER, password, "SCRAM-SHA-512")
    principal = f"User:{WORKLOAD_USER}"
    acls = [*(("TOPIC", topic, ("READ", "WRITE")) for topic in topics), *WORKLOAD_ACLS]
    admin.create_acls(
        AclBinding(resource_type=kind, resource_name=name, principal=principal, operation=operation)
        for kind, name, operations in acls
        for operation in operations
    )
    user = {
        **security,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": WORKLOAD_USER,
        "sasl.password": password,
    }
    for address in cluster.bootstrap_servers.split(","):

        def describes(address: str = address) -> bool:
            with Admin({"bootstrap.servers": address, "request.timeout.ms": 3000, **user}) as as_user:
                return all(t.partitions for t in as_user.describe_topics(topics))

        _wait(describes, 30, f"the workload user's login and ACLs on {address}")
    return user


class MetadataChurn(threading.Thread):
    """Creates and deletes small topics while the faults run, so controller failovers and partitions hit
    metadata writes too; failures are expected mid-fault and only counted. The final metadata check compares the
    result on every node."""

    def __init__(self, servers: str, stop: threading.Event, security: dict[str, str] | None = None) -> None:
        super().__init__(name="chaos-metadata-churn", daemon=True)
        self.servers = servers
        self.security = dict(security or {})  # the cluster's client security keys
        self.stop_event = stop
        self.created = self.deleted = self.failed = 0

    def run(self) -> None:
        with Admin({"bootstrap.servers": self.servers, "request.timeout.ms": 3000, **self.security}) as admin:
            n = 0
            while not self.stop_event.wait(2.0):
                name = f"churn-{n}"
                try:
                    admin.create_topic(name, 1, 3)
                    self.created += 1
                    if n % 2:  # every other one is deleted again
                        admin.delete_topic(name)
                        self.deleted += 1
                except Exception:
                    self.failed += 1
                n += 1


def metadata_agrees(cluster: DevCluster) -> tuple[bool, str]:
    """Every node's own image (its admin answers from it) describes the same topics and brokers, once each has
    caught up with the log; compared for up to 30 s, as a lagging observer may need a moment."""
    addresses = [
        f"{n.host}:{n.broker_port or n.controller_port}" for n in cluster.nodes if n.broker_port or n.controller_port
    ]
    deadline = time.monotonic() + 30
    detail = ""
    while time.monotonic() < deadline:
        views = {}
        for address in addresses:
            with Admin(
                {"bootstrap.servers": address, "request.timeout.ms": 5000, **cluster.security_config()}
            ) as admin:
                topics = sorted(
                    (
                        t.name,
                        [
                            (p.partition, p.leader, p.leader_epoch, tuple(p.replicas), tuple(p.isr))
                            for p in t.partitions
                        ],
                    )
                    for t in admin.describe_topics()
                )
                brokers = sorted((b.node_id, b.fenced) for b in admin.describe_cluster().brokers)
                views[address] = json.dumps([topics, brokers])
        if len(set(views.values())) == 1:
            return True, f"{len(views)} nodes agree"
        detail = f"{len(set(views.values()))} different views among {len(views)} nodes"
        time.sleep(1)
    return False, detail


def _partitions(admin: Admin, topics: list[str]) -> list[PartitionInfo]:
    """Every partition of ``topics``, as the cluster describes them."""
    return [p for t in admin.describe_topics(topics) for p in t.partitions]


PROGRESS_WAIT_S = 60.0


def _ended_transactions(history: History) -> tuple[int, int]:
    """How many transactions ended (commit or abort acknowledged), and how many of them by an abort."""
    ended = [e.op for e in history.events() if isinstance(e, TxnEnd) and e.result == "ok" and e.op != "fence"]
    return len(ended), ended.count("abort")


def _await_transactions(history: History, count: int, aborts: int, timeout: float) -> tuple[int, int]:
    """Wait until ``count`` transactions have ended and ``aborts`` of them by an abort, at most ``timeout`` seconds;
    returns how many have."""
    deadline = time.monotonic() + timeout
    while True:
        ended, aborted = _ended_transactions(history)
        if (ended >= count and aborted >= aborts) or time.monotonic() >= deadline:
            return ended, aborted
        time.sleep(0.2)


def _wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except Exception:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
