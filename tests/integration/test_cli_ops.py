"""CLI-wide and operational behaviour against a real ``odradek dev up`` cluster: one-line (or JSON) errors,
``--version``, a default bootstrap port, cluster-id validation, profile purge, the broker's warning while no
controller answers, idle gRPC connections without GOAWAY, and clean close of several synchronous clients."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.client.record import codec

from .conftest import wait_for

pytestmark = pytest.mark.integration

KEEPALIVE_MS = 500  # shrunk from 30 s so a few idle ping intervals fit in seconds


def environment(home: Path) -> dict[str, str]:
    env = {**os.environ, "ODRADEK_HOME": str(home), "ODRADEK_GRPC_KEEPALIVE_TIME_MS": str(KEEPALIVE_MS)}
    env.pop("ODRADEK_BOOTSTRAP_SERVERS", None)
    return env


def odradek(home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "odradek.client.cli.main", *args],
        capture_output=True,
        text=True,
        env=environment(home),
        timeout=120,
    )


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("home")
    up = odradek(home, "dev", "up", "--controllers", "1", "--brokers", "2", "--format", "json")
    assert up.returncode == 0, up.stderr
    yield home
    odradek(home, "dev", "down", "--purge")


def status(home: Path) -> list[dict]:
    return json.loads(odradek(home, "dev", "status", "--format", "json").stdout)


def test_version_names_codec_and_python() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "odradek.client.cli.main", "--version"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    expected = {"native": "record codec: native (", "python": "record codec: pure Python ("}[codec.IMPLEMENTATION]
    assert lines[0].startswith("odradek ") and lines[1].startswith(expected)
    assert lines[2].startswith("python: ") and sys.version.split()[0] in lines[2]


def test_bootstrap_without_port_defaults_to_9092(home: Path) -> None:
    """Observed: ``topic list -X 127.0.0.1`` printed a ValueError traceback."""
    result = odradek(home, "topic", "list", "-X", "127.0.0.1", "--timeout-ms", "1500")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert "127.0.0.1:9092" in result.stderr and "Traceback" not in result.stderr


def test_unexpected_failure_is_one_line_and_debug_shows_the_traceback(home: Path) -> None:
    cluster_json = Path(status(home)[0]["log"]).parent.parent / "cluster.json"
    # A directory that is not a dev cluster: dev status fails reading it, an error nobody words for the user.
    broken = cluster_json.parent.parent / "broken"
    broken.mkdir(exist_ok=True)
    (broken / "cluster.json").write_text("{}")
    plain = odradek(home, "dev", "status", "--dir", str(broken))
    assert plain.returncode == 1 and plain.stderr.count("\n") == 1 and plain.stderr.startswith("error: KeyError")
    debug = odradek(home, "--debug", "dev", "status", "--dir", str(broken))
    assert (
        debug.returncode == 1 and "Traceback" in debug.stderr and debug.stderr.splitlines()[-1] == plain.stderr.strip()
    )


def test_errors_as_json(home: Path) -> None:
    result = odradek(home, "topic", "describe", "nope", "--format", "json")
    assert result.returncode == 1 and result.stdout == ""
    error = json.loads(result.stderr)["error"]
    assert error["code"] == "UNKNOWN_TOPIC_OR_PARTITION" and "nope" in error["message"]


def test_storage_format_refuses_a_cluster_id_that_is_not_a_uuid(home: Path, tmp_path: Path) -> None:
    config = tmp_path / "node.toml"
    config.write_text(f'node.id = 9\nprocess.roles = ["broker"]\nlog.dirs = ["{tmp_path / "data"}"]\n')
    result = odradek(home, "storage", "format", "--cluster-id", "notauuid", "--config", str(config))
    assert result.returncode == 1 and "is not a UUID" in result.stderr
    assert not (tmp_path / "data").exists()


def test_dev_status_shows_metrics_url_and_log_path(home: Path) -> None:
    human = odradek(home, "dev", "status").stdout
    for node in status(home):
        assert node["metrics"].startswith("http://127.0.0.1:") and node["metrics"] in human
        assert Path(node["log"]).exists() and node["log"] in human


DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
SUFFIXES = ("", "_total", "_bucket", "_sum", "_count", "_created")


def test_dashboard_and_alerts_query_only_exported_metrics(home: Path) -> None:
    """Every odradek_* name in the Grafana dashboard and the alert rules is one the nodes export."""
    import re
    import urllib.request

    import yaml
    from prometheus_client.parser import text_string_to_metric_families

    exported: set[str] = set()
    for node in status(home):
        with urllib.request.urlopen(node["metrics"], timeout=10) as response:
            text = response.read().decode()
        exported |= {f.name for f in text_string_to_metric_families(text)}
    dashboard = json.loads((DEPLOY / "grafana" / "odradek.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
    alerts = [r for g in rules["groups"] for r in g["rules"]]
    exprs += [r["expr"] for r in alerts]
    assert {"OdradekNoActiveController", "OdradekOfflinePartitions", "OdradekUnderMinIsrPartitions"} <= {
        r["alert"] for r in alerts
    }
    queried = {name for e in exprs for name in re.findall(r"odradek_[a-z0-9_]+", e)}
    assert {"odradek_log_dir_free_bytes", "odradek_under_replicated_partitions"} <= queried
    missing = {q for q in queried if not any(q.removesuffix(s) in exported for s in SUFFIXES if q.endswith(s))}
    assert not missing, f"queried but not exported: {sorted(missing)}"


CLOSE_PROBE = """
import sys, threading
from odradek.client import Admin, Consumer, TopicPartition
servers, admin_servers = sys.argv[1], sys.argv[2]
stop = threading.Event()
consumers = [
    Consumer({"bootstrap.servers": servers, "auto.offset.reset": "latest", "fetch.max.wait.ms": 500})
    for _ in range(6)
]
for c in consumers:
    c.assign([TopicPartition("noise", 0)])
def poll(c):
    while not stop.is_set():
        c.poll(timeout_ms=50)
threads = [threading.Thread(target=poll, args=(c,)) for c in consumers]
for t in threads:
    t.start()
admin = Admin({"bootstrap.servers": admin_servers})
admin.describe_cluster()
stop.set()
for t in threads:
    t.join()
for c in consumers:
    c.close()
admin.close()
Admin({"bootstrap.servers": admin_servers}).close()
print("closed")
"""


def test_closing_several_sync_clients_prints_nothing(home: Path) -> None:
    assert odradek(home, "topic", "create", "noise", "-p", "1", "-r", "1").returncode == 0
    profile = json.loads((home / "profile.json").read_text())
    for _ in range(3):  # the race showed in about one run of three
        result = subprocess.run(
            [sys.executable, "-c", CLOSE_PROBE, profile["bootstrap_servers"], profile["controllers"]],
            capture_output=True,
            text=True,
            env=environment(home),
            timeout=60,
        )
        assert result.returncode == 0 and result.stdout == "closed\n"
        assert result.stderr == "", result.stderr


IDLE_CLIENT = """
import sys, time
from odradek.client import Admin, Producer
admin = Admin({"bootstrap.servers": sys.argv[2]})
producer = Producer({"bootstrap.servers": sys.argv[1]})
admin.describe_cluster()
producer.send("noise", "before").result(30)
time.sleep(float(sys.argv[3]))  # idle connections are the point: several keepalive intervals
admin.describe_cluster()
producer.send("noise", "after").result(30)
producer.close()
admin.close()
"""


def test_idle_clients_and_nodes_log_no_goaway(home: Path) -> None:
    """Observed after ~90 s idle: GOAWAY ENHANCE_YOUR_CALM too_many_pings in node logs and client stderr. With the
    keepalive shrunk to 0.5 s on both sides, 6 s idle is twelve intervals (gRPC's default server policy refuses
    the third ping)."""
    profile = json.loads((home / "profile.json").read_text())
    result = subprocess.run(
        [sys.executable, "-c", IDLE_CLIENT, profile["bootstrap_servers"], profile["controllers"], "6"],
        capture_output=True,
        text=True,
        env=environment(home),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "too_many_pings" not in result.stderr and "GOAWAY" not in result.stderr, result.stderr
    for node in status(home):
        text = Path(node["log"]).read_text()
        assert "too_many_pings" not in text and "GOAWAY" not in text, node["log"]


def test_broker_warns_while_no_controller_answers(home: Path) -> None:
    """Observed: a broker that cannot reach any controller logged nothing for 30 s."""
    nodes = {n["node_id"]: n for n in status(home)}
    controller = next(n for n in nodes.values() if "controller" in n["roles"])
    broker_log = Path(next(n for n in nodes.values() if n["roles"] == ["broker"])["log"])
    assert odradek(home, "dev", "kill", str(controller["node_id"])).returncode == 0
    address = controller["controller"]
    wait_for(
        lambda: any(
            "no active controller reachable" in line and address in line for line in broker_log.read_text().splitlines()
        ),
        timeout=20,
        what=f"a broker warning naming {address}",
    )
    assert odradek(home, "dev", "start", str(controller["node_id"]), "--wait").returncode == 0
    wait_for(lambda: "reached active controller" in broker_log.read_text(), timeout=20, what="the recovery line")


def test_dev_down_purge_clears_the_profile(home: Path) -> None:
    """Observed: after ``dev down --purge`` the profile still pointed at the dead cluster's addresses."""
    down = odradek(home, "dev", "down", "--purge", "--format", "json")
    assert down.returncode == 0 and json.loads(down.stdout)["profile_cleared"] is True
    assert not (home / "profile.json").exists()
    result = odradek(home, "topic", "list")
    assert result.returncode == 1 and "no cluster" in result.stderr
