"""ListTransactions (key 66): the transactions this broker coordinates, optionally filtered.

Filters (all optional; an empty one matches everything): states by name (unknown names are echoed back in
`unknown_state_filters`), producer ids, v1 `duration_filter` (only transactions open at least that many ms), v2
`transactional_id_pattern` (a regular expression the whole id must match; an invalid one is INVALID_REQUEST).
Admin clients send it to every broker and merge the answers.
"""

from __future__ import annotations

import re
from typing import Any

from moldau.coordinator.txn.records import TxnState
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.security.acl.model import AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE


async def handle(ctx: RequestContext, request: Any) -> Any:
    known = {name: TxnState.from_display_name(name) for name in request.state_filters}
    unknown = tuple(name for name, state in known.items() if state is None)
    states = frozenset(s for s in known.values() if s is not None)
    pattern_text = getattr(request, "transactional_id_pattern", None)
    try:
        pattern = re.compile(pattern_text) if pattern_text else None
    except re.error:
        return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=ErrorCode.invalid_request,
                    unknown_state_filters=(), transaction_states=())
    if request.state_filters and not states:
        listed = []  # only unknown states asked for: nothing can match
    else:
        listed = ctx.broker.txn.list_transactions(states or None, frozenset(request.producer_id_filters) or None,
                                                  int(getattr(request, "duration_filter", -1)), pattern)
    cls = ctx.nested("TransactionState")
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                unknown_state_filters=unknown, transaction_states=tuple(
                    make(cls, transactional_id=t.transactional_id, producer_id=t.producer_id,
                         transaction_state=t.state.display_name) for t in listed
                    if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t.transactional_id)))


API = Api(key=66, name="ListTransactions", min_version=0, max_version=2, handle=handle)
