"""What the transaction service (``txn_service.TxnService``) takes and answers, whichever listener a request came in
by: odradek's own frozen types, with Kafka's field names and error codes (ints), and none of a protocol's encoding.
Each listener's adapter translates its protocol's request into one of these and the answer back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from odradek.broker.log.log import ActiveProducer
from odradek.broker.transactions.coordinator import NO_DURATION_FILTER
from odradek.client.errors import ErrorCode
from odradek.client.structs import TopicPartition

NONE = int(ErrorCode.NONE)


@dataclass(frozen=True, slots=True)
class TxnTopic:
    """A topic's partitions by index, as a request names them."""

    name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PartitionResult:
    partition: int
    error: int = NONE
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class TopicResults:
    name: str
    partitions: tuple[PartitionResult, ...]


# ---- a producer's transaction: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn ----


@dataclass(frozen=True, slots=True)
class AddPartitionsToTxn:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]
    verify_only: bool = False  # a partition leader's check of a producer's first transactional write


@dataclass(frozen=True, slots=True)
class AddPartitionsToTxnAnswer:
    error: int  # a request-level error (NOT_COORDINATOR, ...): then no partition has its own
    partitions: Mapping[TopicPartition, int]  # each partition's error


@dataclass(frozen=True, slots=True)
class AddOffsetsToTxn:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str


@dataclass(frozen=True, slots=True)
class AddOffsetsToTxnAnswer:
    error: int


@dataclass(frozen=True, slots=True)
class EndTxn:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool  # True: commit, False: abort
    keep_epoch: bool = False  # end at the producer's own epoch (before KIP-890), not a bumped one


@dataclass(frozen=True, slots=True)
class EndTxnAnswer:
    error: int
    producer_id: int  # and epoch: the producer's for its next transaction
    producer_epoch: int


# ---- the partition leaders': WriteTxnMarkers, DescribeProducers ----


@dataclass(frozen=True, slots=True)
class TxnMarker:
    producer_id: int
    producer_epoch: int  # the epoch the marker is written with (the bumped epoch)
    committed: bool
    topics: tuple[TxnTopic, ...]
    coordinator_epoch: int


@dataclass(frozen=True, slots=True)
class WriteTxnMarkers:
    markers: tuple[TxnMarker, ...]
    timeout_ms: int = 0  # how long to wait for each marker's replication; 0: the leader's default


@dataclass(frozen=True, slots=True)
class MarkerResult:
    producer_id: int
    topics: tuple[TopicResults, ...]


@dataclass(frozen=True, slots=True)
class WriteTxnMarkersAnswer:
    markers: tuple[MarkerResult, ...]  # one per marker, in the request's order


@dataclass(frozen=True, slots=True)
class DescribeProducers:
    topics: tuple[TxnTopic, ...]


@dataclass(frozen=True, slots=True)
class PartitionProducers:
    partition: int
    error: int = NONE
    error_message: str = ""
    active_producers: tuple[ActiveProducer, ...] = ()


@dataclass(frozen=True, slots=True)
class ProducersTopic:
    name: str
    partitions: tuple[PartitionProducers, ...]


@dataclass(frozen=True, slots=True)
class DescribeProducersAnswer:
    topics: tuple[ProducersTopic, ...]  # the request's topics in its order, those refused by ACL last


# ---- the admin's: DescribeTransactions, ListTransactions ----


@dataclass(frozen=True, slots=True)
class DescribeTransactions:
    transactional_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """A transaction as DescribeTransactions tells it; with an error, only its id (and the error)."""

    transactional_id: str
    error: int = NONE
    state: str = ""  # Kafka's state names: Empty, Ongoing, PrepareCommit, ...
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = 0  # -1 without an ongoing transaction
    producer_id: int = 0
    producer_epoch: int = 0
    topics: tuple[TxnTopic, ...] = ()
    coordinator_id: int = 0
    last_update_time_ms: int = 0


@dataclass(frozen=True, slots=True)
class DescribeTransactionsAnswer:
    transactions: tuple[TransactionDescription, ...]  # one per id asked for, in the request's order


@dataclass(frozen=True, slots=True)
class ListTransactions:
    state_filters: tuple[str, ...] = ()  # empty: every state
    producer_id_filters: tuple[int, ...] = ()  # empty: every producer
    duration_filter_ms: int = NO_DURATION_FILTER  # >= 0: only those that started more than this long ago


@dataclass(frozen=True, slots=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state: str
    coordinator_id: int


@dataclass(frozen=True, slots=True)
class ListTransactionsAnswer:
    error: int
    unknown_state_filters: tuple[str, ...] = ()
    transactions: tuple[ListedTransaction, ...] = ()
