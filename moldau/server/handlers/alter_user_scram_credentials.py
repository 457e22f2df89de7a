"""AlterUserScramCredentials (key 51): add, change or delete users' SCRAM credentials (KIP-554), v0.

Clients send the salted password (never the password); the active controller validates each user's changes
(`moldau.security.sasl.scram_admin`), stores stored and server keys as metadata records, and every broker
learns them by replaying the log. Brokers forward the request to the active controller, like other admin APIs.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import CLUSTER_NAME, AclOperation, ResourceType
from moldau.security.sasl.scram_admin import Deletion, Upsertion, UserResult
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
        refused_cls = ctx.nested("AlterUserScramCredentialsResult")
        return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, results=tuple(
            make(refused_cls, user=user, error_code=ErrorCode.cluster_authorization_failed,
                 error_message=f"{ctx.principal} may not ALTER the cluster") for user in users))
    forwarded = await ctx.broker.forward_to_controller(ctx, request)
    if forwarded is not None:
        return forwarded
    deletions = [Deletion(d.name, d.mechanism) for d in request.deletions]
    upsertions = [Upsertion(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
                  for u in request.upsertions]
    try:
        results = await ctx.broker.controller.alter_user_scram_credentials(deletions, upsertions)
    except KafkaError as exc:  # NOT_CONTROLLER and the like: every user gets it, and clients retry
        users = dict.fromkeys([d.name for d in deletions] + [u.name for u in upsertions])
        results = [UserResult(user, exc.code, exc.message) for user in users]
    result_cls = ctx.nested("AlterUserScramCredentialsResult")
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, results=tuple(
        make(result_cls, user=r.user, error_code=r.error_code, error_message=r.error_message) for r in results))


API = Api(key=51, name="AlterUserScramCredentials", min_version=0, max_version=0, handle=handle)
