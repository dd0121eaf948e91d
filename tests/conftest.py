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
from pathlib import Path
from typing import Any

import pytest

DURATIONS = Path(__file__).with_name("durations.json")
# Files that share a session-scoped resource, and so one worker.
SHARED_GROUPS = {"tests/spark/": "spark"}
UNKNOWN_FILE_S = 1.0


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--record-durations", action="store_true", help=f"write each file's seconds to {DURATIONS.name} at the end"
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--record-durations") and not hasattr(config, "workerinput"):  # xdist's controller
        config.pluginmanager.register(DurationRecorder(), "odradek-durations")


class DurationRecorder:
    """Sums each file's test reports (setup, call, teardown) and writes them at the end of the session."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        path = report.nodeid.split("::")[0]
        self.seconds[path] = self.seconds.get(path, 0.0) + report.duration

    def pytest_sessionfinish(self) -> None:
        DURATIONS.write_text(json.dumps({k: round(v, 1) for k, v in sorted(self.seconds.items())}, indent=0) + "\n")


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
