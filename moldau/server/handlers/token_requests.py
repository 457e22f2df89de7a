"""What the four delegation token handlers share (KIP-48): who may ask, and timestamps on the wire."""

from __future__ import annotations

import datetime
from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.security.principal import ANONYMOUS
from moldau.server.context import RequestContext
from moldau.server.handlers.common import NO_THROTTLE

# Error answers carry the epoch where Kafka sends -1: clients ignore the field then, and kio-based clients (Moldau's
# own tools) cannot read a negative timestamp.
ERROR_TIME = datetime.datetime.fromtimestamp(0, datetime.UTC)


def token_requests_allowed(ctx: RequestContext) -> bool:
    """Kafka's rule: token requests need a connection that authenticated its client (SASL, or TLS with a client
    certificate), and not with a delegation token. A request a broker forwarded in an Envelope was checked there."""
    if ctx.principal.token_authenticated:
        return False
    if ctx.enveloped:
        return True
    if ctx.security_protocol == "PLAINTEXT":
        return False
    return not (ctx.security_protocol == "SSL" and ctx.principal == ANONYMOUS)


def wire_time(timestamp_ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(timestamp_ms / 1000.0, datetime.UTC)


def expiry_response(ctx: RequestContext, code: ErrorCode, expiry_ms: int | None = None) -> Any:
    """RenewDelegationToken's and ExpireDelegationToken's answer: an error, or the token's new expiry."""
    return make(ctx.schema.response_type, error_code=code, throttle_time=NO_THROTTLE,
                expiry_timestamp=ERROR_TIME if expiry_ms is None else wire_time(expiry_ms))
