"""SaslAuthenticate (key 36): one SASL token each way, after SaslHandshake v1 (KIP-152), v0-2.

The connection's authenticator (`moldau.security.sasl.authenticator`) evaluates the token. Refused credentials
get SASL_AUTHENTICATION_FAILED with the reason, held back `connection.failed.authentication.delay.ms`, and the
connection then closes. From v1 a successful answer carries the session lifetime (`connections.max.reauth.ms`,
KIP-368; 0 when sessions do not expire), before which the client re-authenticates on the same connection.
A SaslAuthenticate out of turn, or on a listener without SASL, is ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.security.sasl.authenticator import AuthenticateResult
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api


async def handle(ctx: RequestContext, request: Any) -> Any:
    if ctx.sasl is None:
        return _response(ctx, AuthenticateResult(ErrorCode.illegal_sasl_state,
                                                  "SASL is not enabled on this listener", b""))
    result = ctx.sasl.authenticate_request() or ctx.sasl.evaluate(bytes(request.auth_bytes))
    if result.delay_ms > 0:
        await asyncio.sleep(result.delay_ms / 1000)
    return _response(ctx, result)


def _response(ctx: RequestContext, result: AuthenticateResult) -> Any:
    fields: dict[str, Any] = {"error_code": result.error_code, "error_message": result.error_message,
                              "auth_bytes": result.token}
    if ctx.version >= 1:
        fields["session_lifetime"] = datetime.timedelta(milliseconds=result.session_lifetime_ms)
    return make(ctx.schema.response_type, **fields)


API = Api(key=36, name="SaslAuthenticate", min_version=0, max_version=2, handle=handle)
