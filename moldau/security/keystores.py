"""Java key and trust stores (PKCS12 and JKS), read so that OpenSSL can use what they hold.

Kafka's TLS configs name Java stores: `ssl.keystore.type` and `ssl.truststore.type` default to JKS, and the keytool
of every Java since 9 writes PKCS12 unless told otherwise. So that a Kafka `server.properties` works unchanged,
a store of either type is read here into what the `ssl` module loads: the private key and its certificate chain,
or the trusted certificates.

- **Either format under either type**, as Java reads them (its `keystore.type.compat`): the file's first bytes
  say which it is, whatever the config says.
- **PKCS12** is read by `cryptography` (OpenSSL's PKCS#12 code), which verifies the store's integrity and decrypts
  its contents with the store password.
- **JKS** has no maintained Python reader; its format is small and fixed (Java's `sun.security.provider.JavaKeyStore`):
  entries, then a SHA-1 integrity digest keyed by the password; a private key is a PKCS#8 key XORed with a SHA-1
  key stream and followed by a SHA-1 check of the plain key. `_JksReader` reads exactly that and refuses anything
  else. JCEKS stores (Java's other proprietary format) are refused with the keytool command that converts them.

Every problem is a `StoreError` saying what is wrong in words an operator can act on; the caller names the config.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.hazmat.primitives.serialization import pkcs12

__all__ = ["KeyEntry", "StoreError", "read_key_store", "read_trust_store"]

_JKS_MAGIC = 0xFEEDFEED
_JCEKS_MAGIC = 0xCECECECE
_JKS_PRIVATE_KEY, _JKS_TRUSTED_CERTIFICATE = 1, 2
# The OID of Sun's JKS key protector (1.3.6.1.4.1.42.2.17.1.1), DER-encoded.
_JKS_KEY_PROTECTOR_OID = bytes.fromhex("2b060104012a02110101")
_SHA1_SIZE = 20
# The store's integrity digest is keyed with the password and this fixed string (Java's choice).
_JKS_DIGEST_WHITENER = b"Mighty Aphrodite"
_CONVERT = ("convert it with `keytool -importkeystore -srckeystore FILE -destkeystore NEW.p12 "
            "-deststoretype PKCS12`")


class StoreError(ValueError):
    """A store that cannot be read: wrong password, another format, damaged, or without what is needed."""


@dataclass(frozen=True, slots=True)
class KeyEntry:
    """A key store's private key and its certificate chain, leaf first."""

    key: PrivateKeyTypes
    chain: tuple[x509.Certificate, ...]

    def chain_pem(self) -> bytes:
        return b"".join(cert.public_bytes(serialization.Encoding.PEM) for cert in self.chain)


def store_format(data: bytes) -> str:
    """"JKS", "JCEKS" or "PKCS12" (DER, which starts with a SEQUENCE), from the first bytes."""
    if len(data) >= 4:
        magic = struct.unpack_from(">I", data)[0]
        if magic == _JKS_MAGIC:
            return "JKS"
        if magic == _JCEKS_MAGIC:
            return "JCEKS"
    if data[:1] == b"\x30":
        return "PKCS12"
    if data.lstrip()[:10] == b"-----BEGIN":
        raise StoreError("a PEM file, not a Java store: set the store's type to PEM")
    raise StoreError("neither a PKCS12 nor a JKS store")


def read_key_store(data: bytes, store_password: str | None, key_password: str | None) -> KeyEntry:
    """The private key and chain of a PKCS12 or JKS key store. `key_password` (`ssl.key.password`) defaults to the
    store password, as in Kafka; a PKCS12 store has one password for both."""
    kind = store_format(data)
    if kind == "JCEKS":
        raise StoreError(f"a JCEKS store, which Moldau cannot read: {_CONVERT}")
    if store_password is None:
        raise StoreError("a key store needs its password (ssl.keystore.password)")
    if kind == "PKCS12":
        return _pkcs12_key_entry(data, store_password)
    store = _JksReader(data, store_password)
    return store.key_entry(key_password if key_password is not None else store_password)


def read_trust_store(data: bytes, store_password: str | None) -> tuple[x509.Certificate, ...]:
    """The certificates of a PKCS12 or JKS trust store. Without a password a JKS store's integrity is not
    checked, as in Java; a PKCS12 store written by keytool needs it to decrypt its certificates."""
    kind = store_format(data)
    if kind == "JCEKS":
        raise StoreError(f"a JCEKS store, which Moldau cannot read: {_CONVERT}")
    if kind == "PKCS12":
        loaded = _load_pkcs12(data, store_password)
        certs = [c.certificate for c in loaded.additional_certs]
        if loaded.cert is not None:
            certs.insert(0, loaded.cert.certificate)
    else:
        certs = list(_JksReader(data, store_password).trusted_certificates)
    if not certs:
        raise StoreError("the store holds no certificates")
    return tuple(certs)


def _load_pkcs12(data: bytes, password: str | None) -> pkcs12.PKCS12KeyAndCertificates:
    try:
        return pkcs12.load_pkcs12(data, password.encode() if password is not None else None)
    except ValueError:
        hint = "the store password is wrong" if password is not None else "it needs its password"
        raise StoreError(f"a PKCS12 store that cannot be opened: {hint}, or the file is damaged") from None


def _pkcs12_key_entry(data: bytes, password: str) -> KeyEntry:
    loaded = _load_pkcs12(data, password)
    if loaded.key is None or loaded.cert is None:
        raise StoreError("the store holds no private key with its certificate")
    leaf = loaded.cert.certificate
    return KeyEntry(loaded.key, _chain(leaf, [c.certificate for c in loaded.additional_certs]))


def _chain(leaf: x509.Certificate, others: list[x509.Certificate]) -> tuple[x509.Certificate, ...]:
    """The leaf and, in order, the certificates that issued it from `others` (a store with several entries also
    holds certificates that are not this key's)."""
    chain = [leaf]
    pool = [cert for cert in others if cert != leaf]
    while pool and chain[-1].issuer != chain[-1].subject:
        issuer = next((cert for cert in pool if cert.subject == chain[-1].issuer), None)
        if issuer is None:
            break
        chain.append(issuer)
        pool.remove(issuer)
    return tuple(chain)


class _JksReader:
    """One JKS store, read and checked when made."""

    def __init__(self, data: bytes, password: str | None) -> None:
        self._data = memoryview(data)
        self._at = 0
        self.key_entries: list[tuple[str, bytes, tuple[x509.Certificate, ...]]] = []
        self.trusted_certificates: list[x509.Certificate] = []
        try:
            self._read_entries()
        except (struct.error, IndexError):
            raise StoreError("a JKS store that ends early: the file is damaged") from None
        if password is not None:
            self._check_digest(password)

    def key_entry(self, key_password: str) -> KeyEntry:
        if not self.key_entries:
            raise StoreError("the store holds no private key")
        alias, protected, chain = self.key_entries[0]
        if not chain:
            raise StoreError(f"the key {alias!r} has no certificate")
        key_der = _unprotect_jks_key(protected, key_password)
        try:
            key = serialization.load_der_private_key(key_der, password=None)
        except ValueError:
            raise StoreError(f"the key {alias!r} is not a private key Moldau can use") from None
        return KeyEntry(key, chain)

    def _read_entries(self) -> None:
        magic, version, count = self._unpack(">III")
        if magic != _JKS_MAGIC or version not in (1, 2):
            raise StoreError(f"a JKS store of version {version}, which Moldau cannot read: {_CONVERT}")
        for _ in range(count):
            tag = self._unpack(">I")[0]
            alias = self._utf()
            self._unpack(">q")  # when the entry was made
            if tag == _JKS_PRIVATE_KEY:
                protected = self._bytes()
                chain = tuple(self._certificate(version) for _ in range(self._unpack(">I")[0]))
                self.key_entries.append((alias, protected, chain))
            elif tag == _JKS_TRUSTED_CERTIFICATE:
                self.trusted_certificates.append(self._certificate(version))
            else:
                raise StoreError(f"entry {alias!r} is of a kind a JKS store does not hold (tag {tag})")
        self._body_end = self._at

    def _check_digest(self, password: str) -> None:
        expected = bytes(self._data[self._body_end:self._body_end + _SHA1_SIZE])
        digest = hashlib.sha1(password.encode("utf-16-be") + _JKS_DIGEST_WHITENER, usedforsecurity=False)
        digest.update(self._data[:self._body_end])
        if len(expected) != _SHA1_SIZE or not hmac.compare_digest(digest.digest(), expected):
            raise StoreError("a JKS store whose integrity check fails: the store password is wrong, or the file "
                             "was changed")

    def _certificate(self, version: int) -> x509.Certificate:
        kind = self._utf() if version == 2 else "X.509"
        der = self._bytes()
        if kind != "X.509":
            raise StoreError(f"a {kind} certificate, not X.509")
        try:
            return x509.load_der_x509_certificate(der)
        except ValueError:
            raise StoreError("a certificate in the store cannot be read") from None

    def _unpack(self, fmt: str) -> tuple[int, ...]:
        values = struct.unpack_from(fmt, self._data, self._at)
        self._at += struct.calcsize(fmt)
        return values

    def _bytes(self) -> bytes:
        size = self._unpack(">I")[0]
        if self._at + size > len(self._data):
            raise IndexError
        value = bytes(self._data[self._at:self._at + size])
        self._at += size
        return value

    def _utf(self) -> str:
        size = self._unpack(">H")[0]
        if self._at + size > len(self._data):
            raise IndexError
        value = bytes(self._data[self._at:self._at + size]).decode("utf-8", errors="replace")
        self._at += size
        return value


def _unprotect_jks_key(protected: bytes, password: str) -> bytes:
    """The PKCS#8 key inside a JKS key entry (an EncryptedPrivateKeyInfo whose data is salt, XORed key, check)."""
    encrypted = _jks_encrypted_data(protected)
    if len(encrypted) < 2 * _SHA1_SIZE:
        raise StoreError("a damaged private key entry")
    secret = password.encode("utf-16-be")
    salt, body, check = encrypted[:_SHA1_SIZE], encrypted[_SHA1_SIZE:-_SHA1_SIZE], encrypted[-_SHA1_SIZE:]
    stream = bytearray()
    block = salt
    while len(stream) < len(body):
        block = hashlib.sha1(secret + block, usedforsecurity=False).digest()
        stream += block
    plain = bytes(a ^ b for a, b in zip(body, stream, strict=False))
    if not hmac.compare_digest(hashlib.sha1(secret + plain, usedforsecurity=False).digest(), check):
        raise StoreError("the private key's password is wrong (ssl.key.password, else ssl.keystore.password)")
    return plain


def _jks_encrypted_data(der: bytes) -> bytes:
    """The encrypted data of an EncryptedPrivateKeyInfo protected by Sun's JKS key protector:
    SEQUENCE { SEQUENCE { OID, parameters }, OCTET STRING }."""
    try:
        outer_start, _ = _der(der, 0, 0x30)
        algorithm_start, algorithm_end = _der(der, outer_start, 0x30)
        oid_start, oid_end = _der(der, algorithm_start, 0x06)
        if der[oid_start:oid_end] != _JKS_KEY_PROTECTOR_OID:
            raise StoreError(f"a private key protected in a way Moldau cannot read: {_CONVERT}")
        data_start, data_end = _der(der, algorithm_end, 0x04)
    except IndexError:
        raise StoreError("a damaged private key entry") from None
    return der[data_start:data_end]


def _der(der: bytes, at: int, tag: int) -> tuple[int, int]:
    """Where the content of the DER element at `at` starts and ends (the next element starts at the end); the
    element must have `tag`. Raises IndexError for anything else."""
    if der[at] != tag:
        raise IndexError
    length = der[at + 1]
    start = at + 2
    if length & 0x80:
        size = length & 0x7F
        if not 1 <= size <= 4:
            raise IndexError
        length = int.from_bytes(der[start:start + size], "big")
        start += size
    end = start + length
    if end > len(der):
        raise IndexError
    return start, end
