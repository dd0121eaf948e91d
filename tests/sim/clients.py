"""Clients: acks=all producers remembering every acknowledged record, and consumers reading and asking for the
latest offset (the dataplane's ListOffsets logic) from whichever broker they believe leads.

Clients learn leaders from a random live broker's metadata and, as Kafka clients do, ignore metadata older than
the leader epoch they already know.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker_model import SimBroker
from controller_model import TOPIC
from world import Network, World

from odradek.broker.api.data import LATEST, DataService
from odradek.client.errors import ErrorCode, OdradekError
from odradek.client.record.batch import read_batches
from odradek.client.record.builder import encode_batch

_NONE = ErrorCode.NONE  # a protobuf enum attribute is a Python __getattr__ call
CLIENT = 1000  # clients' node ids on the network start here
READ_BYTES = 2_000


@dataclass
class Acked:
    offset: int
    value: bytes
    at: int  # when the producer got the answer
    epoch: int  # the leader epoch it was acknowledged at


@dataclass
class ClientView:
    """What one client believes about one partition."""

    leader: int = -1
    leader_epoch: int = -1
    high_watermark: int = 0  # the largest seen
    epoch_seen: int = -1

    def learn(self, brokers: dict[int, SimBroker], world: World, partition: int) -> None:
        live = [b for b in brokers.values() if b.proc is not None]
        if not live:
            return
        state = world.rng.choice(live).proc.image.partition(TOPIC, partition)
        if state is not None and state.leader_epoch > self.leader_epoch:
            self.leader, self.leader_epoch = state.leader, state.leader_epoch


@dataclass
class Producer:
    partition: int
    acked: list[Acked] = field(default_factory=list)
    view: ClientView = field(default_factory=ClientView)
    sent: int = 0
    in_flight: bool = False

    def produce(self, world: World, net: Network, brokers: dict[int, SimBroker]) -> None:
        if self.in_flight:
            return
        self.view.learn(brokers, world, self.partition)
        leader = brokers.get(self.view.leader)
        if leader is None:
            return
        self.sent += 1
        value = f"p{self.partition}-v{self.sent}".encode()
        records = encode_batch([value], timestamps=world.now)
        self.in_flight = True
        node = CLIENT + self.partition

        def answered(code: int, offset: int, epoch: int) -> None:
            self.in_flight = False
            if code == _NONE:
                self.acked.append(Acked(offset, value, world.now, epoch))
                world.log(f"PROD p{self.partition}: ACKED {value.decode()} at offset {offset} by B{leader.id}")
            else:
                world.log(f"PROD p{self.partition}: {value.decode()} failed: {ErrorCode.Name(code)}")

        def reply(code: int, offset: int) -> None:
            proc = leader.proc
            p = None if proc is None else proc.partitions.get(self.partition)
            epoch = -1 if p is None else p.leader_epoch
            net.send(leader.id, node, f"produce answer p{self.partition}", lambda: answered(code, offset, epoch))

        net.send(
            node,
            leader.id,
            f"produce p{self.partition} {value.decode()} to B{leader.id}",
            lambda: leader.serve_produce(self.partition, records, reply),
        )
        # The client's own deadline: it may send again (with a new value) without knowing the outcome.
        world.after(1_500, "producer deadline", lambda: setattr(self, "in_flight", False))


def read_values(log_, start: int, end: int) -> dict[int, bytes]:
    """Offset -> value for every record of ``log_`` in [start, end)."""
    out: dict[int, bytes] = {}
    offset = max(start, log_.log_start_offset)
    while offset < min(end, log_.log_end_offset):
        data = log_.read(offset, READ_BYTES)
        if data.next_offset <= offset:
            break
        for batch in read_batches(bytes(data.records)):
            for r in batch.records():
                if start <= r.offset < end:
                    out[r.offset] = r.value
        offset = data.next_offset
    return out


@dataclass
class Consumer:
    partition: int
    view: ClientView = field(default_factory=ClientView)
    position: int = 0

    def poll(self, world: World, brokers: dict[int, SimBroker], acked: dict[int, bytes]) -> None:
        """One ListOffsets(latest) or one fetch at the consumer's position, straight to the believed leader."""
        self.view.learn(brokers, world, self.partition)
        b = brokers.get(self.view.leader)
        if b is None or b.proc is None or (p := b.proc.partitions.get(self.partition)) is None:
            return
        what = f"CONS p{self.partition} @B{b.id} epoch {self.view.leader_epoch}"
        try:
            if world.rng.random() < 0.5:
                p.check_leader(self.view.leader_epoch)
                hw, _ = DataService._offset_for(p, LATEST)
                epoch = p.leader_epoch
                how = "ListOffsets latest"
            else:
                if self.position > p.log.high_watermark:
                    self.position = 0
                data = p.read(self.position, READ_BYTES, self.view.leader_epoch)
                hw, epoch = p.log.high_watermark, p.leader_epoch
                how = "fetch"
                for batch in read_batches(bytes(data.records)):
                    for r in batch.records():
                        want = acked.get(r.offset)
                        if want is not None and want != r.value:
                            world.fail(
                                "read-back",
                                "acknowledged record read back wrong",
                                f"p{self.partition} offset {r.offset}: acked {want!r}, B{b.id} serves {r.value!r}",
                            )
                self.position = data.next_offset
        except OdradekError as e:
            world.log(f"{what}: {ErrorCode.Name(e.code)}")
            return
        world.log(f"{what}: {how} hw {hw}")
        if hw < self.view.high_watermark:
            world.fail(
                "hw-backwards",
                "high watermark went backwards (invariant 2)",
                f"p{self.partition}: {how} from B{b.id} at epoch {epoch} says {hw}, "
                f"the client saw {self.view.high_watermark} before",
            )
        if epoch < self.view.epoch_seen:
            world.fail(
                "epoch-backwards",
                "leader epoch went backwards (invariant 2)",
                f"p{self.partition}: B{b.id} answers at epoch {epoch}, the client saw {self.view.epoch_seen}",
            )
        self.view.high_watermark = hw
        self.view.epoch_seen = epoch
