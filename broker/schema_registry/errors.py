"""Confluent Schema Registry's errors: an HTTP status, a numeric ``error_code`` and a message, answered as
``{"error_code": ..., "message": ...}``. Confluent's serializers read the code (40401, 40403, 409...) to decide what
to do, so the codes and statuses are Confluent's own, not odradek's Kafka error codes."""

from __future__ import annotations

from odradek.broker.http_types import HttpError


class RegistryError(HttpError):
    """A request the registry refuses; ``status`` is the HTTP status, ``code`` Confluent's error code."""


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(subject: str, version: int | str) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(detail: str = "Schema not found") -> RegistryError:
    return RegistryError(404, 40403, detail)


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently")


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40405, f"Subject '{subject}' was not deleted first before being permanently deleted")


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        404,
        40406,
        f"Subject '{subject}' Version {version} was soft deleted.Set permanent=true to delete permanently",
    )


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        404,
        40407,
        f"Subject '{subject}' Version {version} was not deleted first before being permanently deleted",
    )


def subject_compatibility_not_configured(subject: str) -> RegistryError:
    return RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured")


def subject_mode_not_configured(subject: str) -> RegistryError:
    return RegistryError(404, 40409, f"Subject '{subject}' does not have subject-level mode configured")


def not_found(path: str) -> RegistryError:
    """An unknown endpoint: Confluent (Jersey) answers 404 with HTTP 404 as the code."""
    return RegistryError(404, 404, f"HTTP 404 Not Found: {path}")


def method_not_allowed(method: str, path: str) -> RegistryError:
    return RegistryError(405, 405, f"HTTP 405 Method Not Allowed: {method} {path}")


def incompatible(messages: list[str]) -> RegistryError:
    detail = "; ".join(messages) if messages else "incompatible"
    return RegistryError(
        409, 409, f"Schema being registered is incompatible with an earlier schema for subject: {detail}"
    )


def invalid_schema(detail: str) -> RegistryError:
    return RegistryError(422, 42201, f"Invalid schema: {detail}")


def invalid_version(version: str) -> RegistryError:
    return RegistryError(
        422,
        42202,
        f"The specified version '{version}' is not a valid version id. Allowed values are between "
        '[1, 2^31-1] and the string "latest"',
    )


def invalid_compatibility_level(level: object) -> RegistryError:
    return RegistryError(
        422,
        42203,
        f"Invalid compatibility level: {level}. Valid values are NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD, "
        "FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE",
    )


def invalid_mode(mode: object) -> RegistryError:
    return RegistryError(422, 42204, f"Invalid mode: {mode}. Valid values are READWRITE, READONLY, IMPORT")


def operation_not_permitted(detail: str) -> RegistryError:
    return RegistryError(422, 42205, detail)


def reference_exists(detail: str) -> RegistryError:
    return RegistryError(422, 42206, detail)


def unprocessable(detail: str) -> RegistryError:
    """A request body that is not what the endpoint takes (Confluent answers 422 with code 422)."""
    return RegistryError(422, 422, detail)


def store_error(detail: str) -> RegistryError:
    return RegistryError(500, 50001, f"Error in the backend data store: {detail}")


def operation_timeout(detail: str) -> RegistryError:
    return RegistryError(500, 50002, f"Operation timed out: {detail}")


def forwarding_failed(detail: str) -> RegistryError:
    return RegistryError(500, 50003, f"Error while forwarding the request to the leader: {detail}")


def forbidden(detail: str) -> RegistryError:
    """A request the caller's ACLs do not allow (with an authorizer): nothing is read or written."""
    return RegistryError(403, 40301, detail)


def not_implemented(what: str) -> RegistryError:
    """A Confluent endpoint odradek does not serve yet: said so in the message, never pretended. The status and code
    are what a Confluent registry without that endpoint answers (404), which Confluent's clients expect: their
    serializers ask /associations first and take a 404 as "none", falling back to the topic's subject."""
    return RegistryError(404, 404, f"HTTP 404 Not Found: not implemented by odradek's schema registry: {what}")
