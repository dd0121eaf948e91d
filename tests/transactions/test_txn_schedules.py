"""Randomized schedules (seeded) for the transaction state machine: many producers over a few transactional ids,
with requests, persist outcomes (some failing), marker completions, clock ticks and coordinator reloads
interleaved at random. After every step:

- every durable change is an allowed transition, and a producer's epoch only grows (a new producer id only
  replaces one after an exhausted epoch or for a new id);
- a request with a fenced (not current) producer id and epoch never succeeds, except an EndTxn retried with the
  epoch that ended the transaction now being completed, which gets that same answer; an EndTxn that keeps the
  epoch (a client before KIP-890, mixed in at random) succeeds only with the current ones and answers them;
- the core's state is the last durable record of each id: a coordinator reloaded from the records has the same;
- every marker request names exactly the partitions of the transaction and its result.

At the end, with every write succeeding and every marker written, no transaction is left in Prepare*."""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

import pytest
from txn_harness import Harness

from odradek.broker.transactions.core import Reply, TxnCoreConfig
from odradek.broker.transactions.metadata import MAX_PRODUCER_EPOCH, TxnMetadata, TxnState, can_transition
from odradek.client.errors import ErrorCode
from odradek.client.structs import TopicPartition

IDS = ["t0", "t1", "t2"]
PARTS = [TopicPartition("a", i) for i in range(3)] + [TopicPartition("b", 0)]


@dataclass
class Sent:
    kind: str
    txn_id: str
    pid: int
    epoch: int
    committed: bool = False
    bump: bool = True


class Schedule:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.h = Harness(TxnCoreConfig(max_timeout_ms=50_000, id_expiration_ms=400_000))
        self.producers: list[tuple[str, int, int]] = []  # (id, pid, epoch) handed out, zombies included
        self.sent: dict[int, Sent] = {}
        self.ends: set[tuple[str, int, int, bool]] = set()  # EndTxn requests ever sent
        self.seen_log = 0
        self.last: dict[str, TxnMetadata] = {}
        self.owners: dict[int, str] = {}

    # -- the invariants --------------------------------------------------------------------------------------------

    def check(self) -> None:
        h = self.h
        for txn_id, md in h.log[self.seen_log :]:
            old = self.last.get(txn_id)
            if md is None:
                assert old is not None and old.state.idle, (txn_id, old)
                del self.last[txn_id]
                continue
            if old is not None:
                assert can_transition(old.state, md.state), (old.state, md.state)
                if md.producer_id == old.producer_id:
                    assert md.producer_epoch >= old.producer_epoch, (old, md)
                else:
                    assert old.producer_epoch >= MAX_PRODUCER_EPOCH - 1 and md.last_producer_id == old.producer_id
            if md.producer_id != (old.producer_id if old else None):
                assert md.producer_id not in self.owners, "a producer id handed out twice"
                self.owners[md.producer_id] = txn_id
            self.last[txn_id] = md
        self.seen_log = len(h.log)
        assert h.core.txns == self.last  # the state is the last durable record of each id
        for token, reply in list(h.replies.items()):
            sent = self.sent.pop(token, None)
            if sent is None:
                continue
            if reply.error == ErrorCode.NONE:
                self.check_success(sent, reply)
                self.producers.append((sent.txn_id, reply.producer_id, reply.producer_epoch))
        for m in h.markers:
            md = h.core.txns[m.transactional_id]
            assert md.state.preparing and m.partitions == md.partitions
            assert m.committed == (md.state is TxnState.PREPARE_COMMIT)
            assert (m.producer_id, m.producer_epoch) == md.marker_producer

    def check_success(self, sent: Sent, reply: Reply) -> None:
        md = self.h.core.txns[sent.txn_id]
        if sent.kind == "add":
            assert (sent.pid, sent.epoch) == (md.producer_id, md.producer_epoch), "a fenced producer added"
            assert md.state is TxnState.ONGOING
        elif sent.kind == "end":
            done = TxnState.PREPARE_COMMIT if sent.committed else TxnState.PREPARE_ABORT
            assert md.state in (done, TxnState.COMPLETE_COMMIT if sent.committed else TxnState.COMPLETE_ABORT)
            if not sent.bump:
                assert (sent.pid, sent.epoch) == (md.producer_id, md.producer_epoch), "a fenced producer ended one"
                assert (reply.producer_id, reply.producer_epoch) == (sent.pid, sent.epoch)
                return
            assert sent.epoch == md.last_producer_epoch >= 0, "a fenced producer ended a transaction"
            assert sent.pid == (md.last_producer_id if md.overflowed else md.producer_id)
            assert (reply.producer_id, reply.producer_epoch) == (md.producer_id, md.producer_epoch)

    # -- the steps -------------------------------------------------------------------------------------------------

    def producer(self, txn_id: str) -> tuple[int, int] | None:
        mine = [(p, e) for t, p, e in self.producers if t == txn_id]
        if not mine:
            return None
        return mine[-1] if self.rng.random() < 0.7 else self.rng.choice(mine)

    def step(self) -> None:
        h, rng = self.h, self.rng
        txn_id = rng.choice(IDS)
        roll = rng.random()
        who = self.producer(txn_id)
        if roll < 0.12 or who is None:
            h.init(txn_id, timeout=rng.choice([5_000, 20_000, 50_000, 60_000]))
            self.note(h, Sent("init", txn_id, -1, -1))
        elif roll < 0.40:
            tps = rng.sample(PARTS, rng.randint(1, 2))
            h.add(who[0], who[1], *tps, txn_id=txn_id)
            self.note(h, Sent("add", txn_id, *who))
        elif roll < 0.46:
            h.add_offsets(who[0], who[1], rng.choice(["g1", "g2"]), txn_id=txn_id)
            self.note(h, Sent("add", txn_id, *who))
        elif roll < 0.58:
            committed, bump = rng.random() < 0.6, rng.random() < 0.7
            h.end(who[0], who[1], committed, txn_id=txn_id, bump=bump)
            self.note(h, Sent("end", txn_id, who[0], who[1], committed, bump))
        elif roll < 0.62:
            verdict = h.core.verify(txn_id, who[0], who[1], PARTS)
            md = h.core.txns.get(txn_id)
            for tp, code in verdict.items():
                if code == ErrorCode.NONE:
                    assert md is not None and md.state is TxnState.ONGOING and tp in md.partitions
                    assert (who[0], who[1]) == (md.producer_id, md.producer_epoch)
        elif roll < 0.80 and h.pending:
            persist = rng.choice(h.pending)
            fail = rng.random() < 0.15
            h.persisted(persist, ErrorCode.NOT_ENOUGH_REPLICAS if fail else ErrorCode.NONE)
        elif roll < 0.90 and h.markers:
            m = h.markers.pop(rng.randrange(len(h.markers)))
            h.take(h.core.on_markers_written(m.transactional_id, m.producer_id, m.producer_epoch, h.now))
        elif roll < 0.97:
            h.tick(h.now + rng.choice([100, 1_000, 10_000, 100_000]))
        else:
            self.reload()

    def note(self, h: Harness, sent: Sent) -> None:
        self.sent[h.last_token] = sent

    def reload(self) -> None:
        """The coordinator fails over: writes in flight are lost, a new core replays the durable records."""
        h = self.h
        h.pending.clear()
        h.markers.clear()
        core = h.reloaded()
        assert core.txns == h.core.txns
        h.core = core
        self.sent.clear()  # in-flight requests were answered NOT_COORDINATOR by the shell
        h.take(core.resume())

    def drain(self) -> None:
        h = self.h
        for _ in range(100):
            if not h.pending and not h.markers and not h.core.completions_to_retry():
                break
            h.flush()
            h.write_markers()
            h.take(h.core.retry_completions(h.now))
            self.check()
        assert not h.pending and not h.markers
        assert not [md for md in h.core.txns.values() if md.state.preparing]


@pytest.mark.parametrize("seed", range(30))
def test_random_schedules_keep_the_invariants(seed: int) -> None:
    s = Schedule(seed)
    h = s.h
    h.auto = False
    # one id starts near the end of its epochs, so overflows to a new producer id happen too
    h.init("t2", timeout=5_000)
    h.flush()
    md = replace(h.md("t2"), producer_epoch=MAX_PRODUCER_EPOCH - 4)
    h.core.replay("t2", md)
    h.log.append(("t2", md))
    s.producers.append(("t2", md.producer_id, md.producer_epoch))
    s.check()
    for _ in range(400):
        s.step()
        s.check()
    s.drain()
    s.check()
