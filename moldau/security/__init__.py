"""Who is asking, and what they may do: the broker's security.

- `principal.py`: `KafkaPrincipal` (`User:alice`), the identity every request carries in its context; a
  connection that has not authenticated is `User:ANONYMOUS`, as in Kafka.
- `quotas.py`: client quotas (`producer_byte_rate`, `consumer_byte_rate`, `request_percentage`) per user and
  client id, their precedence, windowed rates and KIP-219 throttle times; sans-I/O.
- `connection_quotas.py`: `max.connections`, `max.connections.per.ip` and its overrides, checked at accept.
- `tls.py`: SSL and SASL_SSL listeners' TLS contexts from Kafka's `ssl.*` configs (PEM stores), per-listener
  overrides, startup errors naming the config.
- `ssl_principal.py`: a client certificate's subject in RFC 2253 form, `ssl.principal.mapping.rules`.
- `client_security.py`: how this node connects to other nodes (inter-broker and controller listeners).
- `sasl/`: SASL authentication on SASL_PLAINTEXT / SASL_SSL listeners (PLAIN, SCRAM-SHA-256/512): JAAS
  parsing, the per-connection state machine, SCRAM credentials kept in the metadata log.
- `delegation_tokens.py`: delegation tokens (KIP-48): the controller's decisions (create, renew, expire, the
  expiry sweep, who sees which token) and the SCRAM credentials of token logins; sans-I/O.

- `acl/`: authorization: ACLs (Kafka's StandardAuthorizer semantics), the authorizer that checks them and the
  table of what each API needs (`acl/rules.py`); handlers ask through `RequestContext.authorize`.

Listeners' security protocols (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) come from
`listener.security.protocol.map`; each connection knows its listener's protocol and its principal, and dispatch
hands both to handlers and request filters (`moldau.server.dispatch`).
"""
