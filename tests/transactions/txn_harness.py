"""A test shell around one TxnCore: a simulated clock, numbered tokens, a log of the records made durable, the
markers asked for, and the answer each token got."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from odradek.broker.transactions.core import Output, Persist, Reply, TxnCore, TxnCoreConfig, WriteMarkers
from odradek.broker.transactions.metadata import TxnMetadata
from odradek.client.errors import ErrorCode
from odradek.client.structs import TopicPartition

NONE = ErrorCode.NONE
TIMEOUT = 60_000
A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


@dataclass
class Harness:
    config: TxnCoreConfig = field(default_factory=TxnCoreConfig)
    core: TxnCore = field(init=False)
    now: int = 0
    auto: bool = True  # persists succeed at once
    replies: dict[int, Reply] = field(default_factory=dict)
    pending: list[Persist] = field(default_factory=list)
    markers: list[WriteMarkers] = field(default_factory=list)
    log: list[tuple[str, TxnMetadata | None]] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    last_token: int = 0  # of the newest request
    completed: list[bool] = field(default_factory=list)
    _tokens: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _pids: itertools.count[int] = field(default_factory=lambda: itertools.count(1000))

    def __post_init__(self) -> None:
        self.core = TxnCore(self.config)

    def take(self, out: Output) -> Output:
        for action in out.actions:
            if isinstance(action, Reply):
                assert action.token not in self.replies, f"token {action.token} answered twice"
                self.replies[action.token] = action
            elif isinstance(action, Persist):
                self.pending.append(action)
            else:
                self.markers.append(action)
        self.events += out.events
        self.completed += out.completed
        if self.auto:
            self.flush()
        return out

    def persisted(self, persist: Persist, error: int = NONE) -> None:
        self.pending.remove(persist)
        if error == NONE:
            self.log.append((persist.transactional_id, persist.metadata))
        self.take(self.core.on_persisted(persist.persist_id, error, self.now))

    def flush(self) -> None:
        while self.pending:
            self.persisted(self.pending[0])

    def fresh(self, txn_id: str, ending: bool = False) -> int | None:
        return next(self._pids) if self.core.needs_producer_id(txn_id, ending=ending) else None

    def _answer(self, token: int) -> Reply | None:
        self.last_token = token
        return self.replies.get(token)

    def init(self, txn_id: str = "t", timeout: int = TIMEOUT, pid: int = -1, epoch: int = -1) -> Reply | None:
        token = next(self._tokens)
        self.take(self.core.init_producer_id(token, txn_id, timeout, pid, epoch, self.now, self.fresh(txn_id)))
        return self._answer(token)

    def add(self, pid: int, epoch: int, *tps: TopicPartition, txn_id: str = "t") -> Reply | None:
        token = next(self._tokens)
        self.take(self.core.add_partitions(token, txn_id, pid, epoch, tps or (A0,), self.now))
        return self._answer(token)

    def add_offsets(self, pid: int, epoch: int, group: str, partitions: int = 50, txn_id: str = "t") -> Reply | None:
        token = next(self._tokens)
        self.take(self.core.add_offsets(token, txn_id, pid, epoch, group, partitions, self.now))
        return self._answer(token)

    def end(self, pid: int, epoch: int, committed: bool = True, txn_id: str = "t", bump: bool = True) -> Reply | None:
        token = next(self._tokens)
        fresh = self.fresh(txn_id, ending=True) if bump else None
        self.take(self.core.end_txn(token, txn_id, pid, epoch, committed, self.now, fresh, bump_epoch=bump))
        return self._answer(token)

    def tick(self, to: int) -> None:
        self.now = to
        self.take(self.core.tick(to))

    def write_markers(self) -> None:
        """Every marker asked for so far is written."""
        markers, self.markers = self.markers, []
        for m in markers:
            self.take(self.core.on_markers_written(m.transactional_id, m.producer_id, m.producer_epoch, self.now))

    def md(self, txn_id: str = "t") -> TxnMetadata:
        return self.core.txns[txn_id]

    def reloaded(self) -> TxnCore:
        """A new core replaying the durable records, as a new coordinator loads them."""
        core = TxnCore(self.config)
        for txn_id, md in self.log:
            core.replay(txn_id, md)
        return core


def ok(reply: Reply | None) -> tuple[int, int]:
    assert reply is not None and reply.error == NONE, reply
    return reply.producer_id, reply.producer_epoch


def error(reply: Reply | None) -> int:
    assert reply is not None, "no answer"
    return reply.error
