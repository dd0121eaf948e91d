"""How the suite runs side by side under pytest-xdist (``make test``: ``-n N --dist loadfile``).

The scheduler below hands out groups of tests: a group is a file, so its tests run in one worker, in order, and a
module-scoped cluster is started once; all Spark tests form one group, so one worker starts the one Spark session
(a JVM) they share. (xdist's own ``loadgroup`` marks do not group anything under pytest 9.2, whose node ids no longer
follow the ``_nodeid`` xdist rewrites.) Groups are handed out longest first (from ``durations.json`` beside this
file, seconds per file as measured on a 2-core machine; a file not in it counts as short), so that a long file does
not start last and hold up the end. Refresh the figures with ``make durations`` when files are added or grow.
"""

from __future__ import annotations

import json
import resource
from pathlib import Path
from typing import Any

import pytest

from odradek.deploy import launcher

DURATIONS = Path(__file__).with_name("durations.json")
CPU = Path(__file__).resolve().parents[1] / "build" / "test-cpu.json"
# Files that share a session-scoped resource, and so one worker.
SHARED_GROUPS = {"tests/spark/": "spark"}
UNKNOWN_FILE_S = 1.0


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--record-durations", action="store_true", help=f"write each file's seconds to {DURATIONS.name} at the end"
    )


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("--record-durations"):
        return
    config.pluginmanager.register(CpuMeter(), "odradek-cpu")  # where tests run (under xdist, in each worker)
    if not hasattr(config, "workerinput"):  # not an xdist worker: the process that sees every report
        config.pluginmanager.register(DurationRecorder(), "odradek-durations")


def _cpu_seconds() -> float:
    """This process's CPU and that of its children it has reaped, and of the nodes its node launcher forked and
    reaped (the nodes a test started and stopped)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    nodes = launcher.current()
    forked = nodes.children_cpu_seconds() if nodes is not None else 0.0
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + forked


class CpuMeter:
    """Adds each test's CPU seconds (from its setup to its teardown) to its teardown report: the suite is CPU-bound
    on a 2-core machine, so which files cost CPU says more than their wall time."""

    def __init__(self) -> None:
        self._started = 0.0

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        self._started = _cpu_seconds()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        outcome = yield
        if call.when == "teardown":
            outcome.get_result().user_properties.append(("cpu_s", _cpu_seconds() - self._started))


class DurationRecorder:
    """Sums each file's test reports (setup, call, teardown) and writes them at the end of the session; each file's
    CPU seconds go to build/test-cpu.json, the files costing most first."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.cpu: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        path = report.nodeid.split("::")[0]
        self.seconds[path] = self.seconds.get(path, 0.0) + report.duration
        for name, value in report.user_properties:
            if name == "cpu_s":
                self.cpu[path] = self.cpu.get(path, 0.0) + float(value)

    def pytest_sessionfinish(self) -> None:
        DURATIONS.write_text(json.dumps({k: round(v, 1) for k, v in sorted(self.seconds.items())}, indent=0) + "\n")
        CPU.parent.mkdir(exist_ok=True)
        by_cost = sorted(self.cpu.items(), key=lambda kv: -kv[1])
        CPU.write_text(json.dumps({k: round(v, 1) for k, v in by_cost}, indent=0) + "\n")


def group_of(path: str) -> str:
    return next((group for prefix, group in SHARED_GROUPS.items() if path.startswith(prefix)), path)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With ``--dist loadfile``: xdist's file scheduling, with the Spark files as one group."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FileGroupScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid.split("::", 1)[0])

    return FileGroupScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Longest groups first (xdist hands groups out in collection order, with ``--no-loadscope-reorder``)."""
    seconds: dict[str, float] = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    root = config.rootpath
    paths = {id(item): item.path.relative_to(root).as_posix() for item in items}
    files: dict[str, set[str]] = {}
    for path in paths.values():
        files.setdefault(group_of(path), set()).add(path)
    weight = {group: sum(seconds.get(f, UNKNOWN_FILE_S) for f in members) for group, members in files.items()}
    # A stable sort keeps each file's own order.
    items.sort(key=lambda item: -weight[group_of(paths[id(item)])])
