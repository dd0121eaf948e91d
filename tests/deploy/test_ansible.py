"""The Ansible playbooks: syntax check, ansible-lint's production profile, and the cluster description template
rendered from the example inventory (locally: no host is contacted) loading as a valid cluster description.

Ansible's state and temporary files go to a temporary ANSIBLE_HOME, never into the repository.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from odradek.deploy.cluster import load_cluster, render_node_config

ANSIBLE_DIR = Path(__file__).resolve().parents[2] / "deploy" / "ansible"
BIN = Path(sys.executable).parent

# CI installs the deploy extra, so there a missing tool is a failure rather than a skip.
pytestmark = pytest.mark.skipif(
    (importlib.util.find_spec("ansible") is None or importlib.util.find_spec("ansiblelint") is None)
    and not os.environ.get("CI"),
    reason="ansible-core and ansible-lint are not installed (pip install -e '.[deploy]')",
)


@pytest.fixture
def ansible_env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "ANSIBLE_HOME": str(tmp_path / "ansible-home"),
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "ANSIBLE_NOCOLOR": "1",
        "NO_COLOR": "1",
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def ansible(env: dict[str, str], tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / tool), *args], cwd=ANSIBLE_DIR, env=env, capture_output=True, text=True, timeout=240
    )


@pytest.mark.parametrize("playbook", ["site.yml", "rolling_restart.yml"])
def test_playbook_syntax(playbook: str, ansible_env: dict[str, str]) -> None:
    result = ansible(ansible_env, "ansible-playbook", "--syntax-check", "-i", "inventory.example.yml", playbook)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ansible_lint_production_profile(ansible_env: dict[str, str]) -> None:
    result = ansible(ansible_env, "ansible-lint", "--offline", "--profile", "production", "--nocolor")
    assert result.returncode == 0, result.stdout + result.stderr


RENDER = """
- name: Render what site.yml would render on each node
  hosts: controllers:brokers
  gather_facts: false
  tasks:
    - name: Render the cluster description
      ansible.builtin.template:
        src: TEMPLATE
        dest: "{{ out }}/{{ inventory_hostname }}.toml"
        mode: "0644"
    - name: Dump the derived variables
      ansible.builtin.copy:
        content: "{{ {'unit': odradek_unit, 'port': odradek_port | int, 'health': odradek_health_command} | to_json }}"
        dest: "{{ out }}/{{ inventory_hostname }}.json"
        mode: "0644"
"""
# A combined node (in both groups), added to the example inventory.
COMBINED = """
all:
  children:
    controllers:
      hosts:
        combined-7: {ansible_host: 10.0.0.31, node_id: 7}
    brokers:
      hosts:
        combined-7: {}
"""


def test_cluster_template_renders_the_inventory(ansible_env: dict[str, str], tmp_path: Path) -> None:
    playbook, extra, out = tmp_path / "render.yml", tmp_path / "combined.yml", tmp_path / "out"
    playbook.write_text(RENDER.replace("TEMPLATE", str(ANSIBLE_DIR / "templates" / "cluster.toml.j2")))
    extra.write_text(COMBINED)
    out.mkdir()
    hosts = ["odradek-controller-1", "odradek-broker-4", "combined-7"]
    result = ansible(
        ansible_env,
        "ansible-playbook",
        *("-i", "inventory.example.yml", "-i", str(extra), "-c", "local", "--limit", ",".join(hosts)),
        *("-e", f"ansible_python_interpreter={sys.executable}", "-e", f"out={out}"),
        *("-e", "odradek_cluster_id=q3vBFp6uRmW5Yx0wRkqkDg", str(playbook)),
    )
    assert result.returncode == 0, result.stdout + result.stderr

    texts = {(out / f"{host}.toml").read_text() for host in hosts}
    assert len(texts) == 1  # every node gets the same description
    spec = load_cluster(out / "combined-7.toml")
    assert spec.cluster_id == "q3vBFp6uRmW5Yx0wRkqkDg"
    assert spec.kafka_port == 9192  # odradek_kafka_port
    assert [(n.node_id, n.host, n.roles, n.rack) for n in spec.nodes] == [
        (1, "10.0.0.11", ("controller",), ""),
        (2, "10.0.0.12", ("controller",), ""),
        (3, "10.0.0.13", ("controller",), ""),
        (4, "10.0.0.21", ("broker",), "rack-a"),
        (5, "10.0.0.22", ("broker",), "rack-b"),
        (6, "10.0.0.23", ("broker",), "rack-c"),
        (7, "10.0.0.31", ("broker", "controller"), ""),
    ]
    assert spec.properties["log.dirs"] == "/var/lib/odradek/data"
    assert spec.properties["min.insync.replicas"] == 2
    for node in spec.nodes:
        render_node_config(spec, node.node_id)

    derived = {host: json.loads((out / f"{host}.json").read_text()) for host in hosts}
    assert derived["odradek-controller-1"]["unit"] == "odradek-controller"
    assert derived["odradek-controller-1"]["port"] == 9093
    assert derived["odradek-broker-4"]["unit"] == "odradek-broker"
    assert derived["combined-7"]["unit"] == "odradek-combined"
    assert derived["combined-7"]["port"] == 9092
    health = derived["odradek-broker-4"]["health"]
    assert health[:4] == ["/opt/odradek/venv/bin/odradek", "cluster", "health", "--exit-code"]
    servers = health[health.index("--bootstrap-servers") + 1].split(",")
    assert servers[:2] == ["10.0.0.21:9092", "10.0.0.22:9092"] and "10.0.0.11:9093" in servers
