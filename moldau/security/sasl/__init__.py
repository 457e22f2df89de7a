"""SASL authentication (SASL_PLAINTEXT and SASL_SSL listeners), sans-I/O.

- `jaas.py`: parses Kafka's JAAS configuration strings (`sasl.jaas.config` and its per-listener and
  per-mechanism forms), which hold PLAIN users and the broker's own credentials.
- `mechanisms.py`: the server side of PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802/7677, through the
  `scramp` library), each a small object fed client tokens and answering server tokens; the mechanism names.
- `oauthbearer.py`: the server side of OAUTHBEARER (RFC 7628): the client's message, the JSON error and 0x01
  exchange of a refused token, the token's expiry bounding the session.
- `tokens.py`: Kafka's two OAUTHBEARER validators, unsecured JWTs and JWTs signed by the identity provider's
  keys (PyJWT checks signatures; claims are checked against the injected clock).
- `jwks.py`: the provider's signing keys (JWKS), when to fetch them again, and the fetch itself (a worker thread).
- `scram.py`: SCRAM credentials (salt, stored key, server key, iterations) as the metadata log keeps them.
- `authenticator.py`: one state machine per connection, driven by dispatch and the SaslHandshake /
  SaslAuthenticate handlers: which requests are legal in which state, the framed (KIP-152) and unframed
  exchanges, the principal on success, session lifetime and re-authentication (KIP-368).
- `settings.py`: what each SASL listener enables, read from the broker config.

Nothing here reads a client's socket: the same code runs over plain TCP and TLS, because the exchange only ever
sees whole frames. The one network client is `jwks.py`'s fetch of the identity provider's keys.
"""
