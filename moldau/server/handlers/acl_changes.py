"""What CreateAcls and DeleteAcls share: the refusals before anything is forwarded, and applying the valid items
of a request through the controller while keeping one result per item, in request order."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import CLUSTER_NAME, AclOperation, ResourceType
from moldau.server.context import RequestContext

Item = TypeVar("Item")
Outcome = TypeVar("Outcome")


def security_disabled(ctx: RequestContext) -> bool:
    return not ctx.broker.config.authorizer_class_name


def change_refusal(ctx: RequestContext) -> KafkaError | None:
    """Why every item of an ACL change is refused: no authorizer (SECURITY_DISABLED, as Kafka: ACLs nobody
    enforces would give a false sense of safety) or no ALTER on the cluster; None when the change may go on."""
    if security_disabled(ctx):
        return KafkaError(ErrorCode.security_disabled, "no authorizer is configured")
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return KafkaError(ErrorCode.cluster_authorization_failed, f"{ctx.principal} may not ALTER the cluster")
    return None


def parse_each(raw: Sequence[object], parse: Callable[[object], Item]) -> list[Item | KafkaError]:
    """Each request item parsed, or the KafkaError that refused it."""
    parsed: list[Item | KafkaError] = []
    for item in raw:
        try:
            parsed.append(parse(item))
        except KafkaError as exc:
            parsed.append(exc)
    return parsed


async def apply_valid(parsed: Sequence[Item | KafkaError], valid: list[Item],
                      apply: Callable[[list[Item]], Awaitable[Sequence[Outcome]]]) -> list[Outcome | KafkaError]:
    """`apply` the valid items (given in order in `valid`) in one call; per item of `parsed` its outcome, or its
    parse error, or the error that failed the whole call."""
    try:
        outcomes: list[Outcome | KafkaError] = list(await apply(valid))
    except KafkaError as exc:
        outcomes = [exc] * len(valid)
    answers = iter(outcomes)
    return [item if isinstance(item, KafkaError) else next(answers) for item in parsed]
