"""What a listener's key and trust stores replaced at runtime must keep, as Kafka checks it before it reloads them.

- **The certificate's identity.** Unless `ssl.allow.dn.changes` is true, the new certificate's subject
  (distinguished name) must be the current one's; unless `ssl.allow.san.changes` is true, its subject alternative
  names must include all of the current one's. Clients and other brokers verify the host names and may map the
  subject to a principal, so a renewed certificate that names another host or another principal is more likely a
  mistake than a renewal. Refused with Kafka's messages ("Keystore DistinguishedName does not match", "Keystore
  SubjectAltNames do not match").
- **Trust between brokers** (the inter-broker listener only). The brokers of a cluster do not all switch at once, so
  the new stores must complete a TLS handshake with the current ones both ways: the current stores as the server
  and the new ones as the client, and the other way round (host names not checked), as Kafka validates an
  inter-broker keystore update. Moving a cluster to a new CA therefore takes three steps, as in Kafka: every broker
  trusts both CAs, then every broker gets its new certificate, then every broker trusts the new CA alone.

The certificate is read with `cryptography` (already needed by the schema registry client's dependencies): the
standard library's `ssl` module cannot parse a certificate it is not connected with.
"""

from __future__ import annotations

import ssl

from cryptography import x509

from moldau.config.schema import ConfigError
from moldau.security import keystores
from moldau.security.tls import TlsSettings, client_context, pem_text, server_context

__all__ = ["check_handshakes", "check_identity", "memory_handshake"]


def check_identity(current: TlsSettings, new: TlsSettings) -> None:
    """Raise ConfigError when the new key store's certificate names another subject, or fewer alternative names,
    than the current one's (unless `ssl.allow.dn.changes` / `ssl.allow.san.changes` allow it)."""
    if (new.allow_dn_changes and new.allow_san_changes) or not current.has_keystore or not new.has_keystore:
        return
    old_cert, new_cert = _leaf_certificate(current), _leaf_certificate(new)
    if old_cert is None or new_cert is None:
        return  # the context's own loading reports a store it cannot read
    if not new.allow_dn_changes and not _same_subject(old_cert.subject, new_cert.subject):
        old_dn, new_dn = old_cert.subject.rfc4514_string(), new_cert.subject.rfc4514_string()
        raise ConfigError(f"Keystore DistinguishedName does not match: existing={{DN={old_dn}}}, new={{DN={new_dn}}} "
                          f"(listener {new.listener}; set ssl.allow.dn.changes=true to allow it)",
                          "ssl.keystore.location")
    old_names, new_names = _alternative_names(old_cert), _alternative_names(new_cert)
    if not new.allow_san_changes and not old_names <= new_names:
        raise ConfigError(f"Keystore SubjectAltNames do not match: existing={{SAN={_names_text(old_names)}}}, "
                          f"new={{SAN={_names_text(new_names)}}} (listener {new.listener}; set "
                          "ssl.allow.san.changes=true to allow it)", "ssl.keystore.location")


def check_handshakes(current: TlsSettings, new: TlsSettings) -> None:
    """Raise ConfigError unless the new stores complete a TLS handshake with the current ones, each side acting as
    server once (the inter-broker listener: brokers still on the current stores must keep reaching this one, and
    this one them)."""
    for server, client, which in ((current, new, "the current stores as server, the new ones as client"),
                                  (new, current, "the new stores as server, the current ones as client")):
        try:
            memory_handshake(server_context(server), _validating_client(client))
        except ssl.SSLError as exc:
            raise ConfigError(f"the new key and trust stores of listener {new.listener} fail a TLS handshake with "
                              f"the current ones ({which}): {exc.reason or exc}; other brokers still use the "
                              "current ones. Trust both CAs everywhere before replacing certificates",
                              "ssl.truststore.location") from None


def _validating_client(settings: TlsSettings) -> ssl.SSLContext:
    context = client_context(settings)
    context.check_hostname = False  # as Kafka's validation: the stores are checked, not a host name
    return context


def memory_handshake(server: ssl.SSLContext, client: ssl.SSLContext, server_hostname: str | None = None
                     ) -> tuple[ssl.SSLObject, ssl.SSLObject]:
    """A TLS handshake between two contexts through memory BIOs; the client's and the server's side. Raises SSLError
    when either side refuses the other (with TLS 1.3 the server checks the client's certificate after the client
    has finished, in the server's own do_handshake) or the handshake does not complete."""
    s_in, s_out, c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    server_side = server.wrap_bio(s_in, s_out, server_side=True)
    client_side = client.wrap_bio(c_in, c_out, server_hostname=server_hostname)
    pending = [client_side, server_side]
    for _ in range(20):
        for side in list(pending):
            try:
                side.do_handshake()
                pending.remove(side)
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if not pending:
            return client_side, server_side
    raise ssl.SSLError("the handshake did not complete")


def _leaf_certificate(settings: TlsSettings) -> x509.Certificate | None:
    if settings.keystore_type.upper() != "PEM":
        return _java_leaf_certificate(settings)
    try:
        if settings.keystore_location:
            with open(settings.keystore_location, "rb") as pem:
                data = pem.read()
        else:
            data = pem_text(settings.keystore_certificate_chain or "").encode()
        certificates = x509.load_pem_x509_certificates(data)
    except (OSError, ValueError):
        return None
    return certificates[0] if certificates else None


def _java_leaf_certificate(settings: TlsSettings) -> x509.Certificate | None:
    if not settings.keystore_location:
        return None
    try:
        with open(settings.keystore_location, "rb") as store:
            entry = keystores.read_key_store(store.read(), settings.keystore_password, settings.key_password)
    except (OSError, keystores.StoreError):
        return None
    return entry.chain[0]


def _same_subject(old: x509.Name, new: x509.Name) -> bool:
    # Kafka compares the canonical names, then the RFC 2253 strings ignoring case.
    return old == new or old.rfc4514_string().lower() == new.rfc4514_string().lower()


def _alternative_names(certificate: x509.Certificate) -> frozenset[x509.GeneralName]:
    try:
        extension = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return frozenset()
    return frozenset(extension.value)


def _names_text(names: frozenset[x509.GeneralName]) -> str:
    return "[" + ", ".join(sorted(str(name.value) for name in names)) + "]"
