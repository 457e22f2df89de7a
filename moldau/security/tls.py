"""TLS for SSL and SASL_SSL listeners and for this node's own connections, from Kafka's `ssl.*` configs.

TLS is the standard library's `ssl` module (OpenSSL): no hand-written cryptography, and asyncio (uvloop too)
takes an `ssl.SSLContext` for servers and connections alike. `TlsSettings.for_listener` reads one listener's
settings (`listener.name.<name>.<config>` wins over the plain config); `server_context` and `client_context`
build the contexts, and every bad or missing setting is a `ConfigError` naming the config, so the broker refuses
to start with a message that says what to fix.

Key and trust stores are Kafka's three types. PEM (`ssl.keystore.type=PEM`): a file (`ssl.keystore.location`, the
certificate chain and the private key, encrypted under `ssl.key.password` or not) or inline PEM
(`ssl.keystore.certificate.chain` and `ssl.keystore.key`; `ssl.truststore.certificates`). PKCS12 and JKS (Kafka's
default type): a Java store file opened with `ssl.keystore.password` / `ssl.truststore.password` (a JKS key with
`ssl.key.password` when it has a password of its own), read by `moldau.security.keystores`. The `ssl` module
loads a private key from a file only: a key read from a Java store is handed to it in a private temporary file,
encrypted under a random password, and removed at once.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import ssl
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar, TypedDict, TypeVar

from moldau.config.broker_config import BrokerConfig
from moldau.config.schema import ConfigError
from moldau.security.ssl_principal import PrincipalMapper

if TYPE_CHECKING:  # loaded where a Java store is read (see STORE_TYPES)
    from cryptography.x509 import Certificate

    from moldau.security.keystores import KeyEntry

log = logging.getLogger(__name__)

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
T = TypeVar("T")
_CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """The `ssl.*` configs one listener (or this node's outgoing connections on it) uses."""

    listener: str
    keystore_type: str = "PEM"
    keystore_location: str | None = None
    keystore_certificate_chain: str | None = None
    keystore_key: str | None = None
    key_password: str | None = None
    keystore_password: str | None = None
    truststore_type: str = "PEM"
    truststore_location: str | None = None
    truststore_certificates: str | None = None
    truststore_password: str | None = None
    client_auth: str = "none"
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    protocol: str = "TLSv1.3"
    cipher_suites: tuple[str, ...] = ()
    endpoint_identification_algorithm: str = "https"
    principal_mapping_rules: str = "DEFAULT"
    # Whether a key store replaced at runtime may name another subject, or drop alternative names
    # (`moldau.security.keystore_compat`).
    allow_dn_changes: bool = False
    allow_san_changes: bool = False

    @classmethod
    def for_listener(cls, config: BrokerConfig, listener: str) -> TlsSettings:
        def get(name: str) -> str | None:
            value = config.listener_value(listener, name)
            return None if value is None else str(value)

        def get_list(name: str) -> tuple[str, ...]:
            value = config.listener_value(listener, name)
            return tuple(value) if isinstance(value, tuple) else ()

        return cls(
            listener=listener,
            **store_settings(get),
            client_auth=get("ssl.client.auth") or "none",
            enabled_protocols=get_list("ssl.enabled.protocols"),
            cipher_suites=get_list("ssl.cipher.suites"),
            endpoint_identification_algorithm=get("ssl.endpoint.identification.algorithm") or "",
            principal_mapping_rules=get("ssl.principal.mapping.rules") or "DEFAULT",
            allow_dn_changes=config.listener_value(listener, "ssl.allow.dn.changes") is True,
            allow_san_changes=config.listener_value(listener, "ssl.allow.san.changes") is True,
        )

    def without_stores(self) -> TlsSettings:
        """These settings with the key and trust stores left out: what must not change while a listener runs."""
        return replace(self, keystore_type="", keystore_location=None, keystore_certificate_chain=None,
                       keystore_key=None, key_password=None, keystore_password=None, truststore_type="",
                       truststore_location=None, truststore_certificates=None, truststore_password=None)

    def config_name(self, name: str) -> str:
        """How an error names a config: the plain name, with the listener it was read for (if any: a client's
        settings have none)."""
        return f"{name} (listener {self.listener})" if self.listener else name

    @property
    def has_keystore(self) -> bool:
        return bool(self.keystore_location or self.keystore_certificate_chain)

    @property
    def has_truststore(self) -> bool:
        return bool(self.truststore_location or self.truststore_certificates)


class StoreSettings(TypedDict):
    """The fields of `TlsSettings` that broker listeners and Connect's https listeners read alike."""

    keystore_type: str
    keystore_location: str | None
    keystore_certificate_chain: str | None
    keystore_key: str | None
    key_password: str | None
    keystore_password: str | None
    truststore_type: str
    truststore_location: str | None
    truststore_certificates: str | None
    truststore_password: str | None
    protocol: str


def store_settings(get: Callable[[str], str | None]) -> StoreSettings:
    """The key and trust store settings and `ssl.protocol`, read with `get` (None for a config not set), with
    Kafka's defaults."""
    return {
        "keystore_type": get("ssl.keystore.type") or "JKS",
        "keystore_location": get("ssl.keystore.location"),
        "keystore_certificate_chain": get("ssl.keystore.certificate.chain"),
        "keystore_key": get("ssl.keystore.key"),
        "key_password": get("ssl.key.password"),
        "keystore_password": get("ssl.keystore.password"),
        "truststore_type": get("ssl.truststore.type") or "JKS",
        "truststore_location": get("ssl.truststore.location"),
        "truststore_certificates": get("ssl.truststore.certificates"),
        "truststore_password": get("ssl.truststore.password"),
        "protocol": get("ssl.protocol") or "TLSv1.3",
    }


class ListenerTls:
    """What an SSL or SASL_SSL listener serves with: its context and how client certificates name principals.

    Its key and trust stores can be reloaded while it runs (`reload`), as Kafka reloads a listener's stores
    when they are altered dynamically: `context`, the one the listening socket was created with, stays; each new
    connection's handshake is switched to the latest context in its server-name callback (which OpenSSL calls
    for every ClientHello, before choosing the certificate), so new connections get the new certificate and are
    verified against the new trust store, and connections already open are untouched."""

    def __init__(self, listener: str, settings: TlsSettings, context: ssl.SSLContext,
                 principal_mapper: PrincipalMapper) -> None:
        self.listener = listener
        self.settings = settings
        self.context = context
        self.principal_mapper = principal_mapper
        self._current = context
        self._stamps = store_stamps(settings)
        context.sni_callback = self._switch

    @classmethod
    def from_config(cls, config: BrokerConfig, listener: str) -> ListenerTls:
        """Raises ConfigError naming the bad config."""
        settings = TlsSettings.for_listener(config, listener)
        try:
            mapper = PrincipalMapper(settings.principal_mapping_rules)
        except ValueError as exc:
            raise ConfigError(f"{exc} (listener {listener})", "ssl.principal.mapping.rules") from None
        context = server_context(settings)
        context.sslobject_class = _handshake_logger(listener)
        return cls(listener, settings, context, mapper)

    def reload(self, settings: TlsSettings) -> bool:
        """Serve new connections with these settings' stores if they, or the files they name, changed since the
        last load; True if so. Raises ConfigError naming the bad config, and keeps the stores it has then.

        What the metadata log holds is applied as it is: a restarted node starts from its static stores and
        takes the dynamic ones with its first metadata, which may be several changes away from them. A change is
        judged when it is made (`check`)."""
        if settings.without_stores() != self.settings.without_stores():
            raise ConfigError(f"only the key and trust stores of listener {self.listener} may change at runtime",
                              "ssl")
        stamps = store_stamps(settings)
        if settings == self.settings and stamps == self._stamps:
            return False
        self._current = server_context(settings)
        self.settings, self._stamps = settings, stamps
        return True

    def check(self, settings: TlsSettings, between_brokers: bool = False) -> None:
        """Whether the listener may switch to these settings now, as a dynamic config change asks: only the stores
        change, they load, the certificate keeps its identity and, on the inter-broker listener (`between_brokers`),
        the new stores and the current ones trust each other both ways (`moldau.security.keystore_compat`).
        Raises ConfigError naming the config."""
        from moldau.security import keystore_compat  # it builds contexts with this module's functions

        if settings.without_stores() != self.settings.without_stores():
            raise ConfigError(f"only the key and trust stores of listener {self.listener} may change at runtime",
                              "ssl")
        server_context(settings)
        keystore_compat.check_identity(self.settings, settings)
        if between_brokers:
            keystore_compat.check_handshakes(self.settings, settings)

    def _switch(self, ssl_object: ssl.SSLObject | ssl.SSLSocket, server_name: str | None,
                context: ssl.SSLContext) -> None:
        current = self._current
        if current is not context:
            ssl_object.context = current


StoreStamps = tuple[tuple[int, int] | None, ...]


def store_stamps(settings: TlsSettings) -> StoreStamps:
    """The modification time and size of the store files, so that a file replaced under the same name is loaded
    again when its config is set again (as Kafka reloads a key store whose file changed)."""
    def stamp(path: str | None) -> tuple[int, int] | None:
        try:
            info = os.stat(path) if path else None
        except OSError:
            return None
        return None if info is None else (info.st_mtime_ns, info.st_size)
    return stamp(settings.keystore_location), stamp(settings.truststore_location)


class _HandshakeLoggingSSLObject(ssl.SSLObject):
    """Logs why a TLS handshake failed, as Kafka logs a failed SSL authentication: asyncio (and uvloop) close such
    connections silently, which leaves an operator no way to see why a client's certificate is refused.

    At most LOG_PER_MINUTE lines a minute per listener, so garbage sent to a TLS port cannot flood the log; the
    lines left out are counted in the next one."""

    LOG_PER_MINUTE: ClassVar[int] = 20
    listener: ClassVar[str] = ""
    _window: ClassVar[list[float]]  # [window start (monotonic s), lines logged in it, lines left out]

    def do_handshake(self) -> None:
        try:
            super().do_handshake()
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise  # not a failure: the handshake needs more bytes
        except ssl.SSLError as exc:
            self._log_failure(exc)
            raise

    @classmethod
    def _log_failure(cls, exc: ssl.SSLError) -> None:
        now = time.monotonic()
        window = cls._window
        if now - window[0] >= 60:
            window[:] = [now, 0, window[2]]
        if window[1] >= cls.LOG_PER_MINUTE:
            window[2] += 1
            return
        window[1] += 1
        left_out = f" ({int(window[2])} more failures not logged)" if window[2] else ""
        window[2] = 0
        log.info("TLS handshake failed on listener %s: %s%s", cls.listener, exc.reason or exc, left_out)


def _handshake_logger(listener: str) -> type[ssl.SSLObject]:
    """An SSLObject class for the listener's context that logs failed handshakes (see the class)."""
    return type(f"HandshakeLoggingSSLObject[{listener}]", (_HandshakeLoggingSSLObject,),
                {"listener": listener, "_window": [0.0, 0, 0]})


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """The context an SSL or SASL_SSL listener serves with. Raises ConfigError naming the bad config."""
    if not settings.has_keystore:
        raise ConfigError(f"{settings.config_name('ssl.keystore.location')} must be set: an SSL listener needs "
                          "a certificate and its private key", "ssl.keystore.location")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _common(context, settings)
    _load_keystore(context, settings)
    context.verify_mode = _CLIENT_AUTH[settings.client_auth]
    if context.verify_mode != ssl.CERT_NONE:
        if not settings.has_truststore:
            raise ConfigError(f"{settings.config_name('ssl.truststore.location')} must be set when "
                              f"ssl.client.auth={settings.client_auth}: it holds the CAs that sign client "
                              "certificates", "ssl.truststore.location")
        _load_truststore(context, settings)
    return context


def client_context(settings: TlsSettings, client_certificate: bool = True) -> ssl.SSLContext:
    """The context this node connects to another with: the trust store verifies the peer (the system's CAs when
    none is set), the key store, if any, is the client certificate. Raises ConfigError naming the bad config."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _common(context, settings)
    context.check_hostname = settings.endpoint_identification_algorithm.lower() == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    if settings.has_truststore:
        _load_truststore(context, settings)
    else:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if client_certificate and settings.has_keystore:
        _load_keystore(context, settings)
    return context


def _common(context: ssl.SSLContext, settings: TlsSettings) -> None:
    name = settings.config_name("ssl.enabled.protocols")
    versions = [_VERSIONS[p] for p in settings.enabled_protocols if p in _VERSIONS]
    if not versions:
        raise ConfigError(f"{name} enables no TLS version Moldau supports (TLSv1.2, TLSv1.3)",
                          "ssl.enabled.protocols")
    newest = max(versions)
    if settings.protocol == "TLSv1.2":
        newest = ssl.TLSVersion.TLSv1_2
    if min(versions) > newest:
        raise ConfigError(f"{name} and ssl.protocol={settings.protocol} leave no TLS version",
                          "ssl.enabled.protocols")
    context.minimum_version = min(versions)
    context.maximum_version = newest
    if settings.cipher_suites:
        _set_ciphers(context, settings)


# Kafka (Java) names TLS 1.2 suites by their IANA names, OpenSSL by its own: translate the usual ones.
_KEX = {"ECDHE_RSA": "ECDHE-RSA-", "ECDHE_ECDSA": "ECDHE-ECDSA-", "DHE_RSA": "DHE-RSA-", "RSA": ""}
_CIPHERS = {"AES_128_GCM": "AES128-GCM", "AES_256_GCM": "AES256-GCM", "AES_128_CBC": "AES128",
            "AES_256_CBC": "AES256", "CHACHA20_POLY1305": "CHACHA20-POLY1305"}
_IANA = re.compile(r"TLS_(?P<kex>[A-Z0-9_]+?)_WITH_(?P<cipher>[A-Z0-9_]+?)(?:_(?P<mac>SHA|SHA256|SHA384))?\Z")
_TLS13_SUITES = frozenset(("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                           "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"))


def openssl_cipher_name(name: str) -> str | None:
    """OpenSSL's name of a TLS 1.2 cipher suite given by its IANA name (or already by OpenSSL's); None for a
    TLS 1.3 suite, which OpenSSL always offers."""
    if name in _TLS13_SUITES:
        return None
    match = _IANA.match(name)
    if match is None or match["kex"] not in _KEX or match["cipher"] not in _CIPHERS:
        return name
    cipher = _CIPHERS[match["cipher"]]
    mac = "" if cipher.endswith("POLY1305") else match["mac"] or ""
    return f"{_KEX[match['kex']]}{cipher}{'-' + mac if mac else ''}"


def _set_ciphers(context: ssl.SSLContext, settings: TlsSettings) -> None:
    names = [n for n in (openssl_cipher_name(s) for s in settings.cipher_suites) if n is not None]
    if not names:
        return  # TLS 1.3 suites only: OpenSSL's set, which are those
    try:
        context.set_ciphers(":".join(names))
    except ssl.SSLError:
        raise ConfigError(f"{settings.config_name('ssl.cipher.suites')}: none of {', '.join(settings.cipher_suites)}"
                          " is a cipher suite this OpenSSL knows", "ssl.cipher.suites") from None
    known = {c["name"] for c in context.get_ciphers()}
    unknown = [s for s, n in zip(settings.cipher_suites, names, strict=False) if n not in known]
    if unknown:
        raise ConfigError(f"{settings.config_name('ssl.cipher.suites')}: unknown cipher suite {unknown[0]}",
                          "ssl.cipher.suites")


# PKCS12 and JKS are read by `moldau.security.keystores`, imported where one is used: it loads `cryptography`,
# which a broker with PEM stores, or none, has no need for.
STORE_TYPES = ("PEM", "PKCS12", "JKS")


def _store_type(settings: TlsSettings, name: str, store_type: str) -> str:
    """The store type, upper case; ConfigError for one Moldau does not read."""
    upper = store_type.upper()
    if upper not in STORE_TYPES:
        raise ConfigError(f"{settings.config_name(name)}={store_type} is not supported: Moldau reads "
                          f"{', '.join(STORE_TYPES)} stores", name)
    return upper


def load_keystore(context: ssl.SSLContext, settings: TlsSettings) -> None:
    """Load the settings' key store into the context as its certificate. Raises ConfigError naming the config."""
    _load_keystore(context, settings)


def _load_keystore(context: ssl.SSLContext, settings: TlsSettings) -> None:
    if _store_type(settings, "ssl.keystore.type", settings.keystore_type) != "PEM":
        _load_java_keystore(context, settings)
        return
    password = settings.key_password
    if settings.keystore_location:
        location = settings.keystore_location
        name = "ssl.keystore.location"
        _readable(settings, name, location)
        try:
            context.load_cert_chain(location, password=password)
        except (ssl.SSLError, ValueError, OSError) as exc:
            raise ConfigError(f"{settings.config_name(name)}={location}: not a PEM certificate chain with its "
                              f"private key{_password_hint(settings, exc)}: {exc}", name) from None
        return
    if not settings.keystore_key:
        raise ConfigError(f"{settings.config_name('ssl.keystore.key')} must be set with "
                          "ssl.keystore.certificate.chain", "ssl.keystore.key")
    try:
        _load_pem_chain(context, pem_text(settings.keystore_certificate_chain or "") + "\n"
                        + pem_text(settings.keystore_key), password)
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"{settings.config_name('ssl.keystore.certificate.chain')} and ssl.keystore.key are not "
                          f"a PEM certificate chain and its private key{_password_hint(settings, exc)}: {exc}",
                          "ssl.keystore.key") from None


def _load_pem_chain(context: ssl.SSLContext, pem: str, password: str | None) -> None:
    # The ssl module loads keys from files only: a private temporary file, removed at once.
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(pem)
        context.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def _java_key_entry(settings: TlsSettings) -> KeyEntry:
    from moldau.security import keystores

    name = "ssl.keystore.location"
    if not settings.keystore_location:
        raise ConfigError(f"{settings.config_name(name)} must be set: ssl.keystore.type={settings.keystore_type} "
                          "names a store file (inline certificates are PEM only)", name)
    return _read_store(settings, name, settings.keystore_location, lambda data: keystores.read_key_store(
        data, settings.keystore_password, settings.key_password))


def key_store_pem(settings: TlsSettings, key_password: str | None = None) -> tuple[str, str]:
    """The certificate chain and the private key of the settings' JKS or PKCS12 key store, as PEM, for a client that
    takes PEM (librdkafka, OpenSSL): the key encrypted under `key_password`, or not encrypted without one. Raises
    ConfigError naming the config."""
    from cryptography.hazmat.primitives import serialization

    entry = _java_key_entry(settings)
    encryption = (serialization.BestAvailableEncryption(key_password.encode()) if key_password is not None
                  else serialization.NoEncryption())
    key = entry.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    return entry.chain_pem().decode(), key.decode()


def _load_java_keystore(context: ssl.SSLContext, settings: TlsSettings) -> None:
    name = "ssl.keystore.location"
    password = secrets.token_hex(16)
    chain, key = key_store_pem(settings, password)
    try:
        _load_pem_chain(context, chain + key, password)
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"{settings.config_name(name)}={settings.keystore_location}: its key and certificate "
                          f"cannot be used together: {exc}", name) from None


def _read_store(settings: TlsSettings, name: str, location: str, read: Callable[[bytes], T]) -> T:
    from moldau.security import keystores

    _readable(settings, name, location)
    try:
        with open(location, "rb") as store:
            return read(store.read())
    except OSError as exc:
        raise ConfigError(f"{settings.config_name(name)}={location}: {exc.strerror or exc}", name) from None
    except keystores.StoreError as exc:
        raise ConfigError(f"{settings.config_name(name)}={location}: {exc}", name) from None


def _load_truststore(context: ssl.SSLContext, settings: TlsSettings) -> None:
    if _store_type(settings, "ssl.truststore.type", settings.truststore_type) != "PEM":
        _load_java_truststore(context, settings)
        return
    if settings.truststore_location:
        name = "ssl.truststore.location"
        _readable(settings, name, settings.truststore_location)
        try:
            context.load_verify_locations(cafile=settings.truststore_location)
        except (ssl.SSLError, ValueError, OSError) as exc:
            raise ConfigError(f"{settings.config_name(name)}={settings.truststore_location}: not PEM "
                              f"certificates: {exc}", name) from None
        return
    try:
        context.load_verify_locations(cadata=pem_text(settings.truststore_certificates or ""))
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"{settings.config_name('ssl.truststore.certificates')}: not PEM certificates: {exc}",
                          "ssl.truststore.certificates") from None


def _java_trusted(settings: TlsSettings) -> tuple[Certificate, ...]:
    from moldau.security import keystores

    name = "ssl.truststore.location"
    if not settings.truststore_location:
        raise ConfigError(f"{settings.config_name(name)} must be set: ssl.truststore.type="
                          f"{settings.truststore_type} names a store file (inline certificates are PEM only)", name)
    return _read_store(settings, name, settings.truststore_location, lambda data: keystores.read_trust_store(
        data, settings.truststore_password))


def trust_store_pem(settings: TlsSettings) -> str:
    """The certificates of the settings' JKS or PKCS12 trust store, as PEM. Raises ConfigError naming the config."""
    from cryptography.hazmat.primitives import serialization

    return "".join(cert.public_bytes(serialization.Encoding.PEM).decode() for cert in _java_trusted(settings))


def _load_java_truststore(context: ssl.SSLContext, settings: TlsSettings) -> None:
    from cryptography.hazmat.primitives import serialization

    context.load_verify_locations(cadata=b"".join(
        cert.public_bytes(serialization.Encoding.DER) for cert in _java_trusted(settings)))


def _readable(settings: TlsSettings, name: str, location: str) -> None:
    if not os.path.isfile(location):
        raise ConfigError(f"{settings.config_name(name)}={location}: no such file", name)
    if not os.access(location, os.R_OK):
        raise ConfigError(f"{settings.config_name(name)}={location}: not readable", name)


def _password_hint(settings: TlsSettings, exc: Exception) -> str:
    if settings.key_password is None and "password" in str(exc).lower():
        return " (the key is encrypted: set ssl.key.password)"
    return " (or ssl.key.password is wrong)" if settings.key_password is not None else ""


def pem_text(value: str) -> str:
    """Inline PEM as Kafka takes it: the newlines may have been written as the two characters \\n."""
    return value.replace("\\n", "\n").strip()
