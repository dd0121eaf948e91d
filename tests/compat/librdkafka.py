"""librdkafka's own test programs against odradek (`make compat`).

Fetches librdkafka's source from Debian (`apt-get source`, after adding a deb-src line when none is there), builds
its test runner once into a cache directory, starts a local cluster (1 controller, 3 brokers) in a temporary
directory, and runs the tests that librdkafka-selection.txt (beside this file) selects, each in a test runner process
of its own with a timeout and ``TEST_KAFKA_VERSION`` set to the Kafka version odradek claims. Several run side by
side (``--jobs``), as librdkafka's own harness runs its tests: each uses topics and groups of random names. The
longest start first (librdkafka-durations.json, seconds measured one at a time). One line per test (PASS, FAIL or
SKIP, XFAIL or XPASS for a known failure that failed or passed, and its seconds), a closing count, a non-zero exit on
any failure other than a known one. A test that fails runs once more, by itself after the others (``--retries``):
passing then, it is reported as FLAKY, named in the closing lines and counted apart, and does not fail the run; both
attempts' logs are kept. Every test's output and the nodes' logs are kept in the log directory (default
build/compat/librdkafka under the repository).

    python tests/compat/librdkafka.py                       # the whole selection
    python tests/compat/librdkafka.py --only 0012,0113      # tests whose names start with these
    python tests/compat/librdkafka.py --repeat 3 --only 0093   # a flaky test, three runs
    python tests/compat/librdkafka.py --jobs 1              # one test at a time

Not a pytest module (its name does not start with test_): it needs root for apt-get the first time, builds C, and
runs for tens of minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from dev_cluster import DevCli

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SELECTION = HERE / "librdkafka-selection.txt"
DURATIONS = HERE / "librdkafka-durations.json"
# The Debian source package (bookworm's); LIBRDKAFKA_DEB_VERSION picks another one.
DEB_VERSION = os.environ.get("LIBRDKAFKA_DEB_VERSION", "2.0.2-1")
# The Kafka version odradek's ApiVersions answers imply; the test programs skip what that version lacks.
KAFKA_VERSION = "3.9.0"
# What building librdkafka and its tests needs (Debian's build dependencies less SASL/GSSAPI, which no selected test
# uses) and what fetching its source needs.
BUILD_PACKAGES = [
    *("gcc", "g++", "make", "python3", "dpkg-dev"),
    *("zlib1g-dev", "libzstd-dev", "libssl-dev", "rapidjson-dev"),
]
# The cluster librdkafka's own harness (trivup) gives its test programs: topics created on first use get 4
# partitions and 3 replicas; the noautocreate scenario turns automatic topic creation off.
CLUSTER_CONFIG = {"num.partitions": "4", "default.replication.factor": "3"}
SCENARIO_CONFIG = {"default": {}, "noautocreate": {"auto.create.topics.enable": "false"}}
# test.conf: IPv4 as librdkafka's harness writes it, topic names random per run (a repeated test starts clean).
TEST_CONF = "broker.address.family=v4\ntest.topic.random=true\n"
# What librdkafka's CI mode prints instead of failing a test on a duration outside its bounds.
TIMING_WARNING = re.compile(r"not FAILING test on CI|WARNING: Elapsed time")
ANSI = re.compile(r"\x1b\[[0-9;]*m|\x1b\(B")


@dataclass
class Entry:
    name: str  # the test's name in librdkafka's table, e.g. 0113_cooperative_rebalance
    scenario: str = "default"
    subtests: str = ""  # librdkafka's SUBTESTS: run only the sub-tests whose name contains this
    timeout: float = 600.0
    alone: bool = False  # timing-sensitive: runs after the others, by itself
    known: str = ""  # a known failure, and why: it runs and is reported (XFAIL, or XPASS when it passed)

    @property
    def label(self) -> str:
        return f"{self.name}/{self.subtests}" if self.subtests else self.name

    @property
    def number(self) -> str:
        return self.name.split("_", 1)[0]


@dataclass
class Selection:
    run: list[Entry] = field(default_factory=list)
    excluded: dict[str, str] = field(default_factory=dict)  # label -> reason


class Unavailable(Exception):
    """What fetching or building librdkafka's tests needs is missing here (root for apt-get, a Debian source)."""


def say(text: str) -> None:
    print(text, flush=True)


def sh(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, **kwargs)


# --- the source and the build ---------------------------------------------------------------------------------------


def missing_packages() -> list[str]:
    out = []
    for name in BUILD_PACKAGES:
        status = subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", name], capture_output=True, text=True, check=False
        ).stdout
        if "install ok installed" not in status:
            out.append(name)
    return out


def add_deb_src() -> None:
    """Add deb-src twins of the machine's Debian sources (one-line and deb822 formats) when none exist."""
    target = Path("/etc/apt/sources.list.d/odradek-deb-src.sources")
    if target.exists():
        return
    stanzas = []
    for path in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*.list"))]:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            parts = line.split()
            if parts and parts[0] == "deb" and "debian" in line:
                uri_at = next(i for i, p in enumerate(parts) if "://" in p)
                stanzas.append(
                    f"Types: deb-src\nURIs: {parts[uri_at]}\nSuites: {parts[uri_at + 1]}\n"
                    f"Components: {' '.join(parts[uri_at + 2 :])}\n"
                )
    for path in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        for stanza in path.read_text().split("\n\n"):
            fields = dict(
                line.split(":", 1) for line in stanza.splitlines() if ":" in line and not line.startswith("#")
            )
            if "deb" in fields.get("Types", "").split() and "debian" in fields.get("URIs", ""):
                body = "".join(f"{k}:{v}\n" for k, v in fields.items() if k != "Types")
                stanzas.append("Types: deb-src\n" + body)
    if not stanzas:
        raise Unavailable("no Debian apt source found to add a deb-src line for")
    target.write_text("\n".join(stanzas))
    say(f"added {target}")


def ensure_source(cache: Path) -> Path:
    upstream = DEB_VERSION.rsplit("-", 1)[0]
    source = cache / f"librdkafka-{upstream}"
    if (source / "tests" / "test.c").exists():
        return source
    missing = missing_packages()
    if not shutil.which("apt-get"):
        raise Unavailable("apt-get is needed to fetch librdkafka's source package")
    if os.geteuid() != 0 and missing:
        raise Unavailable(f"not root: install {' '.join(missing)} first")
    started = time.monotonic()
    cache.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        probe = subprocess.run(["apt-cache", "showsrc", "librdkafka"], capture_output=True, text=True, check=False)
        if f"Version: {DEB_VERSION}" not in probe.stdout:
            add_deb_src()
            sh(["apt-get", "update", "-q"], stdout=subprocess.DEVNULL)
        if missing:
            sh(["apt-get", "install", "-y", "-q", *missing], stdout=subprocess.DEVNULL)
    sh(["apt-get", "source", "-q", f"librdkafka={DEB_VERSION}"], cwd=cache, stdout=subprocess.DEVNULL)
    say(f"librdkafka {DEB_VERSION} source fetched into {source} in {time.monotonic() - started:.0f} s")
    return source


def ensure_build(source: Path) -> Path:
    runner = source / "tests" / "test-runner"
    stamp = source / "tests" / ".odradek-built"
    if runner.exists() and stamp.exists():
        return runner
    missing = missing_packages()
    if missing:
        if os.geteuid() != 0:
            raise Unavailable(f"not root: install {' '.join(missing)} first")
        sh(["apt-get", "install", "-y", "-q", *missing], stdout=subprocess.DEVNULL)
    jobs = f"-j{os.cpu_count() or 2}"
    log = source / "odradek-build.log"
    say(f"building librdkafka and its tests ({log})")
    steps = [
        # No SASL/GSSAPI (no selected test uses it), no HTTP client (OIDC only), the bundled LZ4.
        ["./configure", "--no-download", "--disable-gssapi", "--disable-curl", "--disable-lz4-ext"],
        ["make", jobs, "-C", "src"],
        ["make", jobs, "-C", "src-cpp"],
        ["make", jobs, "-C", "tests", "build"],
    ]
    with log.open("w") as out:
        for step in steps:
            started = time.monotonic()
            result = subprocess.run(step, cwd=source, stdout=out, stderr=subprocess.STDOUT, check=False)
            say(f"  {' '.join(step)}: {time.monotonic() - started:.0f} s")
            if result.returncode:
                raise SystemExit(f"build step failed: {' '.join(step)} (see {log})")
    stamp.touch()
    return runner


def table_names(source: Path) -> dict[str, tuple[str, str]]:
    """Every test of librdkafka's table (tests/test.c): name -> (flags, scenario)."""
    text = (source / "tests" / "test.c").read_text()
    start = text.index("struct test tests[] = {")
    table = text[start : text.index("{NULL}", start)]
    out = {}
    for match in re.finditer(r"_TEST\(\s*(\w+)\s*,\s*([^,)]*)((?:[^()]|\([^()]*\))*)\)", table):
        scenario = re.search(r'\.scenario\s*=\s*"([^"]*)"', match.group(3))
        out[match.group(1)] = (match.group(2).replace(" ", ""), scenario.group(1) if scenario else "default")
    return out


def read_selection(path: Path) -> Selection:
    selection = Selection()
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        verb, _, rest = line.partition(" ")
        rest = rest.strip()
        if verb == "run":
            name, *options = rest.split()
            entry = Entry(name)
            for option in options:
                key, _, value = option.partition("=")
                if key == "scenario":
                    entry.scenario = value
                elif key == "subtests":
                    entry.subtests = value
                elif key == "timeout":
                    entry.timeout = float(value)
                elif key == "alone" and not value:
                    entry.alone = True
                else:
                    raise SystemExit(f"{path}:{number}: unknown option {option!r}")
            selection.run.append(entry)
        elif verb == "known":
            label, *words = rest.split()
            name, _, subtests = label.partition("/")
            entry = Entry(name, subtests=subtests)
            while words and words[0].startswith("scenario="):
                entry.scenario = words.pop(0).partition("=")[2]
            entry.known = " ".join(words)
            if not entry.known:
                raise SystemExit(f"{path}:{number}: a known failure needs a reason")
            selection.run.append(entry)
        elif verb == "exclude":
            label, _, reason = rest.partition(" ")
            if not reason.strip():
                raise SystemExit(f"{path}:{number}: an exclusion needs a reason")
            selection.excluded[label] = reason.strip()
        else:
            raise SystemExit(f"{path}:{number}: expected 'run', 'known' or 'exclude', got {verb!r}")
    return selection


def check_coverage(selection: Selection, table: dict[str, tuple[str, str]]) -> None:
    """Every broker-facing test of the table is either run or excluded with a reason, and nothing else is named."""
    broker_facing = {n for n, (flags, _) in table.items() if "TEST_F_LOCAL" not in flags and "MANUAL" not in flags}
    named = {e.name for e in selection.run} | {label.split("/")[0] for label in selection.excluded}
    unlisted = sorted(broker_facing - named)
    unknown = sorted(named - broker_facing)
    if unlisted or unknown:
        raise SystemExit(
            f"{SELECTION.name} does not match librdkafka's table: unlisted {unlisted or 'none'}, "
            f"not broker-facing or unknown {unknown or 'none'}"
        )
    for entry in selection.run:
        if entry.scenario not in table[entry.name][1].split(","):
            raise SystemExit(f"{entry.name} belongs to scenario {table[entry.name][1]}, not {entry.scenario}")


# --- the cluster ----------------------------------------------------------------------------------------------------


class Cluster(DevCli):
    """A 1+3 `odradek dev up` cluster of our own: own ODRADEK_HOME (its profile) and own directory."""

    def __init__(self, odradek: str, base: Path, scenario: str) -> None:
        super().__init__(odradek, base / f"cluster-{scenario}", base / "home")
        self.config = {**CLUSTER_CONFIG, **SCENARIO_CONFIG[scenario]}
        self.bootstrap = ""
        self._reviving = threading.Lock()

    def up(self) -> None:
        started = time.monotonic()
        self.bootstrap = self.dev_up("--controllers", "1", "--brokers", "3", config=self.config)[
            "kafka_bootstrap_servers"
        ]
        say(f"cluster up in {time.monotonic() - started:.0f} s: Kafka listeners {self.bootstrap}")

    def stopped_nodes(self) -> list[int]:
        result = self.cli("status", "--format", "json", check=False)
        try:
            nodes = json.loads(result.stdout)["nodes"]
        except (ValueError, KeyError, TypeError):
            return []
        return [n["node_id"] for n in nodes if n.get("state") != "running"]

    def revive(self) -> None:
        """Start again any node that died (and say so), so that one crash does not fail every later test."""
        with self._reviving:  # tests that fail side by side ask at once
            for node in self.stopped_nodes():
                say(f"  node {node} is not running; starting it again (see {self.dir}/node-{node}/node.log)")
                self.cli("start", str(node), "--wait", check=False)

    def down(self, logs: Path) -> None:
        """Stop the cluster, keeping each node's log in ``logs`` (node-N.log) for the failures to be read against."""
        self.cli("down", check=False)
        for log in sorted(self.dir.glob("node-*/node.log")):
            shutil.copyfile(log, logs / f"{self.dir.name}-{log.parent.name}.log")


# --- running the tests ----------------------------------------------------------------------------------------------


@dataclass
class Result:
    entry: Entry
    # PASS, FAIL, SKIP, XFAIL (a known failure failed), XPASS (a known failure passed), FLAKY (failed, then passed
    # when run again by itself)
    status: str
    seconds: float
    detail: str = ""


def outcome(entry: Entry, log: str, returncode: int | None) -> tuple[str, str]:
    text = ANSI.sub("", log)
    row = re.search(rf"^\|\s*{re.escape(entry.name)}\s+\|\s*(PASSED|FAILED|SKIPPED)\s*\|", text, re.MULTILINE)
    failure = re.search(r'### Test "[^"]*" failed at [^\n]*###\n([^\n]*)', text)
    reason = failure.group(1).strip() if failure else ""
    if returncode is None:
        return "FAIL", "timed out (killed by the runner)"
    if row and row.group(1) == "SKIPPED":
        skip = re.search(r"SKIPPING TEST: ([^\n]*)", text)
        return "SKIP", skip.group(1).strip() if skip else ""
    if row and row.group(1) == "PASSED" and returncode == 0:
        if entry.subtests and not re.search(rf"\[ \S*{re.escape(entry.subtests)}", text):
            return "FAIL", f"no sub-test matched {entry.subtests!r}"
        warned = len(TIMING_WARNING.findall(text))
        return "PASS", f"{warned} timing bounds exceeded (warnings in CI mode)" if warned else ""
    if not row:
        return "FAIL", reason or f"the test did not run (exit {returncode})"
    return "FAIL", reason or f"exit {returncode}"


def run_one(entry: Entry, runner: Path, conf: Path, logs: Path, attempt: int, retry: bool = False) -> Result:
    source_tests = runner.parent
    env = {k: v for k, v in os.environ.items() if k not in ("TESTS", "SUBTESTS", "TESTS_SKIP", "TEST_DEBUG")}
    # librdkafka's CI mode, by hand as in CI: timeouts x3, latency bounds warn instead of failing (0055 skips itself),
    # as on the shared machines its own CI runs on.
    env.update(
        CI="true",
        TESTS=entry.number,
        TEST_KAFKA_VERSION=KAFKA_VERSION,
        TEST_SCENARIO=entry.scenario,
        RDKAFKA_TEST_CONF=str(conf),
        LD_LIBRARY_PATH=f"{source_tests.parent / 'src'}:{source_tests.parent / 'src-cpp'}",
    )
    if entry.subtests:
        env["SUBTESTS"] = entry.subtests
    suffix = (f".{attempt}" if attempt else "") + (".retry" if retry else "")  # attempts 1, 2, ... of --repeat
    log_path = logs / (entry.label.replace("/", "--") + suffix + ".log")
    # The programs run in their own folder, as librdkafka's harness runs them: some read files by relative path
    # (0053 its statistics schema in ../src); the stats files they write there are removed after each test.
    work = source_tests
    started = time.monotonic()
    with log_path.open("w") as out:
        # -L: no local (broker-less) tests; -p1: the one test this process runs.
        process = subprocess.Popen(
            [str(runner), "-L", "-p1"], cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            returncode: int | None = process.wait(timeout=entry.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            returncode = None
    seconds = time.monotonic() - started
    status, detail = outcome(entry, log_path.read_text(errors="replace"), returncode)
    if entry.known and status in ("FAIL", "PASS"):  # some known failures are timing-dependent: a pass is reported only
        status, detail = ("XFAIL", f"{detail} (known: {entry.known})") if status == "FAIL" else ("XPASS", entry.known)
    for stats in work.glob(f"stats_{entry.name}_*.json"):  # its own (runs of one program side by side share them)
        stats.unlink(missing_ok=True)
    return Result(entry, status, seconds, detail)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(os.environ.get("ODRADEK_COMPAT_CACHE", Path.home() / ".cache" / "odradek-compat")),
        help="where the source and its build are kept between runs ($ODRADEK_COMPAT_CACHE)",
    )
    parser.add_argument("--logs", type=Path, default=ROOT / "build" / "compat" / "librdkafka")
    parser.add_argument("--only", default="", help="comma-separated name prefixes (e.g. 0012,0113)")
    parser.add_argument("--repeat", type=int, default=1, help="run each test this many times")
    parser.add_argument(
        "--retries",
        type=int,
        default=1,
        help="run a failed test again, by itself, up to this many times (a later pass is reported as FLAKY)",
    )
    parser.add_argument(
        "--jobs", type=int, default=int(os.environ.get("ODRADEK_COMPAT_JOBS", "6")), help="tests side by side"
    )
    parser.add_argument("--prepare", action="store_true", help="only fetch and build the test programs")
    parser.add_argument(
        "--if-available",
        action="store_true",
        default=bool(os.environ.get("ODRADEK_COMPAT_IF_AVAILABLE")),
        help="where the programs cannot be fetched or built (no root, no Debian source), say so and exit 0",
    )
    parser.add_argument("--odradek", default=str(Path(sys.executable).parent / "odradek"))
    args = parser.parse_args()

    total_started = time.monotonic()
    try:
        source = ensure_source(args.cache)
        runner = ensure_build(source)
    except (Unavailable, subprocess.CalledProcessError) as e:
        if not args.if_available:
            raise SystemExit(f"librdkafka's test programs cannot be prepared: {e}") from None
        say(f"librdkafka's test programs cannot be prepared here, so none ran: {e}")
        return 0
    if args.prepare:
        say(f"test runner: {runner}")
        return 0
    table = table_names(source)
    selection = read_selection(SELECTION)
    check_coverage(selection, table)
    entries = selection.run
    if args.only:
        prefixes = tuple(p.strip() for p in args.only.split(",") if p.strip())
        entries = [e for e in entries if e.label.startswith(prefixes)]
    durations: dict[str, float] = json.loads(DURATIONS.read_text())
    say(
        f"librdkafka {DEB_VERSION}: {len(selection.run)} selected runs, {len(selection.excluded)} exclusions; "
        f"running {len(entries)} x {args.repeat}, {args.jobs} at a time, TEST_KAFKA_VERSION={KAFKA_VERSION}"
    )

    if args.logs.exists():
        shutil.rmtree(args.logs)
    args.logs.mkdir(parents=True)
    results: list[Result] = []
    # One cluster per scenario, all up at once: the scenarios' tests share one pool of --jobs.
    scenarios = [scenario for scenario in SCENARIO_CONFIG if any(e.scenario == scenario for e in entries)]
    with tempfile.TemporaryDirectory(prefix="odradek-compat-") as tmp, ExitStack() as stack:
        base = Path(tmp)
        clusters: dict[str, Cluster] = {}
        confs: dict[str, Path] = {}
        for scenario in scenarios:
            cluster = clusters[scenario] = Cluster(args.odradek, base, scenario)
            stack.callback(cluster.down, args.logs)
            say(f"scenario {scenario}: {sum(e.scenario == scenario for e in entries)} tests")
            cluster.up()
            confs[scenario] = base / f"test-{scenario}.conf"
            confs[scenario].write_text(f"bootstrap.servers={cluster.bootstrap}\n{TEST_CONF}")
        runs = [(e, attempt + 1 if args.repeat > 1 else 0) for e in entries for attempt in range(args.repeat)]
        runs.sort(key=lambda run: -durations.get(run[0].label, 0))

        def one(run: tuple[Entry, int]) -> None:
            entry = run[0]
            result = run_one(entry, runner, confs[entry.scenario], args.logs, run[1])
            results.append(result)
            detail = f"  {result.detail}" if result.detail else ""
            say(f"{result.status:5}  {entry.label:58} {result.seconds:6.1f} s{detail}")
            if result.status in ("FAIL", "XFAIL"):
                clusters[entry.scenario].revive()

        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for _ in pool.map(one, [run for run in runs if not run[0].alone]):
                pass
        for run in runs:
            if run[0].alone:
                one(run)
        # Failures run again one at a time, on a quiet cluster: a pass then is a flake of the side-by-side run (its
        # first log is kept), reported apart; a second failure stands.
        for index, result in enumerate(results):
            if result.status != "FAIL":
                continue
            first = result
            for _ in range(args.retries):
                clusters[result.entry.scenario].revive()
                again = run_one(result.entry, runner, confs[result.entry.scenario], args.logs, 0, retry=True)
                say(f"{again.status:5}  {result.entry.label:58} {again.seconds:6.1f} s  (run again by itself)")
                if again.status in ("PASS", "SKIP"):
                    results[index] = Result(result.entry, "FLAKY", first.seconds, f"first run: {first.detail}")
                    break

    statuses = ("PASS", "FAIL", "SKIP", "XFAIL", "XPASS", "FLAKY")
    counts = {status: sum(r.status == status for r in results) for status in statuses}
    results.sort(key=lambda r: r.entry.label)
    (args.logs / "results.tsv").write_text(
        "".join(f"{r.entry.label}\t{r.status}\t{r.seconds:.1f}\t{r.detail}\n" for r in results)
    )
    say(f"logs: {args.logs}; total {time.monotonic() - total_started:.0f} s")
    for result in results:
        if result.status in ("FAIL", "XFAIL", "XPASS", "FLAKY"):
            say(f"  {result.status.lower()}: {result.entry.label}: {result.detail}")
    say(
        f"librdkafka: {counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped, "
        f"{counts['XFAIL']} known failures, {counts['XPASS']} known failures passed, "
        f"{counts['FLAKY']} failed once and passed when run again by itself"
    )
    return 1 if counts["FAIL"] or not results else 0


if __name__ == "__main__":
    sys.exit(main())
