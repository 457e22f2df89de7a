"""SaslHandshake (key 17): the client names the SASL mechanism it wants (v0-1).

The answer lists the listener's enabled mechanisms. v1 means the tokens follow in SaslAuthenticate requests
(KIP-152); v0 means they follow as bare size-prefixed frames (the legacy exchange, which dispatch hands to the
connection's authenticator). A mechanism the listener does not enable gets UNSUPPORTED_SASL_MECHANISM and the
connection closes after the answer, as does a handshake out of turn (ILLEGAL_SASL_STATE). On a listener without
SASL, the answer is ILLEGAL_SASL_STATE. The state machine is `moldau.security.sasl.authenticator`.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api


async def handle(ctx: RequestContext, request: Any) -> Any:
    if ctx.sasl is None:
        return make(ctx.schema.response_type, error_code=ErrorCode.illegal_sasl_state, mechanisms=())
    result = ctx.sasl.handshake(request.mechanism, ctx.version)
    return make(ctx.schema.response_type, error_code=result.error_code, mechanisms=result.mechanisms)


API = Api(key=17, name="SaslHandshake", min_version=0, max_version=1, handle=handle)
