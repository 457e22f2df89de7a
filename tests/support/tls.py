"""Certificates made by the tests (the `trustme` package), never committed keys: one CA, a server certificate
for 127.0.0.1/localhost and client certificates, written as PEM files; and the configs that use them."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import trustme

CLIENT_SUBJECT = "CN=alice,OU=eng,O=Moldau"


@dataclass(frozen=True)
class Pki:
    directory: Path
    ca: Path  # the CA certificate: the trust store of brokers and clients
    server: Path  # the broker's key store: certificate chain and private key
    client_cert: Path  # alice's certificate (CLIENT_SUBJECT)
    client_key: Path
    client: Path  # alice's certificate chain and key in one file
    authority: trustme.CA | None = None  # the CA itself, to renew the nodes' certificate (`renew_server`)

    def broker_config(self, client_auth: str = "none") -> dict[str, str]:
        """The broker's ssl.* configs (the plain names: every SSL listener uses them unless overridden)."""
        return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.server),
                "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca),
                "ssl.client.auth": client_auth}

    def client_context(self) -> ssl.SSLContext:
        """A Python client's TLS context trusting the CA (no client certificate)."""
        return ssl.create_default_context(cafile=str(self.ca))

    def confluent(self, certificate: bool = True) -> dict[str, str]:
        conf = {"security.protocol": "SSL", "ssl.ca.location": str(self.ca)}
        if certificate:
            conf |= {"ssl.certificate.location": str(self.client_cert), "ssl.key.location": str(self.client_key)}
        return conf


def _write_server(ca: trustme.CA, path: Path) -> bytes:
    """The nodes' certificate, written with its key to `path`; its DER bytes. Its subject (CN=node,OU=nodes,
    O=Moldau) names the nodes where mapping rules need it."""
    server = ca.issue_cert("127.0.0.1", "localhost", common_name="node", organization_name="Moldau",
                           organization_unit_name="nodes")
    server.private_key_and_cert_chain_pem.write_to_path(str(path))
    path.chmod(0o600)
    return ssl.PEM_cert_to_DER_cert(server.cert_chain_pems[0].bytes().decode())


def renew_server(pki: Pki) -> bytes:
    """Issue the nodes' certificate again (same subject and names, a new key) into the same file; its DER bytes."""
    assert pki.authority is not None
    return _write_server(pki.authority, pki.server)


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="Moldau test CA")
    client = ca.issue_cert("alice@example.com", common_name="alice", organization_name="Moldau",
                           organization_unit_name="eng")
    pki = Pki(directory, directory / "ca.pem", directory / "server.pem", directory / "client-cert.pem",
              directory / "client-key.pem", directory / "client.pem", ca)
    ca.cert_pem.write_to_path(str(pki.ca))
    _write_server(ca, pki.server)
    client.cert_chain_pems[0].write_to_path(str(pki.client_cert))
    client.private_key_pem.write_to_path(str(pki.client_key))
    client.private_key_and_cert_chain_pem.write_to_path(str(pki.client))
    for path in (pki.client_key, pki.client):
        path.chmod(0o600)
    return pki
