"""The REST API's listeners and their TLS settings, as Kafka Connect reads them: several listeners, the
advertised one, `listeners.https.ssl.*` used all or nothing over the worker's `ssl.*`, and errors naming the
config as the worker's file spells it."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from moldau.connect.errors import ConfigException
from moldau.connect.worker.worker_config import WorkerConfig
from tests.support.tls import make_pki

BASE = {"key.converter": "StringConverter", "value.converter": "StringConverter",
        "offset.storage.file.filename": "unused"}


def worker(props: dict[str, str]) -> WorkerConfig:
    return WorkerConfig.parse({**BASE, **props})


def refused(props: dict[str, str]) -> ConfigException:
    with pytest.raises(ConfigException) as raised:
        config = WorkerConfig.parse({**BASE, **props})
        config.rest_tls().server_context()
    return raised.value


def test_several_listeners_and_the_advertised_one() -> None:
    both = worker({"listeners": "https://127.0.0.1:8443, http://127.0.0.1:8083"})
    assert [(u.scheme, u.port) for u in both.rest_listeners()] == [("https", 8443), ("http", 8083)]
    assert both.rest_url() == "http://127.0.0.1:8083/"  # Kafka's default: http when a listener is http
    https = WorkerConfig.parse({**BASE, "listeners": "http://127.0.0.1:8083,https://127.0.0.1:8443",
                                "rest.advertised.listener": "HTTPS", "rest.advertised.host.name": "w1.example"})
    assert https.rest_url() == "https://w1.example:8443/" and https.worker_id() == "w1.example:8443"
    only_https = worker({"listeners": "https://127.0.0.1:8443"})
    assert only_https.rest_url() == "https://127.0.0.1:8443/"


def test_bad_listeners_are_refused_naming_the_config() -> None:
    assert refused({"listeners": "ftp://127.0.0.1:21"}).name == "listeners"
    assert refused({"listeners": "http://127.0.0.1"}).name == "listeners"
    error = refused({"listeners": "http://127.0.0.1:8083", "rest.advertised.listener": "https"})
    assert error.name == "rest.advertised.listener" and "No https listener" in str(error)
    assert refused({"rest.advertised.listener": "ftp"}).name == "rest.advertised.listener"


def test_the_prefixed_settings_are_all_or_nothing(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    top = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.server), "ssl.client.auth": "required",
           "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca)}
    plain = WorkerConfig.parse({**BASE, **top}).rest_tls()
    assert plain.prefix == "" and plain.settings.client_auth == "required"
    assert plain.server_context().verify_mode == ssl.CERT_REQUIRED
    # One listeners.https.* config and the top-level ones are not consulted at all (Kafka Connect's rule).
    prefixed = WorkerConfig.parse({**BASE, **top, "listeners.https.ssl.keystore.type": "PEM",
                                   "listeners.https.ssl.keystore.location": str(pki.server)}).rest_tls()
    assert prefixed.prefix == "listeners.https." and prefixed.settings.client_auth == "none"
    assert prefixed.settings.truststore_location is None
    assert prefixed.server_context().verify_mode == ssl.CERT_NONE
    client = prefixed.client_context()
    assert client.verify_mode == ssl.CERT_REQUIRED and client.check_hostname


def test_tls_errors_name_the_config_as_the_file_spells_it(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    error = refused({"listeners.https.ssl.keystore.location": str(pki.server)})  # type left at Kafka's JKS
    assert error.name == "listeners.https.ssl.keystore.location" and "set the store's type to PEM" in str(error)
    error = refused({"listeners.https.ssl.keystore.type": "BKS", "listeners.https.ssl.keystore.location": "x"})
    assert error.name == "listeners.https.ssl.keystore.type"
    error = refused({"ssl.client.auth": "required", "ssl.keystore.type": "PEM",
                     "ssl.keystore.location": str(pki.server)})
    assert error.name == "ssl.truststore.location"
    assert refused({"listeners.https.ssl.client.auth": "always"}).name == "listeners.https.ssl.client.auth"
    error = refused({"ssl.client.auth": "required", "ssl.client.authentication": "none"})
    assert error.name == "ssl.client.authentication"
    assert refused({"ssl.keystore.type": "PEM"}).name == "ssl.keystore.location"


def test_confluent_s_name_of_client_authentication_is_taken_too() -> None:
    settings = worker({"listeners.https.ssl.client.authentication": "REQUESTED"}).rest_tls().settings
    assert settings.client_auth == "requested"


def test_admin_listeners_unset_empty_or_urls(tmp_path: Path) -> None:
    assert worker({}).admin_listeners() is None  # /admin on the listeners of `listeners`
    assert worker({"admin.listeners": ""}).admin_listeners() == ()  # nowhere
    both = worker({"admin.listeners": "http://127.0.0.1:9000, https://127.0.0.1:9443"}).admin_listeners()
    assert both is not None and [(u.scheme, u.port) for u in both] == [("http", 9000), ("https", 9443)]
    assert refused({"admin.listeners": "ftp://127.0.0.1:21"}).name == "admin.listeners"
    # Their TLS settings: admin.listeners.https.ssl.* all or nothing, never those of listeners.https.
    pki = make_pki(tmp_path)
    only_api = worker({"listeners.https.ssl.keystore.type": "PEM",
                       "listeners.https.ssl.keystore.location": str(pki.server)})
    assert only_api.admin_rest_tls().prefix == "" and only_api.admin_rest_tls().settings.keystore_location is None
    admin = worker({"admin.listeners.https.ssl.keystore.type": "PEM", "ssl.client.auth": "required",
                    "admin.listeners.https.ssl.keystore.location": str(pki.server)}).admin_rest_tls()
    assert admin.prefix == "admin.listeners.https." and admin.settings.client_auth == "none"
    assert admin.settings.keystore_location == str(pki.server)
    error = refused_admin({"admin.listeners.https.ssl.keystore.location": str(pki.server)})
    assert error.name == "admin.listeners.https.ssl.keystore.location" and "PEM" in str(error)


def refused_admin(props: dict[str, str]) -> ConfigException:
    with pytest.raises(ConfigException) as raised:
        WorkerConfig.parse({**BASE, **props}).admin_rest_tls().server_context()
    return raised.value


def test_the_admin_endpoints_are_in_one_app_or_the_other() -> None:
    from starlette.routing import Route

    from moldau.connect.rest import build_admin_app, build_app

    def paths(app: object) -> set[str]:
        return {r.path for r in app.routes if isinstance(r, Route)}  # type: ignore[attr-defined]

    herder = object()
    with_admin = paths(build_app(herder, lambda: None))  # type: ignore[arg-type]
    without = paths(build_app(herder, lambda: None, admin=False))  # type: ignore[arg-type]
    admin_only = paths(build_admin_app(herder, lambda: None))  # type: ignore[arg-type]
    assert admin_only == {"/admin/loggers", "/admin/loggers/{logger}"}
    assert with_admin == without | admin_only and not without & admin_only
