"""The CLI's client security settings (``-X key=value``, ``--client-config FILE``, the saved profile) against a
real TLS cluster (the pytest plugin's ``tls=True``): without them one clear ``error:`` line, with them the command
works; unknown keys are refused before anything is dialled."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tomllib
import uuid
from pathlib import Path

import pytest
import requests

from odradek.client.admin import Admin
from odradek.client.cli.client_settings import merged_settings, parse_pairs
from odradek.client.cli.common import CommandError
from odradek.client.consumer import Consumer
from odradek.client.errors import AuthenticationFailedError
from odradek.client.producer import Producer
from odradek.client.structs import TopicPartition
from odradek.deploy.local import DevCluster

TLS_CLUSTER = pytest.mark.odradek_cluster(tls=True)  # the plugin's key: every listener SSL, its own CA


def odradek(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """The real ``odradek`` command with its own home (no profile of the machine's)."""
    env = {**os.environ, "ODRADEK_HOME": str(home)}
    env.pop("ODRADEK_BOOTSTRAP_SERVERS", None)
    return subprocess.run(
        [sys.executable, "-m", "odradek.client.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        input=stdin,
        timeout=90,
    )


def one_error_line(result: subprocess.CompletedProcess, says: str) -> None:
    assert result.returncode == 1 and result.stdout == "", result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], result.stderr


def x_options(settings: dict[str, str]) -> list[str]:
    return [arg for key, value in settings.items() for arg in ("-X", f"{key}={value}")]


@pytest.mark.integration
@TLS_CLUSTER
def test_x_settings_reach_a_tls_cluster_and_without_them_one_clear_error(
    odradek_cluster: DevCluster, tmp_path: Path
) -> None:
    c = odradek_cluster
    without = odradek(tmp_path, "topic", "list", "-X", c.admin_servers, "--timeout-ms", "3000")
    one_error_line(without, "security.protocol=SSL")
    topic = f"t-{uuid.uuid4().hex[:8]}"
    secured = x_options(c.security_config())
    created = odradek(tmp_path, "topic", "create", topic, "-X", c.admin_servers, *secured)
    assert created.returncode == 0, created.stderr
    listed = odradek(tmp_path, "topic", "list", *secured, "-X", f"bootstrap.servers={c.bootstrap_servers}")
    assert listed.returncode == 0 and topic in listed.stdout, listed.stderr


@pytest.mark.integration
@TLS_CLUSTER
def test_a_client_config_file_and_the_saved_profile_carry_the_settings(
    odradek_cluster: DevCluster, tmp_path: Path
) -> None:
    c = odradek_cluster
    topic = f"t-{uuid.uuid4().hex[:8]}"
    config = tmp_path / "client.json"
    config.write_text(json.dumps(c.client_config()))
    assert odradek(tmp_path, "topic", "create", topic, "--client-config", str(config)).returncode == 0
    produced = odradek(tmp_path, "produce", topic, "--client-config", str(config), stdin="a\nb\n")
    assert produced.returncode == 0, produced.stderr
    home = tmp_path / "home"
    home.mkdir()
    (home / "profile.json").write_text(
        json.dumps({"bootstrap_servers": c.bootstrap_servers, "client_config": c.security_config()})
    )
    consumed = odradek(home, "consume", topic, "--reset", "earliest", "-n", "2", "-f", "%s\\n")
    assert consumed.returncode == 0 and consumed.stdout.split() == ["a", "b"], consumed.stderr
    (home / "profile.json").write_text(json.dumps({"bootstrap_servers": c.bootstrap_servers}))
    one_error_line(odradek(home, "topic", "list", "--timeout-ms", "3000"), "security.protocol=SSL")


def test_unknown_settings_and_bad_files_are_one_error_line(tmp_path: Path) -> None:
    typo = odradek(tmp_path, "topic", "list", "-X", "127.0.0.1:1", "-X", "ssl.ca.locaton=ca.crt")
    one_error_line(typo, "unknown client setting 'ssl.ca.locaton' in -X (did you mean 'ssl.ca.location'?)")
    config = tmp_path / "client.json"
    config.write_text(json.dumps({"bootstrap.servers": "127.0.0.1:1", "acks": "all"}))
    one_error_line(odradek(tmp_path, "produce", "t", "--client-config", str(config)), "unknown client setting 'acks'")
    config.write_text("[1]")
    one_error_line(odradek(tmp_path, "topic", "list", "--client-config", str(config)), "must hold a JSON object")
    one_error_line(odradek(tmp_path, "topic", "list", "--client-config", str(tmp_path / "none.json")), "none.json")


def test_later_sources_override_earlier_ones_and_the_profile_gives_no_addresses() -> None:
    profile = {"client_config": {"security.protocol": "SSL", "ssl.ca.location": "a", "bootstrap.servers": "p:1"}}
    file_config = {"ssl.ca.location": "b", "bootstrap.servers": "f:1"}
    assert merged_settings(profile, file_config, parse_pairs(["ssl.ca.location=c"])) == {
        "security.protocol": "SSL",
        "ssl.ca.location": "c",
        "bootstrap.servers": "f:1",
    }
    assert parse_pairs(["sasl.password=a=b"]) == {"sasl.password": "a=b"}
    with pytest.raises(CommandError, match="the saved profile"):
        merged_settings({"client_config": {"linger.ms": 1}}, None, {})


@pytest.mark.integration
def test_dev_up_security_gives_a_secured_cluster_its_admin_client_config_and_the_profile(tmp_path: Path) -> None:
    home, directory = tmp_path / "home", tmp_path / "dev"
    up = odradek(home, "dev", "up", "--security", "--controllers", "1", "--brokers", "2", "--dir", str(directory))
    assert up.returncode == 0, up.stderr
    try:
        config = json.loads((directory / "admin-client.json").read_text())
        assert config["security.protocol"] == "SASL_SSL" and config["sasl.username"] == "admin"
        assert (directory / "admin-client.json").stat().st_mode & 0o077 == 0  # holds the password
        topic = f"t-{uuid.uuid4().hex[:8]}"
        assert odradek(home, "topic", "create", topic).returncode == 0  # through the saved profile
        assert odradek(home, "produce", topic, stdin="a\nb\n").returncode == 0
        with Admin(config) as admin:
            assert topic in admin.list_topics()
        with Producer(config) as producer:
            producer.send(topic, b"c").result(15)
        with Consumer({**config, "auto.offset.reset": "earliest"}) as consumer:
            consumer.assign([TopicPartition(topic, 0)])
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(got) < 3 and time.monotonic() < deadline:
                got.extend(r.value for r in consumer.poll(timeout_ms=200))
        assert got == [b"a", b"b", b"c"]
        with pytest.raises(AuthenticationFailedError), Admin({**config, "sasl.password": "wrong"}) as admin:
            admin.list_topics()
        node_configs = [tomllib.loads(p.read_text()) for p in directory.glob("node-*/node.toml")]
        assert {c["authorizer.class.name"] for c in node_configs} == {"odradek"}
        # The HTTP API and console over https: the admin logs in with Basic, trusting the cluster's CA.
        status = json.loads(odradek(home, "dev", "status", "--dir", str(directory), "--format", "json").stdout)
        https = [n["http"] for n in status if n["http"]]
        assert len(https) == 2 and all(url.startswith("https://") for url in https)
        answer = requests.get(
            f"{https[0]}/v3/clusters",
            auth=(config["sasl.username"], config["sasl.password"]),
            verify=str(directory / "tls" / "ca.crt"),
            timeout=15,
        )
        assert answer.status_code == 200, answer.text
        assert (
            requests.get(f"{https[0]}/v3/clusters", verify=str(directory / "tls" / "ca.crt"), timeout=15).status_code
            == 401
        )
        assert all("User:admin" in c["super.users"].split(";") for c in node_configs)
    finally:
        odradek(home, "dev", "down", "--dir", str(directory))
