"""kafka-python's integration suite against odradek.

Runs ``test/integration`` of a kafka-python source tree, the way its authors run it against a broker they did not
start (``KAFKA_VERSION``, ``KAFKA_URI`` naming one broker, ``KAFKA_ROOT`` naming an existing directory), against a
local cluster in a temporary directory: one node, controller and broker, id 0, as the suite's own fixture starts
Kafka. kafka-python-selection.txt (beside this file) names the tests left out, each with its reason. Prints
pytest's summary, one line per test that did not pass, and the counts; exits non-zero on any failure or error.
pytest's output and JUnit XML are kept in the log directory (default build/compat/kafka-python).

The suite comes from kafka-python's repository at a release tag: its sdist lacks the fixture's service module
(``test/service.py``) and the package marker of ``test/``. Give the tree with ``--source`` or ``KAFKA_PYTHON_SRC``,
e.g. from ``git clone --depth 1 --branch 3.0.11 https://github.com/dpkp/kafka-python``. Without GitHub,
``--sdist VERSION`` takes the sdist from PyPI and stands in for the two missing files (the package marker, and the
service module's ExternalService, all the suite uses of it against an external broker).

    python tests/compat/kafka_python.py --source ~/src/kafka-python
    python tests/compat/kafka_python.py --source ~/src/kafka-python --only "acls or configs"
    python tests/compat/kafka_python.py --sdist 3.0.12

The library under test is the kafka-python installed for ``--python`` (default: this interpreter); the suite's
copy of the ``kafka`` package in the source tree is not used. pytest, pytest-timeout and, for the snappy cases,
python-snappy must be installed there. Not a pytest module (its name does not start with test_).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from dev_cluster import DevCli

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SELECTION = HERE / "kafka-python-selection.txt"
# The Kafka version odradek's ApiVersions answers imply; the suite picks its expectations and skips from it.
KAFKA_VERSION = "3.9.0"
# The settings kafka-python's fixture gives the Kafka broker it starts (its properties for 1.0 to 3.x), where
# odradek has them: topics created on first use get 4 partitions and 1 replica, the internal topics 1 replica, and
# the group coordinator takes session timeouts from 1 s and starts rebalances without delay.
CLUSTER_CONFIG = {
    "num.partitions": "4",
    "default.replication.factor": "1",
    "offsets.topic.num.partitions": "2",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "offsets.commit.timeout.ms": "500",
    "group.min.session.timeout.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
    "replica.lag.time.max.ms": "1000",
    "log.cleaner.enable": "false",
}
# Per test; the suite's own setting (300 s, thread method) ends the whole run at the first timeout, the signal
# method fails only that test.
TEST_TIMEOUT = 120
PASS_TIMEOUT = 1800.0
# The stand-ins --sdist adds: the sdist has test/integration but neither test/__init__.py nor test/service.py.
SERVICE_STAND_IN = '''"""Stand-in for kafka-python's test/service.py, which its sdist lacks (added by odradek's runner).

ExternalService is what the integration fixtures use for a broker named by KAFKA_URI; SpawnedService starts a
Kafka or ZooKeeper process, which a run against an external broker never does."""

import logging

__all__ = ["ExternalService", "SpawnedService"]

log = logging.getLogger(__name__)


class ExternalService:
    def __init__(self, host, port):
        log.info("Using already running service at %s:%d", host, port)
        self.host = host
        self.port = port

    def open(self):
        pass

    def close(self):
        pass

    def dump_logs(self):
        pass

    def wait_for(self, pattern, timeout=30):
        pass


class SpawnedService:
    def __init__(self, args=None, env=None):
        raise RuntimeError("this copy of the suite runs against an external broker only (KAFKA_URI)")
'''


@dataclass
class Selection:
    deselected: dict[str, str] = field(default_factory=dict)  # node id prefix -> reason


@dataclass
class Outcome:
    node_id: str
    status: str  # passed, failed, error, skipped
    message: str = ""


def say(text: str) -> None:
    print(text, flush=True)


def read_selection(path: Path) -> Selection:
    selection = Selection()
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        verb, node_id, reason = ([*line.split(None, 2), "", ""])[:3]
        if not reason:
            raise SystemExit(f"{path}:{number}: a line needs a node id and a reason")
        if verb != "deselect":
            raise SystemExit(f"{path}:{number}: expected 'deselect', got {verb!r}")
        selection.deselected[node_id] = reason
    return selection


# --- the suite ------------------------------------------------------------------------------------------------------


def from_source(source: Path, suite: Path) -> str:
    """Copy the suite (test/ and pyproject.toml, for pytest's settings) without the tree's ``kafka`` package."""
    for needed in ("test/integration/conftest.py", "test/service.py", "pyproject.toml"):
        if not (source / needed).exists():
            raise SystemExit(f"{source} is not a kafka-python repository tree ({needed} is missing)")
    shutil.copytree(source / "test", suite / "test", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(source / "pyproject.toml", suite / "pyproject.toml")
    version = subprocess.run(
        ["git", "-C", str(source), "describe", "--tags", "--always"], capture_output=True, text=True, check=False
    ).stdout.strip()
    if not version:
        text = (source / "kafka" / "version.py").read_text() if (source / "kafka" / "version.py").exists() else ""
        version = text.split("=", 1)[1].strip().strip("'\"") if "=" in text else "unknown"
    return f"repository tree {source} ({version})"


def from_sdist(python: str, version: str, work: Path, suite: Path) -> str:
    download = work / "sdist"
    pip = [python, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps", "-d", str(download)]
    subprocess.run([*pip, f"kafka-python=={version}"], check=True)
    archive = next(download.glob("kafka*python-*.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(download, filter="data")
    tree = next(p for p in download.iterdir() if p.is_dir())
    if not (tree / "test" / "integration" / "conftest.py").exists():
        raise SystemExit(f"{archive.name} has no test/integration")
    shutil.copytree(tree / "test", suite / "test")
    shutil.copy(tree / "pyproject.toml", suite / "pyproject.toml")
    added = []
    for name, text in (("__init__.py", ""), ("service.py", SERVICE_STAND_IN)):
        if not (suite / "test" / name).exists():
            (suite / "test" / name).write_text(text)
            added.append(f"test/{name}")
    return f"sdist {archive.name} from PyPI (stand-ins: {', '.join(added) or 'none'})"


def library(python: str, cwd: Path) -> str:
    probe = subprocess.run(
        [python, "-c", "import kafka, pytest, pytest_timeout; print(kafka.__version__, kafka.__file__)"],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode:
        raise SystemExit(f"{python} lacks kafka-python, pytest or pytest-timeout:\n{probe.stderr.strip()}")
    return probe.stdout.strip()


def collect(python: str, suite: Path, env: dict[str, str]) -> list[str]:
    result = subprocess.run(
        [python, "-m", "pytest", "test/integration", "-p", "no:cacheprovider", "--collect-only", "-q"],
        cwd=suite,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    ids = [line for line in result.stdout.splitlines() if line.startswith("test/integration/") and "::" in line]
    if result.returncode or not ids:
        raise SystemExit(f"collecting the suite failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return ids


def matching(prefix: str, ids: list[str]) -> list[str]:
    return [i for i in ids if i == prefix or i.startswith((prefix + "::", prefix + "["))]


def check_selection(selection: Selection, ids: list[str]) -> None:
    for prefix in selection.deselected:
        if not matching(prefix, ids):
            raise SystemExit(f"{SELECTION.name}: {prefix} matches no test of this suite")


# --- the cluster ----------------------------------------------------------------------------------------------------


class Cluster(DevCli):
    """An `odradek dev up` cluster of our own, as the suite's fixture starts Kafka: one node, controller and broker,
    with node id 0 (some tests name broker 0); its own ODRADEK_HOME and directory."""

    def __init__(self, odradek: str, base: Path) -> None:
        super().__init__(odradek, base / "cluster", base / "home")
        self.kafka_uri = ""

    def up(self) -> None:
        started = time.monotonic()
        shape = ("--combined", "--controllers", "1", "--first-node-id", "0")
        self.kafka_uri = "kafka://" + self.dev_up(*shape, config=CLUSTER_CONFIG)["kafka_bootstrap_servers"]
        say(f"node 0 up in {time.monotonic() - started:.0f} s: KAFKA_URI={self.kafka_uri}")

    def down(self) -> None:
        self.cli("down", check=False)


# --- running --------------------------------------------------------------------------------------------------------


def outcomes(xml: Path) -> list[Outcome]:
    out = []
    for case in ET.parse(xml).iter("testcase"):
        module = case.get("classname", "").split(".")
        name = case.get("name", "")
        # classname is test.integration.test_x or test.integration.test_x.TestClass
        path = "/".join(module[:3]) + ".py"
        node_id = "::".join([path, *module[3:], name])
        status, message = "passed", ""
        for kind in ("failure", "error", "skipped"):
            child = case.find(kind)
            if child is not None:
                status = {"failure": "failed", "error": "error", "skipped": "skipped"}[kind]
                message = (child.get("message") or "").strip().splitlines()[0][:200] if child.get("message") else ""
                break
        out.append(Outcome(node_id, status, message))
    return out


def run_pass(
    name: str, python: str, suite: Path, env: dict[str, str], args: list[str], logs: Path, filtered: bool
) -> list[Outcome]:
    xml = logs / f"{name}.xml"
    log = logs / f"{name}.log"
    command = [python, "-m", "pytest", *args, "-p", "no:cacheprovider", "-rfEs", f"--junitxml={xml}"]
    command += ["--timeout", str(TEST_TIMEOUT), "--timeout-method", "signal"]
    say(f"--- {name}: {' '.join(command[1:])}")
    started = time.monotonic()
    with log.open("w") as out:
        process = subprocess.Popen(
            command, cwd=suite, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            returncode = process.wait(timeout=PASS_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise SystemExit(f"{name}: pytest did not finish in {PASS_TIMEOUT:.0f} s (see {log})") from None
    tail = [line for line in log.read_text(errors="replace").splitlines() if line.startswith("=")][-1:]
    say(f"{name}: {tail[0].strip('= ') if tail else 'no summary'} ({time.monotonic() - started:.0f} s, {log})")
    if returncode == 5 and filtered:  # -k left nothing in this pass
        return []
    if returncode not in (0, 1) or not xml.exists():
        raise SystemExit(f"{name}: pytest exited {returncode} (see {log})")
    return outcomes(xml)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--source",
        type=Path,
        default=Path(os.environ["KAFKA_PYTHON_SRC"]) if os.environ.get("KAFKA_PYTHON_SRC") else None,
        help="a kafka-python repository tree at a release tag ($KAFKA_PYTHON_SRC)",
    )
    source.add_argument("--sdist", metavar="VERSION", help="take the suite from this version's sdist on PyPI")
    parser.add_argument("--python", default=sys.executable, help="the interpreter with kafka-python and pytest")
    parser.add_argument("--only", default="", help="a pytest -k expression")
    parser.add_argument("--logs", type=Path, default=ROOT / "build" / "compat" / "kafka-python")
    parser.add_argument("--odradek", default=str(Path(sys.executable).parent / "odradek"))
    args = parser.parse_args()
    if args.source is None and args.sdist is None:
        parser.error("give the suite: --source PATH (or KAFKA_PYTHON_SRC) or --sdist VERSION")

    total_started = time.monotonic()
    selection = read_selection(SELECTION)
    if args.logs.exists():
        shutil.rmtree(args.logs)
    args.logs.mkdir(parents=True)
    results: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="odradek-compat-kafka-python-") as tmp:
        base = Path(tmp)
        suite = base / "suite"
        suite.mkdir()
        origin = (
            from_source(args.source.resolve(), suite)
            if args.source
            else from_sdist(args.python, args.sdist, base, suite)
        )
        kafka_root = base / "kafka-root"  # the fixture wants KAFKA_ROOT to exist; nothing in it is used
        kafka_root.mkdir()
        env = {k: v for k, v in os.environ.items() if k not in ("ZOOKEEPER_URI", "KAFKA_URI", "PYTHONPATH")}
        env.update(KAFKA_VERSION=KAFKA_VERSION, KAFKA_ROOT=str(kafka_root), PYTHONDONTWRITEBYTECODE="1")
        ids = collect(args.python, suite, env)
        check_selection(selection, ids)
        say(f"suite: {origin}; {len(ids)} tests")
        say(f"library: kafka-python {library(args.python, suite)}")
        deselected = sorted({i for prefix in selection.deselected for i in matching(prefix, ids)})
        say(f"KAFKA_VERSION={KAFKA_VERSION}; {len(deselected)} deselected:")
        for node_id, reason in selection.deselected.items():
            say(f"  {node_id}: {reason}")
        only = ["-k", args.only] if args.only else []
        pytest_args = ["test/integration", *only, *(a for n in selection.deselected for a in ("--deselect", n))]
        cluster = Cluster(args.odradek, base)
        try:
            cluster.up()
            pass_env = {**env, "KAFKA_URI": cluster.kafka_uri}
            results = run_pass("suite", args.python, suite, pass_env, pytest_args, args.logs, bool(args.only))
        finally:
            cluster.down()

    counts = {s: sum(r.status == s for r in results) for s in ("passed", "failed", "error", "skipped")}
    (args.logs / "results.tsv").write_text("".join(f"{r.node_id}\t{r.status}\t{r.message}\n" for r in results))
    for result in results:
        if result.status != "passed":
            say(f"  {result.status:7} {result.node_id}: {result.message}")
    say(f"logs: {args.logs}; total {time.monotonic() - total_started:.0f} s")
    say(
        f"kafka-python: {counts['passed']} passed, {counts['failed']} failed, {counts['error']} errors, "
        f"{counts['skipped']} skipped, {len(deselected)} deselected"
    )
    return 1 if counts["failed"] or counts["error"] or not counts["passed"] else 0


if __name__ == "__main__":
    sys.exit(main())
