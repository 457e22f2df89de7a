"""Who is asking, and what they may do: the broker's security.

- `principal.py`: `KafkaPrincipal` (`User:alice`), the identity every request carries in its context; a
  connection that has not authenticated is `User:ANONYMOUS`, as in Kafka.
- `sasl/`: SASL authentication on SASL_PLAINTEXT / SASL_SSL listeners (PLAIN, SCRAM-SHA-256/512): JAAS
  parsing, the per-connection state machine, SCRAM credentials kept in the metadata log.

Listeners' security protocols (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) come from
`listener.security.protocol.map`; each connection knows its listener's protocol and its principal, and dispatch
hands both to handlers and request filters (`moldau.server.dispatch`).
"""
