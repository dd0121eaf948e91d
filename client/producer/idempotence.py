"""The idempotent producer's identity and sequence numbers (KIP-98 and KIP-360).

The broker deduplicates by (producer id, epoch, sequence): every batch carries the producer's id and epoch and
the sequence of its first record, consecutive per partition. A sequence is given once, when the batch is first
drained, and a retry resends the same bytes, so a batch the broker already appended is recognised and answered
with its original offsets. When a sequenced batch fails for good (its fate on the broker unknown, or a gap the
broker refused) the producer bumps its epoch locally and starts every partition again at 0, as Kafka's producer
does: the broker accepts a new epoch only from sequence 0, so nothing after the failure can be misordered
against it. Past the largest epoch a new producer id is needed (``needs_new_id``).
"""

from __future__ import annotations

from odradek.client.producer.batch import ProducerBatch
from odradek.client.structs import TopicPartition

MAX_EPOCH = 32766  # int16 max minus one, as Kafka: the broker's bump would not fit
SEQUENCE_MASK = 0x7FFFFFFF  # sequences wrap at int32 max


class ProducerIdentity:
    def __init__(self) -> None:
        self.producer_id = -1
        self.epoch = -1
        self._next: dict[TopicPartition, int] = {}

    @property
    def ready(self) -> bool:
        return self.producer_id >= 0

    @property
    def needs_new_id(self) -> bool:
        return self.epoch > MAX_EPOCH

    def reset(self, producer_id: int, epoch: int) -> None:
        """A producer id from InitProducerId: sequences start over."""
        self.producer_id, self.epoch = producer_id, epoch
        self._next.clear()

    def assign(self, batch: ProducerBatch) -> None:
        """Stamp a batch drained for the first time with the identity and its partition's next sequence."""
        if batch.base_sequence >= 0:
            return
        tp = TopicPartition(batch.topic, batch.partition)
        sequence = self._next.get(tp, 0)
        batch.producer_id, batch.producer_epoch, batch.base_sequence = self.producer_id, self.epoch, sequence
        self._next[tp] = (sequence + batch.record_count) & SEQUENCE_MASK

    def bump_epoch(self, failed: ProducerBatch) -> None:
        """A sequenced batch failed: continue under the next epoch, every partition from sequence 0 (once per
        epoch, however many of its batches fail)."""
        if failed.base_sequence >= 0 and failed.producer_epoch == self.epoch:
            self.epoch += 1
            self._next.clear()
