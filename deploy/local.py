"""A local multi-node cluster of real processes on 127.0.0.1, for development, demos and tests.

``DevCluster.create`` writes one TOML config per node, formats storage with a fresh cluster id and records the
layout in ``cluster.json``; nodes run as detached ``odradek server`` processes (they outlive whoever started
them), each logging to ``node-<id>/node.log``. The same state file lets later commands stop, kill, pause or
restart nodes. ``odradek dev``, the chaos harness, the project's tests and the pytest plugin
(``deploy/pytest_plugin.py``) all run clusters through this module; ``running_cluster`` is the one-line form for
an application's tests (docs/testing.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import tomli_w

from odradek.broker.config import NodeConfig, client_auth_key
from odradek.broker.storage import format_storage
from odradek.client.admin import AsyncAdmin
from odradek.client.errors import AuthenticationFailedError, OdradekError
from odradek.deploy import launcher
from odradek.deploy.certs import make_ca, make_leaf
from odradek.deploy.process import (
    free_port,
    free_ports,
    process_state,
    random_cluster_id,
    server_argv,
    tuned_environment,
)

__all__ = [
    "STATE_FILE",
    "DevCluster",
    "DevNode",
    "LocalClusterError",
    "TopicSpec",
    "free_port",
    "process_state",
    "running_cluster",
]

# The nodes this process started as its own children (not through the launcher), kept so that their exit status is
# read from the one object that reaps them (``exit_status``).
_children: dict[int, subprocess.Popen[bytes]] = {}
STATE_FILE = "cluster.json"
TLS_DIR = "tls"  # a TLS cluster's CA and admin client certificate, under the cluster's directory
ADMIN_CLIENT_FILE = "admin-client.json"  # a secured cluster's client config for its super user, under its directory
ADMIN_USER = "admin"
ADMIN_MECHANISM = "SCRAM-SHA-512"
# A secured cluster: clients authenticate with SCRAM over TLS on both client listeners, the controllers' listener is
# mTLS only. The gRPC broker listener requires certificates (brokers call each other there, as their certificates'
# principals); the Kafka listener only requests one, so that a Kafka client logs in with the CA and a SCRAM password
# alone, while followers fetching there and clients that have a certificate present it.
SECURE_PROTOCOL_MAP = "SSL:SASL_SSL,CONTROLLER:SSL,KAFKA:SASL_SSL"
SECURE_KAFKA_CLIENT_AUTH = "requested"
AUTHORIZER = "odradek"


def certificate_principal(common_name: str) -> str:
    """The principal of a certificate ``make_leaf`` issued, under the DEFAULT mapping rule (the DN as RFC 4514)."""
    return f"User:CN={common_name},O=odradek"


T = TypeVar("T")


class LocalClusterError(Exception):
    """A local cluster that cannot be laid out, found, started or made ready; the message says what to do."""


@dataclass(frozen=True)
class TopicSpec:
    """A topic a cluster starts with. ``replication_factor`` -1 takes the cluster's default (3, or fewer brokers)."""

    partitions: int = 1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)


def topic_specs(topics: Mapping[str, int | TopicSpec | Mapping[str, Any]] | None) -> dict[str, TopicSpec]:
    """Topics as ``{name: partitions}``, ``{name: TopicSpec(...)}`` or ``{name: {"partitions": 3, ...}}``."""
    out: dict[str, TopicSpec] = {}
    for name, spec in (topics or {}).items():
        if isinstance(spec, TopicSpec):
            out[name] = spec
        elif isinstance(spec, int) and not isinstance(spec, bool):
            out[name] = TopicSpec(partitions=spec)
        elif isinstance(spec, Mapping):
            unknown = set(spec) - {"partitions", "replication_factor", "configs"}
            if unknown:
                raise LocalClusterError(f"topic {name!r}: unknown keys {sorted(unknown)}")
            out[name] = TopicSpec(**spec)
        else:
            raise LocalClusterError(f"topic {name!r}: expected a partition count, a TopicSpec or a mapping")
        if out[name].partitions < 1:
            raise LocalClusterError(f"topic {name!r}: needs at least one partition")
    return out


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to completion from synchronous code, also when called inside a running event loop (an
    async test): then on a fresh loop in a helper thread, since a loop cannot be re-entered."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    result: list[T] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            result.append(asyncio.run(coroutine))
        except BaseException as e:
            failure.append(e)

    thread = threading.Thread(target=target, name="odradek-local-cluster")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]


@dataclass
class DevNode:
    node_id: int
    roles: list[str]
    config: str
    broker_port: int = 0
    controller_port: int = 0
    metrics_port: int = 0
    kafka_port: int = 0  # a broker's Kafka listener (Kafka's binary protocol, for Kafka clients)
    schema_registry_port: int = 0  # a broker's schema registry listener (create's ``schema_registry``), 0 for none
    http_port: int = 0  # a broker's HTTP API listener (create's ``http_api``), 0 for none
    pid: int = 0
    host: str = "127.0.0.1"
    netns: str = ""  # a network namespace to run in (the chaos harness's hosts), "" for this one

    @property
    def directory(self) -> Path:
        return Path(self.config).parent

    @property
    def log_file(self) -> Path:
        return self.directory / "node.log"


@dataclass
class DevCluster:
    directory: Path
    cluster_id: str
    nodes: list[DevNode] = field(default_factory=list)
    tls: bool = False  # every listener is SSL, with mTLS between nodes and for clients (create's ``tls``)
    security: bool = False  # TLS plus SCRAM on the client listeners and the authorizer (create's ``security``)

    # ---- layout ----

    @classmethod
    def create(
        cls,
        directory: Path,
        controllers: int = 3,
        brokers: int = 3,
        combined: bool = False,
        overrides: dict[str, Any] | None = None,
        hosts: Callable[[int], tuple[str, str]] | None = None,
        tls: bool = False,
        security: bool = False,
        first_id: int = 1,
        schema_registry: bool = False,
        http_api: bool = False,
    ) -> DevCluster:
        """Configs and formatted storage for the nodes (ids from ``first_id``: controllers, then brokers). ``hosts``
        maps a node id to the (address, network namespace) it runs at; by default every node is on 127.0.0.1 here.
        ``tls``: the cluster gets its own CA (``tls/ca.crt``), a certificate per node and an admin client
        certificate, every listener is SSL and requires a client certificate (``client_config`` has what a client
        needs).
        ``security``: TLS as ``tls``, and the client listeners (gRPC and Kafka) are SASL_SSL with SCRAM (the Kafka
        listener requests client certificates rather than requiring them, so SCRAM alone logs in there), the
        authorizer is on, and the super users are ``User:admin`` (a SCRAM user that ``create_admin_user`` creates
        with a random password, written to ``admin-client.json``), the admin client certificate and the nodes'
        certificates.
        ``schema_registry``: every broker serves the built-in schema registry on a port of its own
        (``schema.registry.listeners``); with ``tls`` over https, asking for client certificates without requiring
        them (so a client with the CA and, under ``security``, a SCRAM user's HTTP Basic credentials gets in).
        ``http_api``: every broker serves the HTTP API and the web console on a port of its own (``http.listeners``);
        with ``tls`` over https, asking for client certificates without requiring them, as the schema registry (so
        a browser without one signs in, under ``security`` as a SCRAM user)."""
        tls = tls or security
        if controllers < 1:
            raise LocalClusterError("a cluster needs at least one controller")
        if brokers < 0:
            raise LocalClusterError("a broker count cannot be negative")
        if first_id < 0:
            raise LocalClusterError("node ids cannot be negative")
        if (directory / STATE_FILE).exists():
            existing = cls.load(directory)
            if any(process_state(n.pid) != "stopped" for n in existing.nodes):
                raise LocalClusterError(f"a dev cluster is already running in {directory} ('odradek dev down' first)")
        directory.mkdir(parents=True, exist_ok=True)
        cluster = cls(directory.resolve(), random_cluster_id(), tls=tls, security=security)
        ca = make_ca(f"odradek dev cluster {cluster.cluster_id}") if tls else None
        if ca is not None:
            ca.write(cluster.directory / TLS_DIR, "ca")
            make_leaf(ca, "admin").write(cluster.directory / TLS_DIR, "admin-client")
        ids = range(first_id, first_id + controllers)
        if combined:
            specs = [(i, ["broker", "controller"]) for i in ids]
        else:
            specs = [(i, ["controller"]) for i in ids]
            specs += [(i, ["broker"]) for i in range(ids.stop, ids.stop + brokers)]
        ports = iter(free_ports(6 * len(specs)))  # distinct: two nodes on one port never start
        for node_id, roles in specs:
            node_dir = cluster.directory / f"node-{node_id}"
            if node_dir.exists():
                raise LocalClusterError(f"{node_dir} exists: remove it or choose another --dir")
            host, netns = hosts(node_id) if hosts is not None else ("127.0.0.1", "")
            cluster.nodes.append(
                DevNode(
                    node_id,
                    roles,
                    str(node_dir / "node.toml"),
                    broker_port=next(ports) if "broker" in roles else 0,
                    controller_port=next(ports) if "controller" in roles else 0,
                    metrics_port=next(ports),
                    kafka_port=next(ports) if "broker" in roles else 0,
                    schema_registry_port=next(ports) if "broker" in roles and schema_registry else 0,
                    http_port=next(ports) if "broker" in roles and http_api else 0,
                    host=host,
                    netns=netns,
                )
            )
        super_users = ";".join(
            [f"User:{ADMIN_USER}", certificate_principal("admin")]
            + [certificate_principal(f"node-{n.node_id}") for n in cluster.nodes]
        )
        voters = ",".join(f"{n.node_id}@{n.host}:{n.controller_port}" for n in cluster.nodes if n.controller_port)
        for n in cluster.nodes:
            listeners = []
            if n.broker_port:
                listeners.append(f"{'SSL' if tls else 'PLAINTEXT'}://{n.host}:{n.broker_port}")
            if n.controller_port:
                listeners.append(f"CONTROLLER://{n.host}:{n.controller_port}")
            if n.kafka_port:
                listeners.append(f"KAFKA://{n.host}:{n.kafka_port}")
            props: dict[str, Any] = {
                "process.roles": ",".join(n.roles),
                "node.id": n.node_id,
                "controller.quorum.voters": voters,
                "listeners": ",".join(listeners),
                "log.dirs": str(n.directory / "data"),
                "metrics.port": n.metrics_port,
                "default.replication.factor": max(1, min(3, brokers if not combined else controllers)),
            }
            if n.schema_registry_port:
                props["schema.registry.listeners"] = f"{cluster.registry_scheme}://{n.host}:{n.schema_registry_port}"
                if tls:
                    props["schema.registry.ssl.client.auth"] = "requested"
            if n.http_port:
                props["http.listeners"] = f"{cluster.http_scheme}://{n.host}:{n.http_port}"
                if tls:
                    props["http.ssl.client.auth"] = "requested"
            n.directory.mkdir(parents=True)
            if ca is not None:
                cert, key = make_leaf(ca, f"node-{n.node_id}", [n.host, "127.0.0.1", "localhost"]).write(
                    n.directory, "node"
                )
                props |= {
                    "listener.security.protocol.map": "SSL:SSL,CONTROLLER:SSL,KAFKA:SSL",
                    "ssl.certificate.location": str(cert),
                    "ssl.key.location": str(key),
                    "ssl.ca.location": str(cluster.directory / TLS_DIR / "ca.crt"),
                    "ssl.client.auth": "required",
                }
            if security:
                props |= {
                    "listener.security.protocol.map": SECURE_PROTOCOL_MAP,
                    client_auth_key("KAFKA"): SECURE_KAFKA_CLIENT_AUTH,  # the others keep ssl.client.auth=required
                    "authorizer.class.name": AUTHORIZER,
                    "super.users": super_users,
                }
            props.update(overrides or {})
            Path(n.config).write_text(tomli_w.dumps({k: props[k] for k in sorted(props)}))
            format_storage(NodeConfig.load(n.config), cluster.cluster_id)
        if security:
            cluster._write_admin_client(secrets.token_urlsafe(18))
        cluster.save()
        return cluster

    @classmethod
    def load(cls, directory: Path) -> DevCluster:
        path = directory / STATE_FILE
        if not path.exists():
            raise LocalClusterError(f"no dev cluster in {directory}")
        data = json.loads(path.read_text())
        nodes = [DevNode(**n) for n in data["nodes"]]
        return cls(
            Path(data["directory"]),
            data["cluster_id"],
            nodes,
            tls=data.get("tls", False),
            security=data.get("security", False),
        )

    def save(self) -> None:
        data = {
            "directory": str(self.directory),
            "cluster_id": self.cluster_id,
            "nodes": [asdict(n) for n in self.nodes],
            "tls": self.tls,
            "security": self.security,
        }
        tmp = self.directory / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        os.replace(tmp, self.directory / STATE_FILE)

    def node(self, node_id: int) -> DevNode:
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise LocalClusterError(
            f"no node {node_id} in the dev cluster (nodes: {', '.join(str(n.node_id) for n in self.nodes)})"
        )

    def security_config(self) -> dict[str, str]:
        """A client's security keys for this cluster: the CA and the admin client certificate under TLS."""
        if not self.tls:
            return {}
        tls = self.directory / TLS_DIR
        return {
            "security.protocol": "SSL",
            "ssl.ca.location": str(tls / "ca.crt"),
            "ssl.certificate.location": str(tls / "admin-client.crt"),
            "ssl.key.location": str(tls / "admin-client.key"),
        }

    def client_config(self, **extra: Any) -> dict[str, Any]:
        """A client config for this cluster: ``bootstrap.servers`` (the brokers') and its security keys; on a
        secured cluster, the super user ``admin``'s (``admin-client.json``)."""
        if self.security:
            return {**self.admin_client_config(), **extra}
        return {"bootstrap.servers": self.bootstrap_servers, **self.security_config(), **extra}

    @property
    def admin_client_file(self) -> Path:
        return self.directory / ADMIN_CLIENT_FILE

    def admin_client_config(self) -> dict[str, Any]:
        """A secured cluster's ``admin-client.json``: a client config (``Producer``, ``Consumer``, ``Admin``) that
        logs in as ``admin`` with SCRAM over TLS, presenting the admin client certificate."""
        if not self.admin_client_file.exists():
            raise LocalClusterError(f"no {ADMIN_CLIENT_FILE} in {self.directory}: the cluster is not secured")
        return json.loads(self.admin_client_file.read_text())

    def _write_admin_client(self, password: str) -> None:
        config = {
            "bootstrap.servers": self.bootstrap_servers,
            **self.security_config(),
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": ADMIN_MECHANISM,
            "sasl.username": ADMIN_USER,
            "sasl.password": password,
        }
        tmp = self.admin_client_file.with_suffix(".tmp")
        tmp.touch(mode=0o600)
        tmp.write_text(json.dumps(config, indent=2) + "\n")
        os.replace(tmp, self.admin_client_file)

    async def create_admin_user(self, timeout: float = 30.0) -> None:
        """Create (or reset) the super user ``admin`` of a secured cluster with ``admin-client.json``'s password,
        through the controllers' listener with the admin client certificate: a first credential can only come
        from there, as no SCRAM user exists yet to log in on the client listeners."""
        password = self.admin_client_config()["sasl.password"]
        config = {"bootstrap.servers": self.controller_servers, "request.timeout.ms": 10000, **self.security_config()}
        async with AsyncAdmin(config) as admin:
            await admin.upsert_user_scram_credential(ADMIN_USER, password, ADMIN_MECHANISM)
        for n in self.nodes:  # ready once every broker has the credential from the metadata log
            if n.broker_port:
                await self._wait_login(f"{n.host}:{n.broker_port}", timeout)

    async def _wait_login(self, address: str, timeout: float) -> None:
        config = {**self.admin_client_config(), "bootstrap.servers": address, "request.timeout.ms": 2000}
        deadline = time.monotonic() + timeout
        async with AsyncAdmin(config) as admin:
            while True:
                try:
                    await admin.list_topics()
                    return
                except AuthenticationFailedError:
                    if time.monotonic() > deadline:
                        raise LocalClusterError(
                            f"user {ADMIN_USER} cannot log in on {address} after {timeout:.0f}s"
                        ) from None
                    await asyncio.sleep(0.1)

    def _admin_config(self, timeout_ms: int) -> dict[str, Any]:
        return {"bootstrap.servers": self.admin_servers, "request.timeout.ms": timeout_ms, **self.security_config()}

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{n.host}:{n.broker_port}" for n in self.nodes if n.broker_port)

    @property
    def schema_registry_urls(self) -> str:
        """Every broker's schema registry URL (what Confluent's clients take as ``url``), "" without one."""
        scheme = self.registry_scheme
        return ",".join(f"{scheme}://{n.host}:{n.schema_registry_port}" for n in self.nodes if n.schema_registry_port)

    @property
    def registry_scheme(self) -> str:
        """The schema registry's: https on a TLS cluster."""
        return "https" if self.tls else "http"

    @property
    def http_scheme(self) -> str:
        """The HTTP API's: https on a TLS cluster."""
        return "https" if self.tls else "http"

    @property
    def http_urls(self) -> str:
        """Every broker's HTTP API URL (docs/http-api.md), "" without one."""
        return ",".join(f"{self.http_scheme}://{n.host}:{n.http_port}" for n in self.nodes if n.http_port)

    @property
    def kafka_bootstrap_servers(self) -> str:
        """What Kafka clients connect to: every broker's Kafka listener."""
        return ",".join(f"{n.host}:{n.kafka_port}" for n in self.nodes if n.kafka_port)

    @property
    def controller_servers(self) -> str:
        return ",".join(f"{n.host}:{n.controller_port}" for n in self.nodes if n.controller_port)

    @property
    def admin_servers(self) -> str:
        return ",".join(s for s in (self.bootstrap_servers, self.controller_servers) if s)

    # ---- processes ----

    def start(self, node_id: int) -> DevNode:
        n = self.node(node_id)
        if process_state(n.pid) != "stopped":
            raise LocalClusterError(f"node {node_id} is already running (pid {n.pid})")
        n.pid = 0
        if launcher.enabled():
            with contextlib.suppress(launcher.LauncherError):  # else started as its own process, below
                env = tuned_environment()
                n.pid = launcher.shared().start(Path(n.config), n.directory, n.log_file, env, n.netns)
        if not n.pid:
            with open(n.log_file, "ab") as out:
                netns = ["ip", "netns", "exec", n.netns] if n.netns else []  # execs in place: the pid is the server's
                proc = subprocess.Popen(
                    [*netns, *server_argv(n.config)],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    env=tuned_environment(),
                    cwd=n.directory,
                )
            n.pid = proc.pid
            _children[proc.pid] = proc
        self.save()
        return n

    def exit_status(self, node_id: int) -> int | None:
        """A stopped node's exit code (negative: the signal that ended it), if this process started it; None while it
        runs or when its status is not known here."""
        pid = self.node(node_id).pid
        shared = launcher.current()
        if shared is not None and shared.launched(pid):
            return shared.exit_status(pid)
        child = _children.get(pid)
        return child.poll() if child is not None else None

    def start_all(self) -> None:
        for n in self.nodes:
            if process_state(n.pid) == "stopped":
                self.start(n.node_id)

    def signal(self, node_id: int, sig: signal.Signals) -> DevNode:
        n = self.node(node_id)
        if process_state(n.pid) == "stopped":
            raise LocalClusterError(f"node {node_id} is not running")
        os.kill(n.pid, sig)
        return n

    def stop_all(self, timeout: float = 20.0) -> None:
        """SIGTERM everything (resuming paused nodes), brokers first so that their controlled shutdown still finds
        a controller, then SIGKILL what is still alive after ``timeout``."""
        deadline = time.monotonic() + timeout
        brokers = [n for n in self.nodes if "controller" not in n.roles]
        for group in (brokers, self.nodes):
            for n in group:
                if process_state(n.pid) != "stopped":
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(n.pid, signal.SIGCONT)
                        os.kill(n.pid, signal.SIGTERM)
            while time.monotonic() < deadline and any(process_state(n.pid) != "stopped" for n in group):
                time.sleep(0.1)
        for n in self.nodes:
            if process_state(n.pid) != "stopped":
                with contextlib.suppress(ProcessLookupError):
                    os.kill(n.pid, signal.SIGKILL)
        for n in self.nodes:
            if (child := _children.get(n.pid)) is not None:
                child.poll()  # reaps it if it has exited

    def status(self) -> list[dict[str, Any]]:
        return [
            {
                "node_id": n.node_id,
                "roles": n.roles,
                "pid": n.pid,
                "state": process_state(n.pid),
                "broker": f"127.0.0.1:{n.broker_port}" if n.broker_port else None,
                "controller": f"127.0.0.1:{n.controller_port}" if n.controller_port else None,
                "kafka": f"127.0.0.1:{n.kafka_port}" if n.kafka_port else None,
                "schema_registry": (
                    f"{self.registry_scheme}://127.0.0.1:{n.schema_registry_port}" if n.schema_registry_port else None
                ),
                "http": f"{self.http_scheme}://127.0.0.1:{n.http_port}" if n.http_port else None,
                "metrics": f"http://127.0.0.1:{n.metrics_port}/metrics" if n.metrics_port else None,
                "log": str(n.log_file),
            }
            for n in self.nodes
        ]

    async def broker_epochs(self) -> dict[int, int]:
        """Registered brokers' epochs now ({} if the cluster does not answer): a restarted broker is ready only
        once it has registered anew, with a newer epoch (``wait_ready``)."""
        try:
            async with AsyncAdmin(self._admin_config(2000)) as admin:
                return {b.node_id: b.epoch for b in (await admin.describe_cluster()).brokers}
        except OdradekError:
            return {}

    async def wait_ready(self, timeout: float = 60.0, newer_than: dict[int, int] | None = None) -> None:
        """Until a controller leads and every running broker is registered and unfenced (with an epoch above
        ``newer_than``'s for brokers just restarted: the old incarnation's registration does not count)."""
        newer_than = newer_than or {}
        running = {n.node_id for n in self.nodes if "broker" in n.roles and process_state(n.pid) == "running"}
        deadline = time.monotonic() + timeout
        last = "no answer"
        async with AsyncAdmin(self._admin_config(2000)) as admin:
            while time.monotonic() < deadline:
                try:
                    info = await admin.describe_cluster()
                    unfenced = {
                        b.node_id for b in info.brokers if not b.fenced and b.epoch > newer_than.get(b.node_id, -1)
                    }
                    if info.controller_leader >= 0 and running <= unfenced:
                        return
                    last = f"controller leader {info.controller_leader}, unfenced brokers {sorted(unfenced)}"
                except OdradekError as e:
                    last = str(e)
                dead = [n.node_id for n in self.nodes if n.pid and process_state(n.pid) == "stopped"]
                if dead and time.monotonic() > deadline - timeout + 3:
                    last += f"; nodes {dead} exited (see their node.log)"
                await asyncio.sleep(0.2)
        raise LocalClusterError(f"cluster not ready after {timeout:.0f}s: {last}")

    def start_all_and_wait(self, timeout: float = 60.0) -> None:
        """Start every stopped node and wait until the cluster is ready (a secured one with its ``admin`` user);
        stop it again if it never is."""
        self.start_all()
        try:
            run_sync(self.wait_ready(timeout))
            if self.security:
                run_sync(self.create_admin_user())
        except BaseException:
            self.stop_all(timeout=5)
            raise

    async def create_topics(self, topics: Mapping[str, int | TopicSpec | Mapping[str, Any]]) -> list[str]:
        """Create the topics that do not exist yet (see ``topic_specs``); return the names created."""
        created = []
        async with AsyncAdmin(self._admin_config(10000)) as admin:
            existing = set(await admin.list_topics(include_internal=True))
            for name, spec in topic_specs(topics).items():
                if name in existing:
                    continue
                await admin.create_topic(name, spec.partitions, spec.replication_factor, spec.configs)
                created.append(name)
        return created


@contextlib.contextmanager
def running_cluster(
    controllers: int = 1,
    brokers: int = 1,
    *,
    combined: bool = False,
    config: Mapping[str, Any] | None = None,
    topics: Mapping[str, int | TopicSpec | Mapping[str, Any]] | None = None,
    directory: str | Path | None = None,
    timeout: float = 60.0,
    tls: bool = False,
    security: bool = False,
    http_api: bool = False,
    schema_registry: bool = False,
) -> Iterator[DevCluster]:
    """A cluster of real ``odradek server`` processes for the length of a ``with`` block: started, ready (a
    controller leads, every broker is unfenced) and holding ``topics`` on entry; stopped on exit, and its
    directory deleted unless one was given.

    ``config`` applies to every node's TOML config (e.g. ``{"num.partitions": 3}``). The cluster's
    ``bootstrap_servers`` is what clients connect to; ``kafka_bootstrap_servers`` (every broker's Kafka listener)
    is what Kafka's own clients connect to, ``http_urls`` (with ``http_api``) every broker's HTTP API::

        with running_cluster(brokers=1, topics={"orders": 3}) as cluster:
            producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    """
    specs = topic_specs(topics)  # a bad topic fails before any process starts
    owned = directory is None
    root = Path(tempfile.mkdtemp(prefix="odradek-")) if directory is None else Path(directory)
    try:
        cluster = DevCluster.create(
            root,
            controllers,
            brokers,
            combined,
            dict(config or {}),
            tls=tls,
            security=security,
            http_api=http_api,
            schema_registry=schema_registry,
        )
        cluster.start_all_and_wait(timeout)
        try:
            if specs:
                run_sync(cluster.create_topics(specs))
            yield cluster
        finally:
            cluster.stop_all(timeout=10)
    finally:
        if owned:
            shutil.rmtree(root, ignore_errors=True)
