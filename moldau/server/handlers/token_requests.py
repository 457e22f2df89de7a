"""What the four delegation token handlers share (KIP-48): who may ask, and timestamps on the wire."""

from __future__ import annotations

import datetime

from moldau.security.principal import ANONYMOUS
from moldau.server.context import RequestContext

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


NOT_ALLOWED_MESSAGE = ("delegation token requests need a connection authenticated with SASL or a TLS client "
                       "certificate, not with a delegation token")
