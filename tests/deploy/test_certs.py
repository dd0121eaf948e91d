"""``odradek deploy certs`` and ``deploy config --tls``: a deployment's CA and certificates (kept when they fit, never
replaced silently), and generated configs with every listener SSL and mutual TLS that load and run a node."""

from __future__ import annotations

import contextlib
import json
import signal
import stat
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from cryptography import x509

from odradek.broker.config import NodeConfig
from odradek.deploy.certs import CertsError, deployment_certs
from odradek.deploy.cluster import ClusterSpecError, parse_cluster, render_node_config, write_configs
from odradek.deploy.local import free_port

NODES = {1: ["10.0.0.1"], 2: ["broker-2.internal"]}
DESCRIPTION = {
    "nodes": [
        {"id": 1, "host": "10.0.0.1", "roles": ["controller"]},
        {"id": 2, "host": "10.0.0.2", "roles": ["broker"]},
        {"id": 3, "host": "10.0.0.3", "roles": "both"},
    ]
}


def odradek(*args: str) -> list[str]:
    return [sys.executable, "-m", "odradek.client.cli.main", *args]


def cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def sans(path: Path) -> list[str]:
    ext = cert(path).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return [str(n.value) for n in ext]


def test_creates_a_ca_node_certificates_with_their_hosts_and_an_admin_certificate(tmp_path: Path) -> None:
    made = deployment_certs(tmp_path, NODES, days=30)
    assert made.as_json()["nodes"]["1"] == {
        "cert": str(tmp_path / "node-1.crt"),
        "key": str(tmp_path / "node-1.key"),
        "status": "created",
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"{s}.{e}" for s in ("ca", "node-1", "node-2", "admin-client") for e in ("crt", "key")
    )
    for key in tmp_path.glob("*.key"):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert sans(tmp_path / "node-1.crt") == ["10.0.0.1"]
    assert sans(tmp_path / "node-2.crt") == ["broker-2.internal"]
    ca = cert(tmp_path / "ca.crt")
    for stem in ("node-1", "node-2", "admin-client"):
        cert(tmp_path / f"{stem}.crt").verify_directly_issued_by(ca)
    admin = cert(tmp_path / "admin-client.crt")
    assert admin.subject.rfc4514_string() == "CN=admin,O=odradek"
    assert (admin.not_valid_after_utc - admin.not_valid_before_utc).days == 30


def test_a_second_run_keeps_what_fits_and_adds_a_new_node(tmp_path: Path) -> None:
    deployment_certs(tmp_path, NODES)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    made = deployment_certs(tmp_path, {**NODES, 3: ["10.0.0.3"]})
    assert (made.ca.status, made.nodes[1].status, made.nodes[3].status, made.admin.status) == (
        "kept",
        "kept",
        "created",
        "kept",
    )
    assert {name: (tmp_path / name).read_bytes() for name in before} == before
    cert(tmp_path / "node-3.crt").verify_directly_issued_by(cert(tmp_path / "ca.crt"))


def test_a_node_key_that_no_longer_fits_is_refused_unless_forced(tmp_path: Path) -> None:
    deployment_certs(tmp_path, NODES)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(CertsError, match=r"node-1\.key exists but its names \['10.0.0.1'\].*pass --force"):
        deployment_certs(tmp_path, {1: ["10.0.0.9"], 2: NODES[2], 5: ["10.0.0.5"]})
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # nothing written, not even node 5's

    made = deployment_certs(tmp_path, {1: ["10.0.0.9"], 2: NODES[2]}, force=True)
    assert made.nodes[1].status == made.nodes[2].status == "replaced"
    assert made.ca.status == "kept" and (tmp_path / "ca.key").read_bytes() == before["ca.key"]
    assert (tmp_path / "node-2.key").read_bytes() != before["node-2.key"]
    assert sans(tmp_path / "node-1.crt") == ["10.0.0.9"]


def test_certificates_of_another_ca_are_refused(tmp_path: Path) -> None:
    deployment_certs(tmp_path, NODES)
    for name in ("ca.crt", "ca.key"):
        (tmp_path / name).unlink()
    with pytest.raises(CertsError, match="another CA signed it"):
        deployment_certs(tmp_path, NODES)
    assert not (tmp_path / "ca.crt").exists()  # the refusal wrote no new CA either


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda d: (d / "ca.crt").write_text("x"), "ca.key is missing"),
        (lambda d: ((d / "ca.crt").write_text("x"), (d / "ca.key").write_text("x")), "the CA in .* does not load"),
        (lambda d: (d / "node-1.key").write_text("x"), "node-1.key exists but its key or certificate is missing"),
    ],
)
def test_bad_directories_are_refused(tmp_path: Path, setup, message: str) -> None:  # type: ignore[no-untyped-def]
    setup(tmp_path)
    with pytest.raises(CertsError, match=message):
        deployment_certs(tmp_path, NODES)


def test_tls_configs_map_every_listener_to_ssl_with_mutual_tls(tmp_path: Path) -> None:
    spec = parse_cluster(DESCRIPTION)
    deployment_certs(tmp_path / "tls", {n.node_id: [n.host] for n in spec.nodes})
    written = write_configs(spec, tmp_path / "etc", tmp_path / "tls")
    for node_id, path in written.items():
        config = NodeConfig.load(path)
        assert config.all_listener_names()
        assert {config.listener_protocol(n) for n in config.all_listener_names()} == {"SSL"}
        assert config.controller_protocol == config.inter_broker_protocol == "SSL"
        assert config["ssl.client.auth"] == "required"
        assert config["ssl.certificate.location"] == str(tmp_path / "tls" / f"node-{node_id}.crt")
        assert config["ssl.key.location"] == str(tmp_path / "tls" / f"node-{node_id}.key")
        assert config["ssl.ca.location"] == str(tmp_path / "tls" / "ca.crt")
    broker = NodeConfig.load(written[2])
    assert broker.kafka_protocol == "SSL"
    # without --tls nothing changes: plaintext listeners, no ssl keys
    plain = tomllib.loads(render_node_config(spec, 2))
    assert plain["listeners"].startswith("PLAINTEXT://") and "ssl.ca.location" not in plain


def test_tls_configs_need_the_node_files_and_own_the_tls_properties(tmp_path: Path) -> None:
    spec = parse_cluster(DESCRIPTION)
    deployment_certs(tmp_path, {1: ["10.0.0.1"]})
    with pytest.raises(ClusterSpecError, match=r"node 2: .*node-2\.crt not found \(odradek deploy certs writes it\)"):
        write_configs(spec, tmp_path / "etc", tmp_path)
    assert not (tmp_path / "etc").exists()  # node 1's config was not written either
    clashing = parse_cluster({**DESCRIPTION, "properties": {"ssl.client.auth": "none"}})
    with pytest.raises(ClusterSpecError, match=r"'ssl\.client\.auth' is set for every node by --tls"):
        render_node_config(clashing, 1, tmp_path)


def test_cli_writes_certs_as_json_and_errors_in_one_line(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.toml"
    cluster.write_text('[[nodes]]\nid = 1\nhost = "10.0.0.1"\nroles = "both"\n')
    run = subprocess.run(
        odradek("deploy", "certs", "--cluster", str(cluster), "--out", str(tmp_path / "tls"), "--format", "json"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert set(out) == {"ca", "nodes", "admin"} and list(out["nodes"]) == ["1"]
    assert out["admin"] == {
        "cert": str(tmp_path / "tls" / "admin-client.crt"),
        "key": str(tmp_path / "tls" / "admin-client.key"),
        "status": "created",
    }
    cluster.write_text('[[nodes]]\nid = 1\nhost = "10.0.0.2"\nroles = "both"\n')
    refused = subprocess.run(
        odradek("deploy", "certs", "--cluster", str(cluster), "--out", str(tmp_path / "tls")),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode != 0
    assert refused.stderr.startswith("error: ") and refused.stderr.count("\n") == 1
    assert "node-1.key exists but its names ['10.0.0.1'] are not ['10.0.0.2']: pass --force" in refused.stderr


@pytest.mark.integration
def test_a_generated_tls_config_runs_a_node_that_only_mtls_clients_reach(tmp_path: Path) -> None:
    from odradek.client import Admin
    from odradek.client.errors import NetworkError

    ports = {"broker_port": free_port(), "controller_port": free_port(), "kafka_port": free_port()}
    cluster = tmp_path / "cluster.toml"
    cluster.write_text(
        "".join(f"{k} = {v}\n" for k, v in ports.items())
        + f'metrics_port = 0\n[properties]\n"log.dirs" = "{tmp_path}/data"\n"default.replication.factor" = 1\n'
        '"min.insync.replicas" = 1\n[[nodes]]\nid = 1\nhost = "127.0.0.1"\nroles = "both"\n'
    )
    tls = tmp_path / "tls"
    for args in (
        ("deploy", "certs", "--cluster", str(cluster), "--out", str(tls)),
        ("deploy", "config", "--cluster", str(cluster), "--out", str(tmp_path), "--tls", str(tls)),
        ("storage", "format", "--cluster-id", "deployTlsCluster_00001", "--config", str(tmp_path / "node-1.toml")),
    ):
        subprocess.run(odradek(*args), check=True, capture_output=True, timeout=60)
    servers = f"127.0.0.1:{ports['broker_port']}"
    security = {
        "security.protocol": "SSL",
        "ssl.ca.location": str(tls / "ca.crt"),
        "ssl.certificate.location": str(tls / "admin-client.crt"),
        "ssl.key.location": str(tls / "admin-client.key"),
    }
    with contextlib.ExitStack() as stack:
        log = stack.enter_context(open(tmp_path / "node.log", "w"))
        node = subprocess.Popen(odradek("server", "--config", str(tmp_path / "node-1.toml")), stdout=log, stderr=log)
        stack.callback(node.wait, 30)
        stack.callback(node.send_signal, signal.SIGTERM)
        admin = stack.enter_context(Admin({**security, "bootstrap.servers": servers, "request.timeout.ms": 2000}))
        deadline = time.monotonic() + 60
        while True:  # the node is up once it answers over TLS with its broker registered
            with contextlib.suppress(NetworkError):
                if [b.node_id for b in admin.describe_cluster().brokers] == [1]:
                    break
            assert time.monotonic() < deadline and node.poll() is None, (tmp_path / "node.log").read_text()[-2000:]
            time.sleep(0.5)
        no_cert = {"security.protocol": "SSL", "ssl.ca.location": security["ssl.ca.location"]}
        stranger = stack.enter_context(Admin({**no_cert, "bootstrap.servers": servers, "request.timeout.ms": 2000}))
        with pytest.raises(NetworkError):  # ssl.client.auth=required: no client certificate, no connection
            stranger.describe_cluster()
