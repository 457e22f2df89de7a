"""DescribeUserScramCredentials (key 50): which SCRAM mechanisms (and iterations) each user has (KIP-554), v0.

Answered from this broker's metadata image, which every broker replays. No users (null or empty) describes
every user with a credential; a named user without any gets RESOURCE_NOT_FOUND, a user named twice
DUPLICATE_RESOURCE. Salts and keys are never sent.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE


async def handle(ctx: RequestContext, request: Any) -> Any:
    credentials: dict[str, list[tuple[int, int]]] = {}
    for (user, mechanism), record in sorted(ctx.broker.image.scram_credentials.items()):
        credentials.setdefault(user, []).append((mechanism, record.iterations))
    names = [u.name for u in request.users or ()]
    counts = Counter(names)
    info_cls, result_cls = ctx.nested("CredentialInfo"), ctx.nested("DescribeUserScramCredentialsResult")
    results = []
    for user in (list(dict.fromkeys(names)) if names else sorted(credentials)):
        code, message, infos = ErrorCode.none, None, credentials.get(user, [])
        if counts[user] > 1:
            code, message, infos = ErrorCode.duplicate_resource, "Cannot describe the same user more than once", []
        elif not infos:
            code, message = ErrorCode.resource_not_found, "Attempt to describe a user credential that does not exist"
        results.append(make(result_cls, user=user, error_code=code, error_message=message, credential_infos=tuple(
            make(info_cls, mechanism=m, iterations=i) for m, i in infos)))
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
                results=tuple(results))


API = Api(key=50, name="DescribeUserScramCredentials", min_version=0, max_version=0, handle=handle)
