"""What a handler gets besides the request: who asked, on which listener, which version, and the node's services."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from moldau.protocol.codec import ApiSchema, RequestHeader
from moldau.security.principal import ANONYMOUS, KafkaPrincipal
from moldau.security.quotas import NO_QUOTA, RequestQuota

if TYPE_CHECKING:
    from moldau.security.sasl.authenticator import SaslAuthenticator
    from moldau.server.services import BrokerServices


@dataclass(frozen=True, slots=True)
class RequestContext:
    header: RequestHeader
    schema: ApiSchema
    broker: BrokerServices  # the node, as handlers may use it (moldau.server.services)
    peer: str
    on_controller_listener: bool = False  # the request came in on a controller listener (from another node)
    listener: str = ""  # the name of the listener the request came in on; Metadata answers with its endpoints
    principal: KafkaPrincipal = ANONYMOUS  # who sent it (TLS or SASL); ACLs and quotas are checked against it
    client_host: str = ""  # the address it came from, for ACL host filters
    security_protocol: str = "PLAINTEXT"  # of the listener: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    quota: RequestQuota = NO_QUOTA  # the client quotas this request counts against (moldau.security.quotas)
    sasl: SaslAuthenticator | None = None  # the connection's SASL state, on SASL listeners

    @property
    def version(self) -> int:
        return self.header.api_version

    def nested(self, class_name: str) -> Any:
        """A nested response class of this request's version (see codec.nested)."""
        return getattr(self.schema.response_module, class_name)
