"""The invariants checked after every step of the simulation (and the client-side ones in clients.py).

1. No acknowledged acks=all record is missing from the log of an elected leader once it leads (offset and value);
   a deposed leader that has not heard of its successor yet is held to what was acknowledged up to its epoch.
2. High watermarks and leader epochs never go backwards as clients see them (checked by the consumers).
3. Committed ISR members (live, registered in their current incarnation) hold everything below the leader's high
   watermark, record for record.
4. At most one broker leads a partition at a leader epoch, and that epoch's leader is the one committed metadata
   elected.
"""

from __future__ import annotations

from broker_model import SimBroker
from clients import Producer, read_values
from controller_model import TOPIC, SimController
from world import World

from odradek.broker.partition import Partition
from odradek.client.common.metadata_image import MetadataImage, PartitionRegistration


class Invariants:
    def __init__(self, world: World, ctl: SimController, brokers: dict[int, SimBroker], producers: list[Producer]):
        self.world = world
        self.ctl = ctl
        self.brokers = brokers
        self.producers = producers
        self._leaders: dict[tuple[int, int], int] = {}
        # (leader replica, its leader epoch) -> acknowledged records verified on it
        self._complete: dict[tuple[Partition, int], int] = {}
        self._in_sync: dict[tuple[Partition, Partition], tuple[int, int]] = {}  # -> (truncations, verified below)
        self._image: MetadataImage | None = None  # the committed image _isr_plan was worked out from
        self._isr_plan: list[tuple[int, PartitionRegistration, SimBroker | None, list[tuple[SimBroker, bytes]]]] = []

    def check(self) -> None:
        # Runs after every step: the passing case of invariants 1 and 4 is decided inline, and any doubt goes to
        # _one_leader and _leader_complete, which check everything again and name what broke.
        leaders, elected, complete, producers = self._leaders, self.ctl.elected, self._complete, self.producers
        for b in self.brokers.values():
            proc = b.proc
            if proc is None:
                continue
            for i, p in proc.partitions.items():
                if p.leader_state is not None:  # p.is_leader, without the property call
                    epoch = p.leader_epoch
                    key = (i, epoch)
                    chosen = elected.get(key)
                    if (
                        leaders.setdefault(key, b.id) != b.id
                        or chosen is None
                        or chosen[0] != b.id
                        or chosen[1] != proc.incarnation
                    ):
                        self._one_leader(b, i, p)
                    if complete.get((p, epoch), 0) < len(producers[i].acked):
                        self._leader_complete(b, i, p)
        image = self.ctl.image
        if image is not self._image:
            self._image, self._isr_plan = image, self._plan_isr(image)
        in_sync = self._in_sync
        for i, state, leader, members in self._isr_plan:
            # Invariant 3's passing case inline (see _isr_in_sync, which does the comparing).
            proc = leader.proc if leader is not None else None
            if proc is None:
                continue
            lp = proc.partitions.get(i)
            if lp is None or lp.leader_state is None or lp.leader_epoch != state.leader_epoch:
                continue
            hw = lp.log.high_watermark
            for member, incarnation in members:
                mproc = member.proc
                if mproc is None or mproc.incarnation != incarnation:
                    continue
                rp = mproc.partitions.get(i)
                if rp is None:
                    continue
                truncations = rp.log._truncations  # a truncation forces a full comparison again
                done_truncations, below = in_sync.get((lp, rp), (-1, 0))
                start = below if done_truncations == truncations else lp.log.log_start_offset
                if start < hw:
                    self._isr_in_sync(i, state, leader, lp, member, rp, start, hw)
                    in_sync[(lp, rp)] = (truncations, hw)

    def _plan_isr(
        self, image: MetadataImage
    ) -> list[tuple[int, PartitionRegistration, SimBroker | None, list[tuple[SimBroker, bytes]]]]:
        """What invariant 3 needs of a committed image, worked out once per image (images are immutable): for each
        partition its registration, its leader, and the other ISR members registered, with their incarnations."""
        topic = image.topic(TOPIC)
        plan = []
        for i in range(len(self.producers)):
            state = topic.partitions.get(i) if topic else None
            leader = self.brokers.get(state.leader)  # type: ignore[union-attr]
            members = []
            if leader is not None:
                for r in state.isr:  # type: ignore[union-attr]
                    member = self.brokers[r]
                    registration = image.brokers.get(r)
                    if r != leader.id and registration is not None:
                        members.append((member, registration.incarnation_id))
            plan.append((i, state, leader, members))
        return plan  # type: ignore[return-value]

    def _one_leader(self, b: SimBroker, i: int, p: Partition) -> None:
        key = (i, p.leader_epoch)
        who = self._leaders.setdefault(key, b.id)
        if who != b.id:
            self.world.fail(
                "two-leaders",
                "two leaders at one leader epoch (invariant 4)",
                f"p{i} epoch {p.leader_epoch}: B{who} and B{b.id}",
            )
        elected = self.ctl.elected.get(key)
        if elected is None or elected[0] != b.id:
            self.world.fail(
                "not-elected",
                "a leader committed metadata did not elect (invariant 4)",
                f"B{b.id} leads p{i} at epoch {p.leader_epoch}; committed metadata elected {elected}",
            )
        elif elected[1] != b.proc.incarnation:
            self.world.fail(
                "stale-incarnation",
                "a restarted broker leads at an epoch elected for its previous incarnation (invariant 4)",
                f"B{b.id} (incarnation {b.generation}) leads p{i} at epoch {p.leader_epoch}, committed metadata "
                "elected an earlier incarnation of it",
            )

    def _leader_complete(self, b: SimBroker, i: int, p: Partition) -> None:
        acked = self.producers[i].acked
        start = self._complete.get((p, p.leader_epoch), 0)
        if start >= len(acked):
            return
        for a in acked[start:]:
            if a.epoch > p.leader_epoch:
                continue  # acknowledged by a later leader: this one is deposed and just has not heard yet
            have = read_values(p.log, a.offset, a.offset + 1).get(a.offset)
            if have != a.value:
                self.world.fail(
                    "missing-acked",
                    "acknowledged record missing from the leader (invariant 1)",
                    f"B{b.id} leads p{i} at epoch {p.leader_epoch} (log [{p.log.log_start_offset}, "
                    f"{p.log.log_end_offset}), hw {p.log.high_watermark}) but offset {a.offset} holds {have!r}, "
                    f"acknowledged as {a.value!r} at t={a.at}",
                )
        self._complete[(p, p.leader_epoch)] = len(acked)

    def _isr_in_sync(
        self,
        i: int,
        state: PartitionRegistration,
        leader: SimBroker,
        lp: Partition,
        member: SimBroker,
        rp: Partition,
        start: int,
        hw: int,
    ) -> None:
        """Compare ISR member ``rp`` with leader ``lp`` over [start, hw): ``state`` is partition ``i`` in the
        controller's committed image."""
        want = read_values(lp.log, start, hw)
        have = read_values(rp.log, start, hw)
        if want != have:
            missing = sorted(o for o in want if have.get(o) != want[o])
            self.world.fail(
                "isr-lacks",
                "a committed ISR member lacks records below the high watermark (invariant 3)",
                f"p{i}: leader B{leader.id} at epoch {lp.leader_epoch} has hw {hw}; committed ISR "
                f"{list(state.isr)} (partition epoch {state.partition_epoch}); B{member.id} (log "
                f"[{rp.log.log_start_offset}, {rp.log.log_end_offset})) lacks offsets {missing[:10]}",
            )
