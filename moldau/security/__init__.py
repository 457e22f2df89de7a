"""Who is asking, and what they may do: the broker's security.

- `principal.py`: `KafkaPrincipal` (`User:alice`), the identity every request carries in its context; a
  connection that has not authenticated is `User:ANONYMOUS`, as in Kafka.

- `acl/`: authorization: ACLs (Kafka's StandardAuthorizer semantics), the authorizer that checks them and the
  table of what each API needs (`acl/rules.py`); handlers ask through `RequestContext.authorize`.

Listeners' security protocols (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) come from
`listener.security.protocol.map`; each connection knows its listener's protocol and its principal, and dispatch
hands both to handlers and request filters (`moldau.server.dispatch`).
"""
