"""Typed errors shared by client and broker.

Each exception carries an ``ErrorCode`` from the wire protocol (proto/common.proto), so the broker can put it in
a response and the client can raise the same type from a response without parsing any message text.
"""

from __future__ import annotations

from odradek.proto import common_pb2

ErrorCode = common_pb2.ErrorCode
# protobuf's enum wrapper finds ``ErrorCode.NONE`` through ``__getattr__`` and a descriptor lookup, about 0.8 us
# an access, on paths that run per partition per request (acks completed, fetch answers decided): the values as
# plain attributes make it a dict lookup (~30 ns).
for _name, _number in ErrorCode.items():
    setattr(ErrorCode, _name, _number)

# Errors a client may retry after refreshing metadata or backing off (Kafka's RetriableException set).
RETRIABLE_CODES: frozenset[int] = frozenset(
    {
        ErrorCode.CORRUPT_MESSAGE,  # retriable in Kafka: the batch may have been damaged in transit
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.NOT_CONTROLLER,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.OFFSET_NOT_AVAILABLE,
        ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        ErrorCode.UNSTABLE_OFFSET_COMMIT,
        ErrorCode.THROTTLING_QUOTA_EXCEEDED,
        ErrorCode.CONCURRENT_TRANSACTIONS,
    }
)


def error_name(code: int) -> str:
    """The ErrorCode's name, or its number for a code this client does not know (a newer node may send one:
    protobuf keeps unknown enum values as plain ints)."""
    try:
        return ErrorCode.Name(ErrorCode.ValueType(code))
    except ValueError:
        return str(code)


class OdradekError(Exception):
    """Base of all odradek errors; ``code`` is the wire ErrorCode."""

    code: int = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str = "", code: int | None = None) -> None:
        if code is not None:
            self.code = code
        super().__init__(message or error_name(self.code))

    @property
    def code_name(self) -> str:
        return error_name(self.code)

    @property
    def retriable(self) -> bool:
        return self.code in RETRIABLE_CODES


class CorruptRecordError(OdradekError):
    """A batch failed validation: bad length, magic, CRC, record count or offset deltas."""

    code = ErrorCode.CORRUPT_MESSAGE


class RecordTooLargeError(OdradekError):
    """A batch or record exceeds ``message.max.bytes`` (or ``max.request.size`` on the client)."""

    code = ErrorCode.MESSAGE_TOO_LARGE


class OffsetOutOfRangeError(OdradekError):
    code = ErrorCode.OFFSET_OUT_OF_RANGE


class UnknownTopicOrPartitionError(OdradekError):
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class NotLeaderOrFollowerError(OdradekError):
    code = ErrorCode.NOT_LEADER_OR_FOLLOWER


class StorageError(OdradekError):
    """The partition's storage failed (I/O error, or a corrupt batch found in the middle of a segment)."""

    code = ErrorCode.KAFKA_STORAGE_ERROR


class InvalidRequestError(OdradekError):
    code = ErrorCode.INVALID_REQUEST


class OffsetNotAvailableError(OdradekError):
    """A new leader's high watermark is still below the start of its leader epoch: the offsets it could answer
    would be older than ones the previous leader gave out. Retriable: it catches up once its followers fetch."""

    code = ErrorCode.OFFSET_NOT_AVAILABLE


class NoOffsetForPartitionError(OffsetOutOfRangeError):
    """A consumer has no position for a partition and ``auto.offset.reset`` is ``none``."""


class LeaderNotAvailableError(OdradekError):
    code = ErrorCode.LEADER_NOT_AVAILABLE


class FencedLeaderEpochError(OdradekError):
    """The request carried an older leader epoch than the broker's: the client's metadata is stale."""

    code = ErrorCode.FENCED_LEADER_EPOCH


class UnknownLeaderEpochError(OdradekError):
    """The request carried a newer leader epoch than the broker knows: the broker's metadata is behind."""

    code = ErrorCode.UNKNOWN_LEADER_EPOCH


class NotEnoughReplicasError(OdradekError):
    code = ErrorCode.NOT_ENOUGH_REPLICAS


class NotEnoughReplicasAfterAppendError(OdradekError):
    code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


class InvalidUpdateVersionError(OdradekError):
    """An AlterPartition carried a partition epoch other than the controller's: the leader's view is stale."""

    code = ErrorCode.INVALID_UPDATE_VERSION


class NetworkError(OdradekError):
    """A node could not be reached, or the connection failed mid-request."""

    code = ErrorCode.NETWORK_EXCEPTION


class RequestTimedOutError(OdradekError, TimeoutError):
    """The broker, or the RPC deadline (``request.timeout.ms``), timed the request out."""

    code = ErrorCode.REQUEST_TIMED_OUT


class ClientTimeoutError(OdradekError, TimeoutError):
    """The client gave up waiting on its own: ``max.block.ms`` (metadata, buffer memory), ``delivery.timeout.ms``,
    or a caller's timeout. Kafka's TimeoutException; never sent on the wire, so not in ``error_for_code``."""

    code = ErrorCode.REQUEST_TIMED_OUT


class ConfigError(OdradekError, ValueError):
    """A client configuration is unknown, malformed or inconsistent."""

    code = ErrorCode.INVALID_CONFIG


class InvalidConfigError(OdradekError):
    """The cluster refused a topic config (unknown, malformed, or one it does not support); the message names it."""

    code = ErrorCode.INVALID_CONFIG


class OutOfOrderSequenceError(OdradekError):
    """A batch does not continue its producer's sequence (a gap, or a new epoch not starting at 0)."""

    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(OdradekError):
    """A batch carries an older producer epoch than the partition has seen: a fenced (zombie) producer."""

    code = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidRecordError(OdradekError):
    """A batch the broker refuses as a whole (e.g. an idempotent batch sharing its partition's records)."""

    code = ErrorCode.INVALID_RECORD


class CommitFailedError(OdradekError):
    """A group member's commit was refused because it is no longer in the generation that owns the partitions:
    it left (max.poll.interval.ms exceeded, session expired), was reset (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION),
    or a rebalance is in progress (REBALANCE_IN_PROGRESS). Kafka's CommitFailedException: raised by the client, the
    code says which case it is. Not retriable as such: poll() rejoins, and the partitions the member then owns are
    the ones it may commit."""

    code = ErrorCode.ILLEGAL_GENERATION

    @property
    def retriable(self) -> bool:
        return False


class FencedInstanceIdError(OdradekError):
    """Another consumer joined with this consumer's group.instance.id: this one is a zombie and must stop."""

    code = ErrorCode.FENCED_INSTANCE_ID


class CoordinatorNotAvailableError(OdradekError):
    """The group's coordinator could not be found or reached in time (retriable)."""

    code = ErrorCode.COORDINATOR_NOT_AVAILABLE


class GroupNotEmptyError(OdradekError):
    """An admin change to a group's offsets while the group has members (Kafka answers UNKNOWN_MEMBER_ID to such a
    simple commit): the members own their positions; stop them first. Not in the by-code table: a member's own
    UNKNOWN_MEMBER_ID means something else."""

    code = ErrorCode.UNKNOWN_MEMBER_ID


class InvalidTxnStateError(OdradekError):
    """The request does not fit the transaction's state: EndTxn without a transaction, a non-transactional write
    from a producer whose transaction is open on the partition, a commit of a transaction that was aborted."""

    code = ErrorCode.INVALID_TXN_STATE


class ProducerFencedError(OdradekError):
    """Another producer with the same transactional.id started (or the coordinator aborted this producer's
    transaction at its timeout and bumped its epoch): this one is a zombie. Fatal: close the producer."""

    code = ErrorCode.PRODUCER_FENCED


class TransactionCoordinatorFencedError(OdradekError):
    """A transaction marker from an older coordinator than the partition has seen for the producer."""

    code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


class ConcurrentTransactionsError(OdradekError):
    """The producer's previous transaction is still completing (its markers being written): retry shortly."""

    code = ErrorCode.CONCURRENT_TRANSACTIONS


class InvalidTransactionTimeoutError(OdradekError):
    """transaction.timeout.ms is above the broker's transaction.max.timeout.ms (or not positive)."""

    code = ErrorCode.INVALID_TRANSACTION_TIMEOUT


class InvalidProducerIdMappingError(OdradekError):
    """The producer id does not belong to the transactional id (the id expired or another producer took it)."""

    code = ErrorCode.INVALID_PRODUCER_ID_MAPPING


class TransactionAbortableError(OdradekError):
    """The transaction cannot go on (e.g. a batch's partition was not in the ongoing transaction when it reached
    the partition): abort it and start another."""

    code = ErrorCode.TRANSACTION_ABORTABLE


class TransactionalIdNotFoundError(OdradekError):
    """No coordinator knows this transactional id."""

    code = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


class UnknownProducerIdError(OdradekError):
    """The partition has no state for the producer id (its records were deleted by retention)."""

    code = ErrorCode.UNKNOWN_PRODUCER_ID


class AuthorizationError(OdradekError):
    """The principal the request was made as lacks an ACL the request needs; nothing was changed."""


class TopicAuthorizationFailedError(AuthorizationError):
    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED


class GroupAuthorizationFailedError(AuthorizationError):
    code = ErrorCode.GROUP_AUTHORIZATION_FAILED


class ClusterAuthorizationFailedError(AuthorizationError):
    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


class TransactionalIdAuthorizationFailedError(AuthorizationError):
    code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


class AuthenticationFailedError(OdradekError):
    """The credentials were refused (a wrong password, an unknown user or a failed SCRAM exchange)."""

    code = ErrorCode.SASL_AUTHENTICATION_FAILED


class UnsupportedSaslMechanismError(OdradekError):
    """The node does not enable the SASL mechanism the client asked for."""

    code = ErrorCode.UNSUPPORTED_SASL_MECHANISM


class SecurityDisabledError(OdradekError):
    """A security request (ACLs, credentials) on a cluster where that part of security is not configured."""

    code = ErrorCode.SECURITY_DISABLED


class ResourceNotFoundError(OdradekError):
    """The named resource does not exist (e.g. a SCRAM credential to delete or describe)."""

    code = ErrorCode.RESOURCE_NOT_FOUND


class DuplicateResourceError(OdradekError):
    """A request names the same resource twice (e.g. one user in two credential alterations)."""

    code = ErrorCode.DUPLICATE_RESOURCE


class UnacceptableCredentialError(OdradekError):
    """A credential the server will not store: an empty user name, too few or too many iterations, a bad salt."""

    code = ErrorCode.UNACCEPTABLE_CREDENTIAL


_BY_CODE: dict[int, type[OdradekError]] = {
    cls.code: cls
    for cls in (
        InvalidConfigError,
        CorruptRecordError,
        RecordTooLargeError,
        OffsetOutOfRangeError,
        OffsetNotAvailableError,
        UnknownTopicOrPartitionError,
        NotLeaderOrFollowerError,
        StorageError,
        InvalidRequestError,
        LeaderNotAvailableError,
        FencedLeaderEpochError,
        UnknownLeaderEpochError,
        NotEnoughReplicasError,
        NotEnoughReplicasAfterAppendError,
        InvalidUpdateVersionError,
        OutOfOrderSequenceError,
        InvalidProducerEpochError,
        InvalidRecordError,
        NetworkError,
        RequestTimedOutError,
        FencedInstanceIdError,
        CoordinatorNotAvailableError,
        InvalidTxnStateError,
        ProducerFencedError,
        TransactionCoordinatorFencedError,
        ConcurrentTransactionsError,
        InvalidTransactionTimeoutError,
        InvalidProducerIdMappingError,
        TransactionAbortableError,
        TransactionalIdNotFoundError,
        UnknownProducerIdError,
        TopicAuthorizationFailedError,
        GroupAuthorizationFailedError,
        ClusterAuthorizationFailedError,
        TransactionalIdAuthorizationFailedError,
        AuthenticationFailedError,
        UnsupportedSaslMechanismError,
        SecurityDisabledError,
        ResourceNotFoundError,
        DuplicateResourceError,
        UnacceptableCredentialError,
    )
}


def error_for_code(code: int, message: str = "") -> OdradekError:
    """Build the typed exception for a wire error code (a generic OdradekError for codes without a class)."""
    cls = _BY_CODE.get(code)
    return cls(message) if cls else OdradekError(message, code=code)
