"""What a handler gets besides the request: who asked, on which listener, which version, and the node's services."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from moldau.protocol.codec import ApiSchema, RequestHeader
from moldau.security.principal import ANONYMOUS, KafkaPrincipal
from moldau.security.quotas import NO_QUOTA, RequestQuota

if TYPE_CHECKING:
    from moldau.security.acl.authorizer import Authorizer
    from moldau.security.acl.model import AclOperation, ResourceType
    from moldau.security.sasl.authenticator import SaslAuthenticator
    from moldau.server.services import BrokerServices


# Not frozen: one is made per request, and a frozen dataclass sets each of its fields with `object.__setattr__`,
# several times the cost of a plain `__init__`. Handlers treat it as read-only all the same.
@dataclass(slots=True, eq=False)
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
    authorizer: Authorizer | None = None  # None: no authorizer configured, everything is allowed
    # Sent by another node: on a controller listener, by a principal allowed CLUSTER_ACTION on the cluster.
    from_node: bool = False
    # The connection sends file regions with sendfile (a plaintext listener with fetch zero-copy on): a Fetch may
    # answer with `FileRegion`s of its segments instead of their bytes.
    sends_files: bool = False
    # Carried in an Envelope (58) from the broker that took it: `principal` and `client_host` are the client's, as
    # that broker authenticated them (moldau.server.envelope).
    enveloped: bool = False

    def authorize(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        """May this request's principal, from its host, do `operation` on the resource? Always true without an
        authorizer, and for requests from other nodes (the node that took a client's admin request checked the
        client's ACLs before forwarding it). Admin clients on a controller listener (KIP-919) are checked."""
        if self.authorizer is None or self.from_node:
            return True
        return self.authorizer.authorize(self.broker.image.acls, str(self.principal), self.client_host, operation,
                                         resource_type, name)

    def authorize_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """May the principal do `operation` on some resource of the type (Kafka's authorizeByResourceType)?"""
        if self.authorizer is None or self.from_node:
            return True
        return self.authorizer.authorize_any(self.broker.image.acls, str(self.principal), self.client_host,
                                             operation, resource_type)

    def authorized_operations(self, resource_type: ResourceType, name: str) -> int | None:
        """KIP-430's bit set for the resource, or None without an authorizer (the caller keeps its old answer)."""
        if self.authorizer is None:
            return None
        return self.authorizer.authorized_operations(self.broker.image.acls, str(self.principal), self.client_host,
                                                     resource_type, name)

    @property
    def version(self) -> int:
        return self.header.api_version

    def nested(self, class_name: str) -> Any:
        """A nested response class of this request's version (see codec.nested)."""
        return getattr(self.schema.response_module, class_name)
