"""Cluster nodes as separate hosts in Linux network namespaces, with network faults made by iproute2 alone.

Topology: one namespace ``{prefix}-br`` holding a bridge ``br0``, and per host a namespace ``{prefix}-h{i}`` whose
``eth0`` is a veth to port ``h{i}`` of that bridge, with address ``10.213.<k>.<i+1>/24``. Nothing lives in the root
namespace unless ``attach_root=True`` (then a veth ``{prefix}-r`` with ``.254`` lets the harness process itself talk
to the nodes, unaffected by faults, like Jepsen's control node). Only iproute2 is needed: iptables/nftables are not
installed on our CI machines, and faults placed in each host's own namespace can express every partition shape.

Link faults are kept as a set of blocked (src, dst) pairs, always both directions, applied in src's namespace:

* ``mode="drop"`` (default): a permanent neighbour entry maps dst's address to an unused MAC, so packets leave and
  vanish on the bridge. Nobody gets an error: connects and established streams time out, as behind Jepsen's
  iptables DROP, and TCP retransmits the stalled data after heal, which is the case the cluster must survive.
* ``mode="reject"``: an ``unreachable`` route for dst's /32, so sends fail at once with EHOSTUNREACH (iptables REJECT).
* ``mode="blackhole"``: a ``blackhole`` route; local sends fail at once with EINVAL (an odd errno for applications,
  which is why it is not the default).

Slow links use ``tc netem`` on both ends of the host's veth when the kernel has ``sch_netem``. Without it (our CI
kernel) delay and jitter raise :class:`NotSupported`, but loss and rate limits still work, with htb, a classic-BPF
random classifier and a zero-length pfifo as the drop class: TCP turns loss into retransmission stalls.

Everything created is removed by :meth:`NetnsNetwork.close` (also on exceptions in the ``with`` body and at
interpreter exit); :meth:`NetnsNetwork.cleanup_stale` removes what a killed run left behind, recognised by the pid
embedded in the default prefix ``odr<pid><letter>``.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import itertools
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Hashable, Iterable, Sequence
from typing import Any, ClassVar, Literal, TypeVar

__all__ = ["NetnsError", "NetnsNetwork", "NotSupported", "fault_pairs"]

CutMode = Literal["drop", "reject", "blackhole"]

_CLONE_NEWNET = 0x40000000
_BOGUS_MAC = "02:6f:64:72:00:00"  # locally administered, owned by no interface: frames to it are dropped
_DEFAULT_PATTERN = r"odr(?P<pid>\d+)[a-z]*"
_PREFIX_RE = re.compile(r"[a-z][a-z0-9]{0,12}")  # "{prefix}-r" must fit IFNAMSIZ (15 chars)
_counter = itertools.count()


class NotSupported(RuntimeError):
    """The fault cannot be made with what this kernel/machine offers (e.g. no sch_netem for delay)."""


class NetnsError(RuntimeError):
    """An ``ip``/``tc`` command failed; the message carries the command and its stderr."""


def _run(argv: Sequence[str], *, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(argv), input=stdin, capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise NetnsError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def _ip_batch(ns: str | None, lines: Iterable[str], *, force: bool = False) -> None:
    """Run many ``ip`` commands in one process: ``-force`` for deletions whose target may already be gone."""
    text = "".join(line + "\n" for line in lines)
    if not text:
        return
    argv = ["ip", *(["-n", ns] if ns else []), *(["-force"] if force else []), "-batch", "-"]
    _run(argv, stdin=text, check=not force)


def _netns_names() -> list[str]:
    out = _run(["ip", "netns", "list"], check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_netns_pids(ns: str) -> None:
    """SIGKILL what still runs inside a namespace of ours, else the namespace outlives its name."""
    out = _run(["ip", "netns", "pids", ns], check=False).stdout
    for pid in (int(tok) for tok in out.split() if tok.isdigit()):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _delete_netns(names: Iterable[str]) -> None:
    for ns in names:
        _kill_netns_pids(ns)
        _run(["ip", "netns", "del", ns], check=False)


N = TypeVar("N", bound=Hashable)


def fault_pairs(fault: dict[str, Any], nodes: Iterable[N]) -> set[tuple[N, N]]:
    """The (src, dst) pairs a link fault cuts, always both directions; shared with the TCP proxy."""
    everyone = list(nodes)
    kind = fault["kind"]
    if kind == "block":
        return {(fault["a"], fault["b"]), (fault["b"], fault["a"])}
    if kind == "isolate":
        h = fault["host"]
        return {p for j in everyone if j != h for p in ((h, j), (j, h))}
    if kind == "partition":
        group_of: dict[N, object] = {h: n for n, g in enumerate(fault["groups"]) for h in g}
        group = [group_of.get(h, ("alone", h)) for h in everyone]
        return {(a, b) for a, ga in zip(everyone, group) for b, gb in zip(everyone, group) if ga != gb}
    if kind == "bridge":
        return {p for a in fault["left"] for b in fault["right"] for p in ((a, b), (b, a))}
    raise ValueError(f"not a link fault: {fault!r}")


class NetnsNetwork:
    """N hosts on one private bridge, with partitions and slow links; see the module docstring."""

    mechanism: ClassVar[str] = "netns"
    _available: ClassVar[bool | None] = None
    _netem: ClassVar[bool | None] = None

    def __init__(
        self, prefix: str | None = None, hosts: int = 3, *, mode: CutMode = "drop", attach_root: bool = False
    ) -> None:
        if prefix is None:
            prefix = self.unique_prefix()
        if not _PREFIX_RE.fullmatch(prefix):
            raise ValueError(f"prefix must match {_PREFIX_RE.pattern} (interface names are limited): {prefix!r}")
        if not 1 <= hosts <= 250:
            raise ValueError("hosts must be 1..250")
        if mode not in ("drop", "reject", "blackhole"):
            raise ValueError(f"unknown mode {mode!r}")
        self.prefix = prefix
        self.hosts = hosts
        self.mode: CutMode = mode
        self.attach_root = attach_root
        self._lock = threading.RLock()
        self._procs: list[subprocess.Popen[Any]] = []
        self._link_faults: list[dict[str, Any]] = []
        self._blocked: set[tuple[int, int]] = set()  # as applied to the kernel
        self._slow: dict[int, dict[str, Any]] = {}
        self._created: list[str] = []
        self._closed = False
        self.subnet = self._pick_subnet()
        atexit.register(self.close)
        try:
            self._setup()
        except BaseException:
            self.close()
            raise

    # ----------------------------------------------------------------------------------------------- probing

    @staticmethod
    def unique_prefix() -> str:
        """``odr<pid><letter>``: unique per process and instance, and tells cleanup_stale whose it was."""
        n = next(_counter)
        letters = ""
        while True:
            letters = chr(ord("a") + n % 26) + letters
            n = n // 26 - 1
            if n < 0:
                return f"odr{os.getpid()}{letters}"

    @classmethod
    def available(cls) -> bool:
        """True if namespaces, veths and bridges can be created here (root, iproute2, kernel support)."""
        if cls._available is None:
            cls._available = cls._probe(netem=False)
        return cls._available

    @classmethod
    def netem_available(cls) -> bool:
        """True if ``tc qdisc ... netem`` works (the kernel has sch_netem); needed for delay and jitter."""
        if cls._netem is None:
            cls._netem = cls.available() and cls._probe(netem=True)
        return cls._netem

    @staticmethod
    def _probe(*, netem: bool) -> bool:
        if os.geteuid() != 0 or shutil.which("ip") is None or (netem and shutil.which("tc") is None):
            return False
        ns = f"odrprobe{os.getpid()}"
        try:
            _run(["ip", "netns", "add", ns])
            if netem:
                _run(["ip", "-n", ns, "link", "set", "lo", "up"])
                _run(["tc", "-n", ns, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"])
            else:
                _ip_batch(
                    ns, ["link add b0 type bridge", "link add v0 type veth peer name v1", "link set v0 master b0"]
                )
            return True
        except (NetnsError, OSError, subprocess.SubprocessError):
            return False
        finally:
            _run(["ip", "netns", "del", ns], check=False)

    # ----------------------------------------------------------------------------------------------- setup

    def _pick_subnet(self) -> int:
        """Third octet k of 10.213.k.0/24: only the root attachment can collide, so skip k the root namespace uses."""
        used = ""
        if self.attach_root:
            used = _run(["ip", "-4", "route", "show", "table", "all"], check=False).stdout
            used += _run(["ip", "-4", "addr"], check=False).stdout
        start = os.getpid() % 250
        for k in ((start + j) % 250 + 1 for j in range(250)):
            if f"10.213.{k}." not in used:
                return k
        raise NetnsError("no free 10.213.k.0/24 subnet in the root namespace")

    @property
    def bridge_ns(self) -> str:
        return f"{self.prefix}-br"

    def host_ns(self, i: int) -> str:
        self._check_host(i)
        return f"{self.prefix}-h{i}"

    @property
    def namespaces(self) -> list[str]:
        return [self.bridge_ns, *(self.host_ns(i) for i in range(self.hosts))]

    @property
    def root_link(self) -> str | None:
        return self._root_veth if self.attach_root else None

    @property
    def _root_veth(self) -> str:
        """The root namespace's end of the veth to the bridge (it exists only with ``attach_root``)."""
        return f"{self.prefix}-r"

    def host_ip(self, i: int) -> str:
        self._check_host(i)
        return f"10.213.{self.subnet}.{i + 1}"

    @property
    def root_ip(self) -> str | None:
        """The harness process's own address on the bridge when ``attach_root``; faults never touch it."""
        return f"10.213.{self.subnet}.254" if self.attach_root else None

    def _check_host(self, i: int) -> None:
        if not (isinstance(i, int) and 0 <= i < self.hosts):
            raise ValueError(f"no host {i!r} (hosts 0..{self.hosts - 1})")

    def _setup(self) -> None:
        for ns in self.namespaces:
            _run(["ip", "netns", "add", ns])
            self._created.append(ns)
        br = ["link set lo up", "link add br0 type bridge", "link set br0 up"]
        for i in range(self.hosts):
            br += [
                f"link add h{i} type veth peer name eth0 netns {self.host_ns(i)}",
                f"link set h{i} master br0",
                f"link set h{i} up",
            ]
        _ip_batch(self.bridge_ns, br)
        for i in range(self.hosts):
            _ip_batch(
                self.host_ns(i),
                ["link set lo up", f"addr add {self.host_ip(i)}/24 dev eth0", "link set eth0 up"],
            )
        if self.attach_root:
            link = self._root_veth
            _run(["ip", "link", "add", link, "type", "veth", "peer", "name", "root", "netns", self.bridge_ns])
            _ip_batch(self.bridge_ns, ["link set root master br0", "link set root up"])
            _ip_batch(None, [f"addr add {self.root_ip}/24 dev {link}", f"link set {link} up"])
        self._wait_links_up()

    def _wait_links_up(self, timeout: float = 5.0) -> None:
        """Wait until every veth carries traffic: until the kernel's linkwatch (which may lag up to a second) has
        activated a device's qdisc, it stays ``noop`` and silently drops what is sent, e.g. the first SYN."""
        checks: list[tuple[str | None, list[str]]] = [
            (ns, ["-o", "link", "show", "dev", "eth0"]) for ns in self.namespaces[1:]
        ]
        checks.append((self.bridge_ns, ["-o", "link", "show", "master", "br0"]))
        if self.attach_root:
            checks.append((None, ["-o", "link", "show", "dev", self._root_veth]))
        deadline = time.monotonic() + timeout
        while checks:
            ns, args = checks[0]
            out = _run(["ip", *(["-n", ns] if ns else []), *args]).stdout
            lines = out.splitlines()
            if lines and all("LOWER_UP" in line and "qdisc noop" not in line for line in lines):
                checks.pop(0)
            elif time.monotonic() > deadline:
                raise NetnsError(f"links not up after {timeout} s: {out}")
            else:
                time.sleep(0.02)

    # ----------------------------------------------------------------------------------------------- processes

    def exec_argv(self, i: int, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside host i's namespace (for callers that start processes themselves)."""
        return ["ip", "netns", "exec", self.host_ns(i), *argv]

    def popen(self, i: int, argv: Sequence[str], **kw: Any) -> subprocess.Popen[Any]:
        """Start a process in host i; it gets its own session and is killed (whole group) by :meth:`close`."""
        kw.setdefault("start_new_session", True)
        with self._lock:
            if self._closed:
                raise NetnsError("network is closed")
            proc = subprocess.Popen(self.exec_argv(i, argv), **kw)
            self._procs.append(proc)
            return proc

    def host_socket(self, i: int, family: int = socket.AF_INET, kind: int = socket.SOCK_STREAM) -> socket.socket:
        """A socket living in host i's namespace, made by this process (no subprocess): fast probes and clients.

        A socket belongs to the namespace of the thread that created it, so a short-lived thread enters host i's
        namespace with setns(2), creates it and exits; the calling thread never leaves its own namespace.
        """
        path = f"/run/netns/{self.host_ns(i)}"
        result: list[socket.socket | BaseException] = []

        def enter_and_create() -> None:
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                fd = os.open(path, os.O_RDONLY)
                try:
                    if libc.setns(fd, _CLONE_NEWNET) != 0:
                        err = ctypes.get_errno()
                        raise OSError(err, f"setns({path}): {os.strerror(err)}")
                finally:
                    os.close(fd)
                result.append(socket.socket(family, kind))
            except BaseException as e:
                result.append(e)

        thread = threading.Thread(target=enter_and_create, name=f"netns-{i}")
        thread.start()
        thread.join()
        if isinstance(result[0], BaseException):
            raise result[0]
        return result[0]

    def connect(self, i: int, address: tuple[str, int], timeout: float = 1.0) -> socket.socket:
        """TCP connection from host i to ``address``; raises OSError/TimeoutError like any connect."""
        sock = self.host_socket(i)
        sock.settimeout(timeout)
        try:
            sock.connect(address)
        except BaseException:
            sock.close()
            raise
        return sock

    # ----------------------------------------------------------------------------------------------- link faults

    @property
    def faults(self) -> list[dict[str, Any]]:
        """Active faults, in the order applied, as plain dicts for the run report."""
        with self._lock:
            return [dict(f) for f in self._link_faults] + [dict(f) for f in self._slow.values()]

    @property
    def blocked(self) -> list[tuple[int, int]]:
        """(src, dst) pairs whose packets are dropped: the union of all active link faults."""
        with self._lock:
            return sorted(self._blocked)

    def block(self, a: int, b: int) -> None:
        """Hosts a and b cannot reach each other (both directions); everything else unchanged."""
        self._check_host(a)
        self._check_host(b)
        if a == b:
            raise ValueError("a host cannot be cut from itself")
        self._add_link_fault({"kind": "block", "a": min(a, b), "b": max(a, b)})

    def isolate(self, i: int) -> None:
        """Host i reaches nobody and nobody reaches it."""
        self._check_host(i)
        self._add_link_fault({"kind": "isolate", "host": i})

    def partition(self, groups: Sequence[Sequence[int]]) -> None:
        """Hosts reach only hosts of their own group; a host in no group is a group of its own."""
        norm = [sorted(set(g)) for g in groups]
        seen: set[int] = set()
        for g in norm:
            for h in g:
                self._check_host(h)
                if h in seen:
                    raise ValueError(f"host {h} is in two groups: {groups!r}")
                seen.add(h)
        self._add_link_fault({"kind": "partition", "groups": norm})

    def bridge(
        self, left: Sequence[int] | None = None, middle: int | None = None, right: Sequence[int] | None = None
    ) -> None:
        """Jepsen's bridge: ``left`` and ``right`` cannot talk to each other, but all of them reach ``middle``.

        Without arguments the hosts split around the middle one (3 hosts: [0] - 1 - [2]; 5: [0, 1] - 2 - [3, 4]).
        """
        if left is None and middle is None and right is None:
            middle = self.hosts // 2
            left, right = list(range(middle)), list(range(middle + 1, self.hosts))
        if left is None or middle is None or right is None:
            raise ValueError("give all of left, middle and right, or none")
        lft, rgt = sorted(set(left)), sorted(set(right))
        for h in (*lft, middle, *rgt):
            self._check_host(h)
        if set(lft) & set(rgt) or middle in lft or middle in rgt:
            raise ValueError(f"bridge groups overlap: {lft} {middle} {rgt}")
        self._add_link_fault({"kind": "bridge", "left": lft, "middle": middle, "right": rgt})

    def _add_link_fault(self, fault: dict[str, Any]) -> None:
        with self._lock:
            if fault not in self._link_faults:  # idempotent: the same fault twice is one fault
                self._link_faults.append(fault)
            self._sync_blocked()

    def _sync_blocked(self) -> None:
        want: set[tuple[int, int]] = set()
        for fault in self._link_faults:
            want |= fault_pairs(fault, range(self.hosts))
        add, remove = want - self._blocked, self._blocked - want
        for src in range(self.hosts):
            dels = [self._unblock_cmd(dst) for s, dst in sorted(remove) if s == src]
            adds = [self._block_cmd(dst) for s, dst in sorted(add) if s == src]
            _ip_batch(self.host_ns(src), dels, force=True)
            _ip_batch(self.host_ns(src), adds)
        self._blocked = want

    def _block_cmd(self, dst: int) -> str:
        ip = self.host_ip(dst)
        if self.mode == "drop":
            return f"neigh replace {ip} lladdr {_BOGUS_MAC} dev eth0 nud permanent"
        route_type = "unreachable" if self.mode == "reject" else "blackhole"
        return f"route replace {route_type} {ip}/32"

    def _unblock_cmd(self, dst: int) -> str:
        ip = self.host_ip(dst)
        return f"neigh del {ip} dev eth0" if self.mode == "drop" else f"route del {ip}/32"

    # ----------------------------------------------------------------------------------------------- slow links

    def slow(
        self, i: int, delay_ms: float = 0, jitter_ms: float = 0, loss_pct: float = 0, rate_kbit: int | None = None
    ) -> None:
        """Make host i's link slow in both directions (each applies to every packet through that link).

        With netem: delay/jitter/loss/rate. Without (no sch_netem): loss and rate only, else :class:`NotSupported`.
        Calling again for the same host replaces its settings.
        """
        self._check_host(i)
        if delay_ms < 0 or jitter_ms < 0 or not 0 <= loss_pct <= 100 or (rate_kbit is not None and rate_kbit <= 0):
            raise ValueError("delay/jitter must be >= 0, loss in 0..100, rate > 0")
        if jitter_ms and not delay_ms:
            raise ValueError("jitter needs a delay")
        netem = self.netem_available()
        if (delay_ms or jitter_ms) and not netem:
            raise NotSupported(
                "link delay needs tc netem, but this kernel has no sch_netem; "
                "loss_pct and rate_kbit still work here, or use the TCP proxy's delay"
            )
        with self._lock:
            for ns, dev in self._link_ends(i):
                _run(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"], check=False)
                for argv in self._tc_slow(dev, netem, delay_ms, jitter_ms, loss_pct, rate_kbit):
                    _run(["tc", "-n", ns, *argv])
            self._slow[i] = {
                "kind": "slow",
                "host": i,
                "delay_ms": delay_ms,
                "jitter_ms": jitter_ms,
                "loss_pct": loss_pct,
                "rate_kbit": rate_kbit,
                "impl": "netem" if netem else "htb+bpf",
            }

    def _link_ends(self, i: int) -> list[tuple[str, str]]:
        return [(self.host_ns(i), "eth0"), (self.bridge_ns, f"h{i}")]

    @staticmethod
    def _tc_slow(
        dev: str, netem: bool, delay_ms: float, jitter_ms: float, loss_pct: float, rate_kbit: int | None
    ) -> list[list[str]]:
        if netem:
            args = ["qdisc", "add", "dev", dev, "root", "netem"]
            if delay_ms:
                args += ["delay", f"{delay_ms}ms"] + ([f"{jitter_ms}ms"] if jitter_ms else [])
            if loss_pct:
                args += ["loss", f"{loss_pct}%"]
            if rate_kbit:
                args += ["rate", f"{rate_kbit}kbit"]
            return [args]
        # htb: class 1:1 passes (at rate_kbit if given), class 1:2 is a pfifo of length 0, i.e. drops all it gets.
        rate = f"{rate_kbit}kbit" if rate_kbit else "10gbit"
        cmds = [
            f"qdisc add dev {dev} root handle 1: htb default 1".split(),
            f"class add dev {dev} parent 1: classid 1:1 htb rate {rate} quantum 1514".split(),
        ]
        if loss_pct:
            # Classic BPF: A = random u32 (SKF_AD_RANDOM); A >= threshold -> no match, else match -> class 1:2.
            threshold = min(round(loss_pct / 100 * 2**32), 2**32 - 1)
            prog = f"4,32 0 0 {2**32 - 0x1000 + 56},53 1 0 {threshold},6 0 0 4294967295,6 0 0 0"
            cmds += [
                f"class add dev {dev} parent 1: classid 1:2 htb rate 10gbit quantum 1514".split(),
                f"qdisc add dev {dev} parent 1:2 handle 2: pfifo limit 0".split(),
                [*f"filter add dev {dev} parent 1: protocol all prio 1 bpf bytecode".split(), prog, "flowid", "1:2"],
            ]
        return cmds

    # ----------------------------------------------------------------------------------------------- heal / close

    def heal(self, *, links: bool = True, slow: bool = True) -> None:
        """Remove faults (all by default); idempotent."""
        with self._lock:
            if self._closed:
                return
            if links:
                self._link_faults.clear()
                self._sync_blocked()
            if slow:
                for i in list(self._slow):
                    for ns, dev in self._link_ends(i):
                        _run(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"], check=False)
                    del self._slow[i]

    def describe(self) -> dict[str, Any]:
        """What the run report should say about the network."""
        return {
            "mechanism": self.mechanism,
            "prefix": self.prefix,
            "mode": self.mode,
            "netem": self.netem_available(),
            "hosts": {i: self.host_ip(i) for i in range(self.hosts)},
            "root_ip": self.root_ip,
            "faults": self.faults,
        }

    def close(self) -> None:
        """Kill processes started here, delete namespaces and links. Idempotent; never raises for leftovers."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            atexit.unregister(self.close)
            self._stop_procs()
            _delete_netns(reversed(self._created))
            if self.attach_root:
                _run(["ip", "link", "del", self._root_veth], check=False)

    def _stop_procs(self, grace: float = 2.0) -> None:
        live = [p for p in self._procs if p.poll() is None]
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for p in live:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    # A process started with start_new_session leads its own group: take its children too.
                    if os.getpgid(p.pid) == p.pid:
                        os.killpg(p.pid, sig)
                    else:
                        os.kill(p.pid, sig)
            deadline = time.monotonic() + grace
            for p in live:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(max(0.0, deadline - time.monotonic()))
            live = [p for p in live if p.poll() is None]
            if not live:
                break

    def __enter__(self) -> NetnsNetwork:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def cleanup_stale(prefix_pattern: str = _DEFAULT_PATTERN) -> list[str]:
        """Delete namespaces and root links of earlier runs that died without closing; returns what was removed.

        Names are ``{prefix}-br``/``-h{i}``/``-r`` with ``prefix`` fully matching ``prefix_pattern``. If the pattern
        has a group named ``pid`` (the default does), prefixes whose pid is still alive belong to a running harness
        and are kept; without it, every match is removed.
        """
        rx = re.compile(rf"(?P<prefix>{prefix_pattern})-(?:br|h\d+|r)")

        def stale(name: str) -> bool:
            m = rx.fullmatch(name)
            if not m:
                return False
            pid = m.groupdict().get("pid")
            return pid is None or not _pid_alive(int(pid))

        removed = [ns for ns in _netns_names() if stale(ns)]
        _delete_netns(removed)
        links = _run(["ip", "-o", "link", "show"], check=False).stdout
        for line in links.splitlines():
            parts = line.split(":")
            name = parts[1].strip().split("@")[0] if len(parts) > 1 else ""
            if stale(name):
                _run(["ip", "link", "del", name], check=False)
                removed.append(name)
        return removed
