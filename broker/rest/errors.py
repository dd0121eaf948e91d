"""The HTTP API's refusals in Confluent REST Proxy's shape: an HTTP status and ``{"error_code", "message"}``, the
codes Confluent's v3 API answers with (its KafkaExceptionMapper's: 40002 a bad request Kafka refused, 40101
authentication, 40301 authorization, 40402 partition not found, 40403 unknown topic or partition, 42901 throttled,
50002 a Kafka error, 50003 a retriable one, 50302 no broker available; Jersey's 400, 404 and 405 with the status as
the code). Where Confluent has none, odradek's follows its pattern (the status, then a number): 41301 a record over
the topic's ``max.message.bytes``. :func:`for_kafka_code` maps a Kafka error code of the broker's services."""

from __future__ import annotations

from odradek.broker.http_types import HttpError
from odradek.client.errors import RETRIABLE_CODES, ErrorCode, error_name

RestError = HttpError

KAFKA_BAD_REQUEST = 40002
KAFKA_AUTHENTICATION = 40101
KAFKA_AUTHORIZATION = 40301
PARTITION_NOT_FOUND = 40402
UNKNOWN_TOPIC_OR_PARTITION = 40403
RECORD_TOO_LARGE = 41301
INVALID_PAYLOAD = 42206
TOO_MANY_REQUESTS = 42901
KAFKA_ERROR = 50002
KAFKA_RETRIABLE = 50003
BROKER_NOT_AVAILABLE = 50302

_AUTHORIZATION = frozenset(
    {
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    }
)
_BAD_REQUEST = frozenset(
    {
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        ErrorCode.TOPIC_ALREADY_EXISTS,
        ErrorCode.INVALID_PARTITIONS,
        ErrorCode.INVALID_REPLICATION_FACTOR,
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ErrorCode.INVALID_CONFIG,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.POLICY_VIOLATION,
        ErrorCode.UNSUPPORTED_VERSION,
        ErrorCode.SECURITY_DISABLED,
        ErrorCode.INVALID_TIMESTAMP,
        ErrorCode.INVALID_RECORD,
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.OFFSET_OUT_OF_RANGE,
        ErrorCode.UNKNOWN_SERVER_ERROR,  # Confluent maps UnknownServerException to a bad request too
        ErrorCode.INVALID_GROUP_ID,
        ErrorCode.NON_EMPTY_GROUP,
        ErrorCode.DUPLICATE_RESOURCE,
        ErrorCode.RESOURCE_NOT_FOUND,
    }
)
_UNAVAILABLE = frozenset({ErrorCode.BROKER_NOT_AVAILABLE, ErrorCode.LEADER_NOT_AVAILABLE})


def for_kafka_code(code: int, message: str = "") -> RestError:
    """The refusal for a Kafka error a service answered, with its message (or the code's name)."""
    text = message or error_name(code)
    if code in _AUTHORIZATION:
        return RestError(403, KAFKA_AUTHORIZATION, text)
    if code == ErrorCode.SASL_AUTHENTICATION_FAILED:
        return unauthenticated(text)
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return RestError(404, UNKNOWN_TOPIC_OR_PARTITION, text)
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return RestError(413, RECORD_TOO_LARGE, text)
    if code == ErrorCode.THROTTLING_QUOTA_EXCEEDED:
        return RestError(429, TOO_MANY_REQUESTS, text)
    if code in _BAD_REQUEST:
        return RestError(400, KAFKA_BAD_REQUEST, text)
    if code in _UNAVAILABLE:
        return RestError(503, BROKER_NOT_AVAILABLE, text)
    if code in RETRIABLE_CODES:
        return RestError(500, KAFKA_RETRIABLE, text)
    return RestError(500, KAFKA_ERROR, text)


def not_found(path: str) -> RestError:
    """A path the API does not serve (Jersey's answer: the status as the code)."""
    return RestError(404, 404, f"HTTP 404 Not Found: {path}")


def method_not_allowed(method: str, path: str) -> RestError:
    return RestError(405, 405, f"HTTP 405 Method Not Allowed: {method} {path}")


def resource_not_found(what: str) -> RestError:
    """A cluster, broker, group, config or consumer that does not exist."""
    return RestError(404, 404, f"{what} could not be found.")


def unknown_topic(topic: str) -> RestError:
    return RestError(404, UNKNOWN_TOPIC_OR_PARTITION, f"This server does not host this topic-partition: {topic}")


def partition_not_found(topic: str, partition: int) -> RestError:
    return RestError(404, PARTITION_NOT_FOUND, f"Partition {partition} of topic {topic} could not be found.")


def bad_request(detail: str) -> RestError:
    """A request the API cannot read: a body that is not JSON or not the shape the route takes, a bad parameter."""
    return RestError(400, 400, detail)


def invalid_payload(detail: str) -> RestError:
    """A produce request's key, value or header that cannot be turned into bytes (Confluent's 42206)."""
    return RestError(422, INVALID_PAYLOAD, f"Payload error. {detail}")


def unauthenticated(detail: str) -> RestError:
    return RestError(
        401, KAFKA_AUTHENTICATION, detail, (("www-authenticate", 'Basic realm="odradek", charset="UTF-8"'),)
    )


def unavailable(detail: str) -> RestError:
    return RestError(503, BROKER_NOT_AVAILABLE, detail)


def retriable(detail: str) -> RestError:
    return RestError(500, KAFKA_RETRIABLE, detail)


def internal(detail: str) -> RestError:
    return RestError(500, KAFKA_ERROR, detail)
