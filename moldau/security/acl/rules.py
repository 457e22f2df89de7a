"""Which operation on which resource each API needs: one table, enforced in two places.

`RULES` names, for every API a node serves, the (operation, resource type) pairs Kafka checks for it, as listed
in Kafka's "Operations and Resources on Protocols" table (KIP-11 and later KIPs). docs/security.md carries the
same table and a test checks the two agree; another test fails when an API is registered without a rule.

Where a check applies to the whole request (one group, one transactional id, or the cluster) and the response
has a top-level error code, `RequestAuthorization` (a dispatch `RequestFilter`) refuses the request before its
handler runs, with that API's *_AUTHORIZATION_FAILED code: `WHOLE_REQUEST` lists them. Checks per topic, partition
or group (`Where.HANDLER`) are made by the handler itself through `ctx.authorize`, which answers each item with
its own code, as Kafka does, and leaves the rest of the request untouched.

On controller listeners, the APIs between nodes (`NODE_APIS`: the quorum's, broker registration and heartbeats,
AlterPartition, AllocateProducerIds) need CLUSTER_ACTION on the cluster. A principal allowed that is another node
(`RequestContext.from_node`), and its other requests, admin requests forwarded by the node that checked the
client's ACLs, are not checked again; any other principal is an admin client there (KIP-919) and is checked
like on a broker listener.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import CLUSTER_NAME, AclOperation, ResourceType
from moldau.server.context import RequestContext

Op, Res = AclOperation, ResourceType
# Served on controller listeners to other nodes only: Fetch (the quorum's), Vote, BeginQuorumEpoch,
# EndQuorumEpoch, AlterPartition, FetchSnapshot, BrokerRegistration, BrokerHeartbeat, AllocateProducerIds,
# UpdateRaftVoter, AssignReplicasToDirs, Envelope.
NODE_APIS = frozenset((1, 52, 53, 54, 56, 58, 59, 62, 63, 67, 73, 82))


class Where(enum.Enum):
    FILTER = "before the handler, for the whole request"
    HANDLER = "in the handler, per item"
    NONE = "not checked"


@dataclass(frozen=True, slots=True)
class Rule:
    operation: AclOperation | None
    resource_type: ResourceType | None
    where: Where
    note: str = ""


def _r(op: AclOperation, res: ResourceType, where: Where = Where.HANDLER, note: str = "") -> Rule:
    return Rule(op, res, where, note)


_NONE = Rule(None, None, Where.NONE, "")
_F = Where.FILTER
_NODES = "between nodes, on controller listeners"

RULES: dict[int, tuple[Rule, ...]] = {
    0: (_r(Op.WRITE, Res.TOPIC), _r(Op.WRITE, Res.TRANSACTIONAL_ID, note="transactional produce")),
    1: (_r(Op.READ, Res.TOPIC), _r(Op.CLUSTER_ACTION, Res.CLUSTER, note="follower fetch")),
    2: (_r(Op.DESCRIBE, Res.TOPIC),),
    3: (_r(Op.DESCRIBE, Res.TOPIC, note="topics not describable are left out"),
        _r(Op.CREATE, Res.CLUSTER, note="auto-creation: CREATE on the cluster or on the topic")),
    8: (_r(Op.READ, Res.GROUP), _r(Op.READ, Res.TOPIC)),
    9: (_r(Op.DESCRIBE, Res.GROUP), _r(Op.DESCRIBE, Res.TOPIC)),
    10: (_r(Op.DESCRIBE, Res.GROUP), _r(Op.DESCRIBE, Res.TRANSACTIONAL_ID)),
    11: (_r(Op.READ, Res.GROUP, _F),),
    12: (_r(Op.READ, Res.GROUP, _F),),
    13: (_r(Op.READ, Res.GROUP, _F),),
    14: (_r(Op.READ, Res.GROUP, _F),),
    15: (_r(Op.DESCRIBE, Res.GROUP),),
    16: (_r(Op.DESCRIBE, Res.GROUP, note="DESCRIBE on the cluster lists every group"),),
    17: (_NONE,),
    18: (_NONE,),
    19: (_r(Op.CREATE, Res.TOPIC, note="CREATE on the cluster or on the topic"),
         _r(Op.DESCRIBE_CONFIGS, Res.TOPIC, note="for the new topic's configs in the answer")),
    20: (_r(Op.DELETE, Res.TOPIC),),
    21: (_r(Op.DELETE, Res.TOPIC),),
    22: (_r(Op.WRITE, Res.TRANSACTIONAL_ID, _F),
         _r(Op.IDEMPOTENT_WRITE, Res.CLUSTER, _F, note="without a transactional id: or WRITE on any topic")),
    23: (_r(Op.DESCRIBE, Res.TOPIC), _r(Op.CLUSTER_ACTION, Res.CLUSTER, note="from a follower")),
    24: (_r(Op.WRITE, Res.TRANSACTIONAL_ID), _r(Op.WRITE, Res.TOPIC)),
    25: (_r(Op.WRITE, Res.TRANSACTIONAL_ID, _F), _r(Op.READ, Res.GROUP, _F)),
    26: (_r(Op.WRITE, Res.TRANSACTIONAL_ID, _F),),
    27: (_r(Op.CLUSTER_ACTION, Res.CLUSTER),),
    28: (_r(Op.WRITE, Res.TRANSACTIONAL_ID), _r(Op.READ, Res.GROUP), _r(Op.READ, Res.TOPIC)),
    29: (_r(Op.DESCRIBE, Res.CLUSTER, _F),),
    30: (_r(Op.ALTER, Res.CLUSTER),),
    31: (_r(Op.ALTER, Res.CLUSTER),),
    32: (_r(Op.DESCRIBE_CONFIGS, Res.TOPIC), _r(Op.DESCRIBE_CONFIGS, Res.CLUSTER, note="broker resources"),
         _r(Op.DESCRIBE_CONFIGS, Res.GROUP, note="group resources")),
    33: (_r(Op.ALTER_CONFIGS, Res.TOPIC), _r(Op.ALTER_CONFIGS, Res.CLUSTER, note="broker resources"),
         _r(Op.ALTER_CONFIGS, Res.GROUP, note="group resources")),
    34: (_r(Op.ALTER, Res.CLUSTER),),
    35: (_r(Op.DESCRIBE, Res.CLUSTER),),
    36: (_NONE,),
    37: (_r(Op.ALTER, Res.TOPIC),),
    38: (_r(Op.CREATE_TOKENS, Res.USER, note="only for a token of another owner, KIP-373"),),
    39: (Rule(None, None, Where.HANDLER, "the token's owner or a renewer"),),
    40: (Rule(None, None, Where.HANDLER, "the token's owner or a renewer"),),
    41: (_r(Op.DESCRIBE, Res.DELEGATION_TOKEN, note="tokens the principal does not own, request or renew"),
         _r(Op.DESCRIBE_TOKENS, Res.USER, note="every token of that owner, KIP-373")),
    42: (_r(Op.DELETE, Res.GROUP),),
    43: (_r(Op.ALTER, Res.CLUSTER),),
    44: (_r(Op.ALTER_CONFIGS, Res.TOPIC), _r(Op.ALTER_CONFIGS, Res.CLUSTER, note="broker resources"),
         _r(Op.ALTER_CONFIGS, Res.GROUP, note="group resources")),
    45: (_r(Op.ALTER, Res.CLUSTER, _F),),
    46: (_r(Op.DESCRIBE, Res.CLUSTER, _F),),
    47: (_r(Op.DELETE, Res.GROUP), _r(Op.READ, Res.TOPIC)),
    48: (_r(Op.DESCRIBE_CONFIGS, Res.CLUSTER, _F),),
    49: (_r(Op.ALTER_CONFIGS, Res.CLUSTER),),
    50: (_r(Op.DESCRIBE, Res.CLUSTER, _F),),
    51: (_r(Op.ALTER, Res.CLUSTER),),
    55: (_r(Op.DESCRIBE, Res.CLUSTER, _F),),
    57: (_r(Op.ALTER, Res.CLUSTER),),
    60: (_r(Op.DESCRIBE, Res.CLUSTER, _F),),
    61: (_r(Op.READ, Res.TOPIC),),
    64: (_r(Op.ALTER, Res.CLUSTER),),
    65: (_r(Op.DESCRIBE, Res.TRANSACTIONAL_ID),),
    66: (_r(Op.DESCRIBE, Res.TRANSACTIONAL_ID, note="transactions not describable are left out"),),
    68: (_r(Op.READ, Res.GROUP, _F),
         _r(Op.DESCRIBE, Res.TOPIC, _F, note="subscribed topics; a regex resolves only to describable ones")),
    69: (_r(Op.DESCRIBE, Res.GROUP), _r(Op.DESCRIBE, Res.TOPIC, note="every topic its members use")),
    71: (_NONE,),
    72: (_NONE,),
    74: (_r(Op.DESCRIBE_CONFIGS, Res.CLUSTER, _F),),
    75: (_r(Op.DESCRIBE, Res.TOPIC, note="topics not describable are left out of a listing"),),
    76: (_r(Op.READ, Res.GROUP, _F), _r(Op.DESCRIBE, Res.TOPIC, _F, note="subscribed topics")),
    77: (_r(Op.DESCRIBE, Res.GROUP), _r(Op.DESCRIBE, Res.TOPIC, note="every topic its members use")),
    78: (_r(Op.READ, Res.GROUP, _F), _r(Op.READ, Res.TOPIC)),
    79: (_r(Op.READ, Res.GROUP, _F), _r(Op.READ, Res.TOPIC)),
    80: (_r(Op.ALTER, Res.CLUSTER),),
    81: (_r(Op.ALTER, Res.CLUSTER),),
    83: (_r(Op.CLUSTER_ACTION, Res.CLUSTER, note="between brokers; per partition"),),
    84: (_r(Op.CLUSTER_ACTION, Res.CLUSTER, note="between brokers; per partition"),),
    85: (_r(Op.CLUSTER_ACTION, Res.CLUSTER, note="between brokers; per partition"),),
    86: (_r(Op.CLUSTER_ACTION, Res.CLUSTER, note="between brokers; per partition"),),
    87: (_r(Op.CLUSTER_ACTION, Res.CLUSTER, note="between brokers; per partition"),),
    90: (_r(Op.DESCRIBE, Res.GROUP), _r(Op.DESCRIBE, Res.TOPIC)),
    91: (_r(Op.READ, Res.GROUP, _F), _r(Op.READ, Res.TOPIC)),
    92: (_r(Op.DELETE, Res.GROUP, _F), _r(Op.READ, Res.TOPIC)),
    # Between nodes (controller listeners): Kafka requires CLUSTER_ACTION on the cluster (see NODE_APIS).
    52: (_r(Op.CLUSTER_ACTION, Res.CLUSTER, _F, note=_NODES),),
    53: (_r(Op.CLUSTER_ACTION, Res.CLUSTER, _F, note=_NODES),),
    54: (_r(Op.CLUSTER_ACTION, Res.CLUSTER, _F, note=_NODES),),
    56: (_r(Op.CLUSTER_ACTION, Res.CLUSTER, _F, note=_NODES),),
    58: (_r(Op.CLUSTER_ACTION, Res.CLUSTER, _F, note=_NODES),),
    59: (_r(Op.CLUSTER_ACTION, Res.CLUSTER, _F, note=_NODES),),
    62: (_r(Op.CLUSTER_ACTION, Res.CLUSTER, _F, note=_NODES),),
    82: (_r(Op.CLUSTER_ACTION, Res.CLUSTER, _F, note=_NODES),),
    63: (_r(Op.CLUSTER_ACTION, Res.CLUSTER, _F, note=_NODES),),
    67: (_r(Op.CLUSTER_ACTION, Res.CLUSTER, _F, note=_NODES),),
    73: (_r(Op.CLUSTER_ACTION, Res.CLUSTER, _F, note=_NODES),),
}

_CODES = {
    Res.TOPIC: ErrorCode.topic_authorization_failed,
    Res.GROUP: ErrorCode.group_authorization_failed,
    Res.CLUSTER: ErrorCode.cluster_authorization_failed,
    Res.TRANSACTIONAL_ID: ErrorCode.transactional_id_authorization_failed,
}


def denied(resource_type: ResourceType) -> ErrorCode:
    """The *_AUTHORIZATION_FAILED code for a refused operation on a resource of this type."""
    return _CODES[resource_type]


def _cluster(_: Any) -> str:
    return CLUSTER_NAME


# For the FILTER rules: how to find the resource's name in the request (None: that rule does not apply to it).
_NAMES: dict[tuple[int, ResourceType], Callable[[Any], str | None]] = {
    (11, Res.GROUP): lambda r: r.group_id,
    (12, Res.GROUP): lambda r: r.group_id,
    (13, Res.GROUP): lambda r: r.group_id,
    (14, Res.GROUP): lambda r: r.group_id,
    (25, Res.TRANSACTIONAL_ID): lambda r: r.transactional_id,
    (25, Res.GROUP): lambda r: r.group_id,
    (26, Res.TRANSACTIONAL_ID): lambda r: r.transactional_id,
    (68, Res.GROUP): lambda r: r.group_id,
    (76, Res.GROUP): lambda r: r.group_id,
    (78, Res.GROUP): lambda r: r.group_id or None,
    (79, Res.GROUP): lambda r: r.group_id or None,
    (91, Res.GROUP): lambda r: r.group_id,
    (92, Res.GROUP): lambda r: r.group_id,
}


class RequestAuthorization:
    """The dispatch filter that makes the whole-request checks of `RULES`."""

    async def check(self, ctx: RequestContext, request: Any) -> None:
        key = ctx.header.api_key
        if ctx.on_controller_listener and key in NODE_APIS and not ctx.from_node:
            raise KafkaError(ErrorCode.cluster_authorization_failed,
                             f"{ctx.principal} may not CLUSTER_ACTION the cluster: only other nodes may send "
                             f"{type(request).__name__.removesuffix('Request')} to the controller listener "
                             f"{ctx.listener}")
        if key == 22:
            _check_init_producer_id(ctx, request)
            return
        if key in (68, 76):  # ConsumerGroupHeartbeat, ShareGroupHeartbeat
            _check_subscription(ctx, request)
        for rule in RULES.get(key, ()):
            if rule.where is not Where.FILTER or rule.operation is None or rule.resource_type is None:
                continue
            name_of = _NAMES.get((key, rule.resource_type))
            if name_of is None and rule.resource_type != Res.CLUSTER:
                continue  # checked by its own function above
            name = (name_of or _cluster)(request)
            if name is not None and not ctx.authorize(rule.operation, rule.resource_type, name):
                raise KafkaError(denied(rule.resource_type),
                                 f"{ctx.principal} may not {rule.operation.name} {rule.resource_type.name} {name}")


def _check_subscription(ctx: RequestContext, request: Any) -> None:
    """ConsumerGroupHeartbeat: every subscribed topic must be describable (after READ on the group)."""
    if not ctx.authorize(Op.READ, Res.GROUP, request.group_id):
        return  # refused below with GROUP_AUTHORIZATION_FAILED, which comes first
    refused = [t for t in request.subscribed_topic_names or () if not ctx.authorize(Op.DESCRIBE, Res.TOPIC, t)]
    if refused:
        raise KafkaError(ErrorCode.topic_authorization_failed,
                         f"{ctx.principal} may not DESCRIBE topics {', '.join(sorted(refused))}")


def check_group_topics(ctx: RequestContext, group_id: str, topics: Iterable[str]) -> None:
    """ConsumerGroupDescribe, ShareGroupDescribe: a group one of whose members subscribes to or is assigned a
    topic the principal may not DESCRIBE is refused whole, as Kafka does (KAFKA-18813), since its description
    would name the topic; the message does not name it either."""
    if any(not ctx.authorize(Op.DESCRIBE, Res.TOPIC, topic) for topic in set(topics)):
        raise KafkaError(ErrorCode.topic_authorization_failed,
                         f"group {group_id} uses topics {ctx.principal} may not DESCRIBE")


def _check_init_producer_id(ctx: RequestContext, request: Any) -> None:
    txn_id = request.transactional_id
    if txn_id is not None:
        if not ctx.authorize(Op.WRITE, Res.TRANSACTIONAL_ID, txn_id):
            raise KafkaError(ErrorCode.transactional_id_authorization_failed,
                             f"{ctx.principal} may not WRITE TRANSACTIONAL_ID {txn_id}")
        return
    # An idempotent producer: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (KIP-679).
    if not (ctx.authorize(Op.IDEMPOTENT_WRITE, Res.CLUSTER, CLUSTER_NAME)
            or ctx.authorize_any(Op.WRITE, Res.TOPIC)):
        raise KafkaError(ErrorCode.cluster_authorization_failed,
                         f"{ctx.principal} may not IDEMPOTENT_WRITE the cluster nor WRITE any topic")


def config_refusal(ctx: RequestContext, resource_type: int, name: str, operation: AclOperation) -> ErrorCode | None:
    """DescribeConfigs / AlterConfigs: `operation` (DESCRIBE_CONFIGS or ALTER_CONFIGS) on the topic, or on the
    cluster for a broker or client metrics resource; the refusal's code, or None when allowed (or the type is not
    one of these)."""
    if resource_type == 2:  # ConfigResource TOPIC
        return None if ctx.authorize(operation, Res.TOPIC, name) else ErrorCode.topic_authorization_failed
    if resource_type in (4, 16):  # ConfigResource BROKER, CLIENT_METRICS
        return None if ctx.authorize(operation, Res.CLUSTER, CLUSTER_NAME) else ErrorCode.cluster_authorization_failed
    if resource_type == 32:  # ConfigResource GROUP
        return None if ctx.authorize(operation, Res.GROUP, name) else ErrorCode.group_authorization_failed
    return None


def rules_table() -> str:
    """The Markdown table of docs/security.md: one row per API served, with what it needs."""
    from moldau.server.handlers.registry import APIS, CONTROLLER_APIS

    names = {key: api.name for key, api in (CONTROLLER_APIS | APIS).items()}
    lines = ["| key | API | operation on resource |", "|---|---|---|"]
    for key in sorted(RULES):
        needs = "; ".join(_describe_rule(rule) for rule in RULES[key])
        lines.append(f"| {key} | {names.get(key, '?')} | {needs} |")
    return "\n".join(lines)


def _describe_rule(rule: Rule) -> str:
    if rule.operation is None or rule.resource_type is None:
        return f"no ACL ({rule.note})" if rule.note else "none"
    text = f"{rule.operation.name} on {rule.resource_type.name}"
    return f"{text} ({rule.note})" if rule.note else text


if __name__ == "__main__":
    print(rules_table())
