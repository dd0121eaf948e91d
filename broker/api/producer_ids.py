"""InitProducerId, whatever the listener: a producer id and epoch for an idempotent producer, or, for a
transactional one, from its transactional id's coordinator (which fences its older incarnations).

The gRPC servicer (``BrokerService.InitProducerId``) and the Kafka listener's handler call it with a typed request
and the caller's ``RequestContext``, and translate its answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from odradek.broker.producer_ids import ProducerIdManager
from odradek.broker.transactions.coordinator import TransactionCoordinator
from odradek.client.common.access import OPEN, AccessControl
from odradek.client.common.acls import AclOperation, ResourceType
from odradek.client.common.caller import Caller
from odradek.client.common.metadata_image import MetadataImage
from odradek.client.common.request_context import RequestContext
from odradek.client.errors import ErrorCode, OdradekError

NO_PRODUCER_ID = NO_PRODUCER_EPOCH = -1
# As Kafka: an epoch is bumped only below int16 max - 1; past that the producer gets a fresh id at epoch 0.
MAX_PRODUCER_EPOCH = 32766


@dataclass(frozen=True, slots=True)
class InitProducerIdRequest:
    transactional_id: str  # "": an idempotent producer
    transaction_timeout_ms: int = -1
    producer_id: int = NO_PRODUCER_ID  # with its epoch: the producer's own, to bump (KIP-360)
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class InitProducerIdAnswer:
    error: int = ErrorCode.NONE
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


class ProducerIdService:
    def __init__(
        self,
        image: Callable[[], MetadataImage],
        producer_ids: ProducerIdManager | None = None,
        transactions: TransactionCoordinator | None = None,
        access: AccessControl = OPEN,
    ) -> None:
        self._image = image
        # Given by the node (it needs the controller connection); without it an idempotent producer is refused.
        self.producer_ids = producer_ids
        # This broker's transaction coordinator: a transactional id's InitProducerId goes there.
        self.transactions = transactions
        self.access = access

    async def init_producer_id(self, request: InitProducerIdRequest, ctx: RequestContext) -> InitProducerIdAnswer:
        """An idempotent producer (empty ``transactional_id``) gets a new id at epoch 0, or, after an unrecoverable
        sequence error (KIP-360), its id at the next epoch, so it can restart its sequences without the partitions
        mistaking its new batches for duplicates or gaps. A transactional producer is answered by its transactional
        id's coordinator (this broker, or NOT_COORDINATOR), which fences its older incarnations."""
        if self.access.enabled:
            refused = self._refusal(ctx.caller, request.transactional_id)
            if refused:
                return InitProducerIdAnswer(refused)
        if request.transactional_id:
            if self.transactions is None:
                return InitProducerIdAnswer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            code, pid, epoch = await self.transactions.init_producer_id(
                request.transactional_id, request.transaction_timeout_ms, request.producer_id, request.producer_epoch
            )
            if code != ErrorCode.NONE:
                return InitProducerIdAnswer(code)
            return InitProducerIdAnswer(ErrorCode.NONE, pid, epoch)
        pid, epoch = request.producer_id, request.producer_epoch
        # Kafka refuses an id without an epoch and vice versa; here producer_id -1 alone asks for a new id, as
        # proto3 cannot tell an epoch left unset from epoch 0 (and a new id is always a safe answer).
        if pid < NO_PRODUCER_ID or (pid != NO_PRODUCER_ID and not 0 <= epoch <= 32767):
            return InitProducerIdAnswer(ErrorCode.INVALID_REQUEST)
        # An id above every allocated block was never handed out: bumping it would let a client squat on an id
        # another producer will get, so it gets a fresh one instead (the metadata of this broker may lag another
        # broker's newest block; a fresh id is always a valid answer to a bump).
        if pid != NO_PRODUCER_ID and epoch < MAX_PRODUCER_EPOCH and pid < self._image().next_producer_id:
            return InitProducerIdAnswer(ErrorCode.NONE, pid, epoch + 1)
        if self.producer_ids is None:
            return InitProducerIdAnswer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        try:
            return InitProducerIdAnswer(ErrorCode.NONE, await self.producer_ids.next_id(), 0)
        except OdradekError as e:
            return InitProducerIdAnswer(e.code)

    def _refusal(self, caller: Caller, transactional_id: str) -> int:
        """A transactional producer needs Write on its transactional id; an idempotent one cluster IdempotentWrite
        or, as Kafka since KIP-679, Write on some topic."""
        access = self.access
        if transactional_id:
            if access.allows(
                caller, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id, api="InitProducerId"
            ):
                return ErrorCode.NONE
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        if access.allows_some(caller, AclOperation.WRITE, ResourceType.TOPIC) or access.allows_cluster(
            caller, AclOperation.IDEMPOTENT_WRITE, api="InitProducerId"
        ):
            return ErrorCode.NONE
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
