"""How failures show in the console: a Kafka error from the cluster becomes a page (or htmx fragment) that names
the error, with the HTTP status a browser and scripts understand (403 for authorization failures, 404 for what
does not exist, 400 for invalid input, 502 for the rest), instead of a stack trace."""

from __future__ import annotations

from typing import TYPE_CHECKING

from confluent_kafka import KafkaError, KafkaException
from starlette.requests import Request
from starlette.responses import Response

if TYPE_CHECKING:
    from moldau.console.context import ConsoleContext

__all__ = ["ConsoleError", "error_response", "kafka_error_status"]


class ConsoleError(Exception):
    """A failure to show the user as it is: bad form input (400), a missing topic or group (404) ..."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


_FORBIDDEN = {"TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED",
              "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "DELEGATION_TOKEN_AUTHORIZATION_FAILED",
              "DELEGATION_TOKEN_OWNER_MISMATCH", "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED",
              "SASL_AUTHENTICATION_FAILED", "_AUTHENTICATION"}
_NOT_FOUND = {"UNKNOWN_TOPIC_OR_PART", "UNKNOWN_TOPIC_OR_PARTITION", "GROUP_ID_NOT_FOUND", "_UNKNOWN_TOPIC",
              "_UNKNOWN_PARTITION", "RESOURCE_NOT_FOUND", "UNKNOWN_TOPIC_ID", "DELEGATION_TOKEN_NOT_FOUND"}
# librdkafka names Kafka's INVALID_TOPIC_EXCEPTION (17) TOPIC_EXCEPTION.
_INVALID = {"INVALID_CONFIG", "INVALID_PARTITIONS", "INVALID_REPLICATION_FACTOR", "INVALID_TOPIC_EXCEPTION",
            "TOPIC_EXCEPTION",
            "TOPIC_ALREADY_EXISTS", "POLICY_VIOLATION", "INVALID_REQUEST", "NON_EMPTY_GROUP", "_INVALID_ARG",
            "INVALID_PRINCIPAL_TYPE", "DELEGATION_TOKEN_EXPIRED"}


def kafka_error_status(error: KafkaError) -> int:
    name = error.name()
    if name in _FORBIDDEN:
        return 403
    if name in _NOT_FOUND:
        return 404
    if name in _INVALID:
        return 400
    return 502


def error_response(ctx: ConsoleContext, request: Request, exc: Exception) -> Response:
    if isinstance(exc, ConsoleError):
        status, message = exc.status, exc.message
    elif isinstance(exc, KafkaException) and isinstance(exc.args[0], KafkaError):
        error = exc.args[0]
        status, message = kafka_error_status(error), f"{error.name()}: {error.str()}"
    else:
        raise exc
    template = "error_fragment.html" if request.headers.get("hx-request") else "error.html"
    return ctx.render(request, template, status_code=status, status=status, message=message)
