"""The REST API's listeners as Kafka Connect configures them: `listeners` (one or more `http://host:port` and
`https://host:port` URLs), `rest.advertised.listener` (the scheme other workers reach this one with), and the TLS
settings of the https listeners, which also serve as the client side of this worker's requests to other workers;
and `admin.listeners` (KIP-495), where the `/admin` endpoints are served instead when it is set (nowhere when it
is empty), with `admin.listeners.https.ssl.*` for its https ones.

The TLS settings are read as Kafka Connect reads them (`valuesWithPrefixAllOrNothing("listeners.https.")`):
when any `listeners.https.*` config is given, the `listeners.https.ssl.*` configs are the whole of the settings
and the worker's top-level `ssl.*` are not consulted; otherwise the top-level `ssl.*` are used. Kafka Connect's
REST server asks for client certificates with `ssl.client.auth` (none, requested, required).

Stores are read as the broker reads them (`moldau.security.tls`): JKS (Kafka's default type), PKCS12 or PEM, with
`ssl.keystore.password`, `ssl.key.password` and `ssl.truststore.password`. Every bad setting is a
`ConfigException` naming the config as the worker's file spells it.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from moldau.config.schema import ConfigError
from moldau.connect.errors import ConfigException
from moldau.net.http_server import ListenerUrl, parse_listener_url
from moldau.security import tls

__all__ = [
    "ADMIN_HTTPS_PREFIX", "ADMIN_LISTENERS", "ADVERTISED_LISTENER", "CLIENT_AUTH", "HTTPS_PREFIX", "LISTENERS",
    "RestTls", "advertised_listener", "parse_admin_listeners", "parse_listeners", "rest_tls", "url_of",
]

LISTENERS = "listeners"
ADVERTISED_LISTENER = "rest.advertised.listener"
HTTPS_PREFIX = "listeners.https."
ADMIN_LISTENERS = "admin.listeners"
ADMIN_HTTPS_PREFIX = "admin.listeners.https."
CLIENT_AUTH = "ssl.client.auth"
# The name Confluent's REST components give the same setting; taken too, so a config written for them is not
# silently served without the client authentication it asks for.
CLIENT_AUTH_ALIAS = "ssl.client.authentication"
CLIENT_AUTH_VALUES = ("none", "requested", "required")


def parse_listeners(urls: list[str]) -> tuple[ListenerUrl, ...]:
    """The listeners `listeners` names. Raises ConfigException naming `listeners`."""
    parsed = _parse(LISTENERS, urls)
    if not parsed:
        raise ConfigException(LISTENERS, ",".join(urls), "At least one listener URL is required, e.g. "
                                                         "http://localhost:8083,https://localhost:8443")
    return tuple(parsed)


def parse_admin_listeners(urls: list[str] | None) -> tuple[ListenerUrl, ...] | None:
    """The listeners `admin.listeners` names: None when it is not set (the `/admin` endpoints are on the
    listeners of `listeners`), none when it is empty (they are served nowhere). Raises ConfigException naming
    `admin.listeners`."""
    return None if urls is None else _parse(ADMIN_LISTENERS, urls)


def _parse(config: str, urls: list[str]) -> tuple[ListenerUrl, ...]:
    parsed = []
    for url in urls:
        try:
            listener = parse_listener_url(config, url)
        except ValueError:
            raise ConfigException(config, url, "Expected http://host:port or https://host:port") from None
        if listener is not None:
            parsed.append(listener)
    return tuple(parsed)


def advertised_listener(listeners: tuple[ListenerUrl, ...], configured: str | None) -> ListenerUrl:
    """The listener other workers use: the first of the scheme `rest.advertised.listener` names, else (as Kafka
    Connect chooses) the first http listener, else the first https one. Raises ConfigException naming
    `rest.advertised.listener` when no listener has that scheme."""
    scheme = (configured or "").strip().lower()
    if not scheme:
        scheme = "http" if any(not listener.tls for listener in listeners) else "https"
    for listener in listeners:
        if listener.scheme == scheme:
            return listener
    raise ConfigException(ADVERTISED_LISTENER, configured, f"No {scheme} listener in listeners "
                                                           f"({', '.join(_show(each) for each in listeners)})")


def url_of(listener: ListenerUrl, advertised_host: str | None, advertised_port: int | None) -> str:
    """The URL other workers reach `listener` at (the host of a wildcard listener is this machine's name)."""
    host = advertised_host or listener.host
    if host in ("", "0.0.0.0", "::"):
        host = socket.gethostname()
    return f"{listener.scheme}://{host}:{advertised_port or listener.port}/"


def _show(listener: ListenerUrl) -> str:
    return f"{listener.scheme}://{listener.host}:{listener.port}"


@dataclass(frozen=True)
class RestTls:
    """The TLS settings of the https listeners, and which config prefix they were read under (for errors)."""

    settings: tls.TlsSettings
    prefix: str

    def server_context(self) -> ssl.SSLContext:
        """The context the https listeners serve with. Raises ConfigException naming the bad config."""
        return self._build(tls.server_context)

    def client_context(self) -> ssl.SSLContext:
        """The context this worker calls other workers' https listeners with: their certificates are checked
        against the trust store (the system's CAs without one) and the key store, if any, is offered as this
        worker's client certificate. Raises ConfigException naming the bad config."""
        return self._build(tls.client_context)

    def _build(self, make: Callable[[tls.TlsSettings], ssl.SSLContext]) -> ssl.SSLContext:
        try:
            return make(self.settings)
        except ConfigError as exc:
            # tls.py names the plain config; the worker's file may spell it under listeners.https.
            message = str(exc).replace(" (listener https)", "")
            raise ConfigException(self.prefix + (exc.name or "ssl"), None, message) from None


def rest_tls(raw: Mapping[str, str], https_prefix: str = HTTPS_PREFIX) -> RestTls:
    """The https listeners' TLS settings from the worker's properties: those under `https_prefix` (that of
    `listeners`, or of `admin.listeners`) if any is given, else the top-level `ssl.*`. Raises ConfigException
    naming the config."""
    prefix = https_prefix if any(key.startswith(https_prefix) for key in raw) else ""

    def get(name: str) -> str | None:
        value = raw.get(prefix + name)
        return None if value is None or not value.strip() else value.strip()

    def get_list(name: str) -> tuple[str, ...] | None:
        value = get(name)
        return None if value is None else tuple(part.strip() for part in value.split(",") if part.strip())

    settings = tls.TlsSettings(
        listener="https",
        **tls.store_settings(get),
        client_auth=_client_auth(prefix, get),
        enabled_protocols=get_list("ssl.enabled.protocols") or ("TLSv1.2", "TLSv1.3"),
        cipher_suites=get_list("ssl.cipher.suites") or (),
        # Kafka's default, and Jetty's when the prefixed settings leave it out: the peer's name is checked.
        endpoint_identification_algorithm=raw.get(prefix + "ssl.endpoint.identification.algorithm", "https"),
    )
    return RestTls(settings, prefix)


def _client_auth(prefix: str, get: Callable[[str], str | None]) -> str:
    values = {name: get(name) for name in (CLIENT_AUTH, CLIENT_AUTH_ALIAS)}
    given = {name: value.lower() for name, value in values.items() if value is not None}
    for name, value in given.items():
        if value not in CLIENT_AUTH_VALUES:
            raise ConfigException(prefix + name, values[name],
                                  f"String must be one of: {', '.join(CLIENT_AUTH_VALUES)}")
    if len(set(given.values())) > 1:
        raise ConfigException(prefix + CLIENT_AUTH_ALIAS, values[CLIENT_AUTH_ALIAS],
                              f"Contradicts {prefix}{CLIENT_AUTH}={values[CLIENT_AUTH]}; set one of them")
    return next(iter(given.values()), "none")
