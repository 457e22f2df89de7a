"""Forwarding a client's request to the active controller with the client's identity (Envelope, key 58).

Brokers forward most admin requests to the active controller as they are, having checked the client's ACLs first
(moldau.server.controller_requests). A few decisions need to know who the client is beyond that check: who owns a
delegation token, who may renew it (KIP-48). Those requests go inside an Envelope, as Kafka's brokers forward
every admin request: the client's request frame, its principal (Kafka's DefaultPrincipalData, with whether it
logged in with a delegation token) and its address. The controller serves the inner request as that principal
and answers with the inner response's frame. Only nodes (CLUSTER_ACTION on the cluster, on a controller listener)
may send an Envelope, and only for the APIs in `ENVELOPED_APIS`.
"""

from __future__ import annotations

import io
import ipaddress
import struct
from typing import Any

from kio.schema.default_principal_data.v0.data import DefaultPrincipalData
from kio.schema.envelope.v0.request import EnvelopeRequest
from kio.schema.envelope.v0.response import EnvelopeResponse
from kio.serial import entity_reader, entity_writer

from moldau.net.client import ConnectionFailed, decode_response, encode_request
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.principal import KafkaPrincipal

ENVELOPE_KEY = 58
# CreateDelegationToken, RenewDelegationToken, ExpireDelegationToken: the controller decides them as the client.
ENVELOPED_APIS = frozenset({38, 39, 40})
# Kafka's DefaultKafkaPrincipalBuilder writes the DefaultPrincipalData version before the data.
_PRINCIPAL_VERSION = struct.Struct(">h")


def serialize_principal(principal: KafkaPrincipal) -> bytes:
    out = io.BytesIO()
    out.write(_PRINCIPAL_VERSION.pack(0))
    entity_writer(DefaultPrincipalData)(out, DefaultPrincipalData(
        type_=principal.principal_type, name=principal.name, token_authenticated=principal.token_authenticated))
    return out.getvalue()


def deserialize_principal(data: bytes) -> KafkaPrincipal:
    """Raises KafkaError(PRINCIPAL_DESERIALIZATION_FAILURE) for anything but a version 0 DefaultPrincipalData."""
    try:
        (version,) = _PRINCIPAL_VERSION.unpack_from(data)
        if version != 0:
            raise ValueError(f"principal data version {version}")
        parsed, _ = entity_reader(DefaultPrincipalData)(memoryview(data)[_PRINCIPAL_VERSION.size:], 0)
    except Exception as exc:
        raise KafkaError(ErrorCode.principal_deserialization_failure, f"undecodable principal: {exc}") from None
    return KafkaPrincipal(parsed.type_, parsed.name, parsed.token_authenticated)


def host_bytes(host: str) -> bytes:
    try:
        return ipaddress.ip_address(host).packed
    except ValueError:
        return b""


def host_text(data: bytes) -> str:
    try:
        return str(ipaddress.ip_address(data)) if data else ""
    except ValueError:
        return ""


def wrap(request: Any, principal: KafkaPrincipal, client_host: str, client_id: str) -> EnvelopeRequest:
    return EnvelopeRequest(request_data=encode_request(request, 0, client_id),
                           request_principal=serialize_principal(principal),
                           client_host_address=host_bytes(client_host))


def unwrap(response: EnvelopeResponse, request: Any) -> Any:
    """The inner response to `request`; raises KafkaError when the controller refused the envelope."""
    if response.error_code != ErrorCode.none or response.response_data is None:
        code = ErrorCode.unknown_server_error
        if response.error_code != ErrorCode.none:
            code = ErrorCode(response.error_code)
        raise KafkaError(code, f"the controller refused the forwarded {type(request).__name__}")
    try:
        return decode_response(response.response_data, request.__api_key__, request.__version__)
    except ConnectionFailed as exc:  # the controller's fault, not the client's: its connection stays open
        raise KafkaError(ErrorCode.unknown_server_error, f"undecodable answer from the controller: {exc}") from exc
