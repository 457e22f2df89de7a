"""Envelope (key 58), v0, on controller listeners: a request a broker forwards with its client's identity.

The inner request is served by its own handler as the client's principal (moldau.server.envelope), and its
response frame goes back inside the EnvelopeResponse. Refused with CLUSTER_AUTHORIZATION_FAILED unless another
node sent it, with NOT_CONTROLLER by a node that is not the active controller (the sender retries the one that
is), with INVALID_REQUEST for an API Moldau does not forward this way or an undecodable inner request,
and with PRINCIPAL_DESERIALIZATION_FAILURE for an unreadable principal.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from moldau.protocol import codec
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.wire import FileRegion, ResponsePart
from moldau.server.context import RequestContext
from moldau.server.envelope import ENVELOPE_KEY, ENVELOPED_APIS, deserialize_principal, host_text
from moldau.server.handlers.api import Api


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.from_node:
        return _refused(ctx, ErrorCode.cluster_authorization_failed)
    if not ctx.broker.quorum.is_active_controller():
        return _refused(ctx, ErrorCode.not_controller)  # the forwarding node tries the new leader
    try:
        principal = deserialize_principal(request.request_principal or b"")
    except KafkaError as exc:
        return _refused(ctx, exc.code)
    frame = bytes(request.request_data)
    try:
        header = codec.parse_request_header(frame)
        api = _inner_api(header.api_key, header.api_version)
        schema = codec.api_schema(header.api_key, header.api_version)
        inner_request = codec.decode_request(schema, frame, header)
    except (codec.InvalidRequest, KafkaError):
        return _refused(ctx, ErrorCode.invalid_request)
    inner = dataclasses.replace(ctx, header=header, schema=schema, principal=principal,
                                client_host=host_text(bytes(request.client_host_address)), enveloped=True)
    response = await api.handle(inner, inner_request)
    data = b"".join(_in_memory(part) for part in codec.encode_response(schema, header.correlation_id, response))
    return make(ctx.schema.response_type, response_data=data, error_code=ErrorCode.none)


def _inner_api(api_key: int, version: int) -> Api:
    from moldau.server.handlers.registry import CONTROLLER_APIS  # the registry imports this module

    api = CONTROLLER_APIS.get(api_key)
    if api_key not in ENVELOPED_APIS or api is None or not api.supports(version):
        raise KafkaError(ErrorCode.invalid_request, f"API {api_key} v{version} is not forwarded in an Envelope")
    return api


def _in_memory(part: ResponsePart) -> bytes:
    if isinstance(part, FileRegion):  # only Fetch answers with file regions, and it is never enveloped
        raise TypeError("an enveloped response cannot carry a file region")
    return bytes(part)


def _refused(ctx: RequestContext, code: ErrorCode) -> Any:
    return make(ctx.schema.response_type, response_data=None, error_code=code)


API = Api(key=ENVELOPE_KEY, name="Envelope", min_version=0, max_version=0, handle=handle)
