"""OAUTHBEARER's client side for Moldau's own connections: the login the settings describe (Java and librdkafka
names), unsecured tokens, tokens from a real token endpoint over HTTP, renewal at 80 % of a token's lifetime, and
the same settings given to each of the CLI's clients."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import pytest
from kafka.net.sasl.oauth import AbstractTokenProvider

from moldau.cli.command_config import jaas_oauth_librdkafka, to_authenticator, to_kafka_python, to_librdkafka
from moldau.connect.errors import ConfigException
from moldau.connect.worker.client_overrides import librdkafka_security, translate
from moldau.security.sasl.login import (
    ClientCredentials,
    LoginError,
    TokenCache,
    UnsecuredLogin,
    fetch_token,
    login_from_options,
    unsecured_token,
)
from tests.support.oauth import identity_provider

JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"


def claims_of(token: str) -> dict[str, Any]:
    part = token.split(".")[1]
    value: dict[str, Any] = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    return value


def test_client_credentials_from_jaas_or_from_kafka_41_or_librdkafka_names() -> None:
    url = {"sasl.oauthbearer.token.endpoint.url": "https://idp/token"}
    assert login_from_options({"clientId": "a", "clientSecret": "s", "scope": "kafka"}, url) == \
        ClientCredentials("https://idp/token", "a", "s", "kafka")
    assert login_from_options({}, {**url, "sasl.oauthbearer.client.credentials.client.id": "b",
                                   "sasl.oauthbearer.client.credentials.client.secret": "t"}) == \
        ClientCredentials("https://idp/token", "b", "t")
    assert login_from_options({}, {**url, "sasl.oauthbearer.client.id": "c", "sasl.oauthbearer.client.secret": "u",
                                   "sasl.oauthbearer.scope": "x"}) == ClientCredentials("https://idp/token", "c", "u",
                                                                                         "x")


def test_unsecured_logins_from_kafka_jaas_or_librdkafka() -> None:
    login = login_from_options({"unsecuredLoginStringClaim_sub": "alice", "unsecuredLoginListClaim_scope": ",a,b",
                                "unsecuredLoginNumberClaim_level": "3", "unsecuredLoginLifetimeSeconds": "60"}, {})
    assert login == UnsecuredLogin({"sub": "alice", "scope": ["a", "b"], "level": 3}, 60)
    token, expires = unsecured_token(login, 1000.0)
    assert token.endswith(".") and claims_of(token) == {"sub": "alice", "scope": ["a", "b"], "level": 3,
                                                        "iat": 1000, "exp": 1060}
    assert expires == 1060.0
    librdkafka = login_from_options({}, {"enable.sasl.oauthbearer.unsecure.jwt": "true",
                                         "sasl.oauthbearer.config": "principal=bob scope=k,l lifeSeconds=90"})
    assert librdkafka == UnsecuredLogin({"sub": "bob", "scope": ["k", "l"]}, 90)


@pytest.mark.parametrize(("jaas", "settings", "reason"), [
    ({}, {}, "needs a way to get tokens"),
    ({"unsecuredLoginStringClaim_scope": "x"}, {}, "needs a way to get tokens"),
    ({"clientId": "a"}, {"sasl.oauthbearer.token.endpoint.url": "https://idp/t"}, "id and secret"),
    ({}, {"sasl.oauthbearer.token.endpoint.url": "ftp://idp/t"}, "https, http or file"),
    ({"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginLifetimeSeconds": "0"}, {}, "positive"),
    ({"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginNumberClaim_n": "x"}, {}, "whole number"),
    ({}, {"enable.sasl.oauthbearer.unsecure.jwt": "true", "sasl.oauthbearer.config": "principal=a color=red"},
     "unknown item"),
])
def test_logins_that_cannot_work_are_refused(jaas: dict[str, str], settings: dict[str, str], reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        login_from_options(jaas, settings)


def test_tokens_from_a_real_endpoint_and_a_file(tmp_path: Path) -> None:
    with identity_provider() as (idp, url):
        idp.clients["svc"] = ("secret/with:odd&chars", "svc-sub")
        token, expires = fetch_token(ClientCredentials(f"{url}/token", "svc", "secret/with:odd&chars"), 1000.0)
        assert claims_of(token)["sub"] == "svc-sub" and expires == 1000.0 + idp.token_lifetime_s
        with pytest.raises(LoginError, match="HTTP 401 invalid_client"):
            fetch_token(ClientCredentials(f"{url}/token", "svc", "wrong"), 1000.0)
        with pytest.raises(LoginError, match="gave no token"):
            fetch_token(ClientCredentials("http://127.0.0.1:1/token", "svc", "x"), 1000.0)  # nobody listens
        path = tmp_path / "token.jwt"
        path.write_text(token + "\n")
        from_file, file_expiry = fetch_token(ClientCredentials(path.as_uri(), "", ""), 1000.0)
        assert from_file == token and file_expiry == claims_of(token)["exp"]


def test_a_token_is_renewed_once_80_percent_of_its_lifetime_has_passed() -> None:
    now = [1000.0]
    cache = TokenCache(UnsecuredLogin({"sub": "alice"}, 100), now=lambda: now[0])
    first = asyncio.run(cache.token())
    now[0] = 1079.0
    assert cache.token_now() == first
    now[0] = 1080.0
    renewed = cache.token_now()
    assert renewed != first and claims_of(renewed)["iat"] == 1080


# -- the same settings for each of the CLI's clients, and Connect's ----------------------------------------------

CLIENT_CREDENTIALS = {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                      "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
                      "sasl.login.callback.handler.class":
                          "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
                      "sasl.jaas.config": f'{JAAS} clientId="cli" clientSecret="s3cret" scope="kafka";'}


def test_librdkafka_gets_its_own_oidc_settings() -> None:
    out = to_librdkafka(CLIENT_CREDENTIALS)
    assert out == {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                   "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
                   "sasl.oauthbearer.client.id": "cli", "sasl.oauthbearer.client.secret": "s3cret",
                   "sasl.oauthbearer.scope": "kafka"}
    unsecured = to_librdkafka({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                               "sasl.jaas.config": f'{JAAS} unsecuredLoginStringClaim_sub="carol";'})
    assert unsecured["enable.sasl.oauthbearer.unsecure.jwt"] is True
    assert unsecured["sasl.oauthbearer.config"] == "principal=carol lifeSeconds=3600"
    with pytest.raises(ValueError, match="from a file"):
        to_librdkafka({**CLIENT_CREDENTIALS, "sasl.oauthbearer.token.endpoint.url": "file:/run/token"})


def test_kafka_python_and_moldaus_own_client_get_token_sources() -> None:
    provider = to_kafka_python(CLIENT_CREDENTIALS)["sasl_oauth_token_provider"]
    assert isinstance(provider, AbstractTokenProvider)
    assert to_authenticator(CLIENT_CREDENTIALS) is not None
    with pytest.raises(ValueError, match="needs a way to get tokens"):
        to_authenticator({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"})


def test_connect_translates_a_workers_login_and_a_connectors_override() -> None:
    worker = librdkafka_security(CLIENT_CREDENTIALS)
    assert worker["sasl.oauthbearer.method"] == "oidc" and "sasl.jaas.config" not in worker
    assert "sasl.login.callback.handler.class" not in worker
    override = translate("producer", {"sasl.jaas.config": f'{JAAS} clientId="c2" clientSecret="t2";',
                                      "sasl.oauthbearer.token.endpoint.url": "https://idp/token"},
                         "producer.override.")
    assert override == {"sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": "c2",
                        "sasl.oauthbearer.client.secret": "t2",
                        "sasl.oauthbearer.token.endpoint.url": "https://idp/token"}
    assert jaas_oauth_librdkafka(f'{JAAS} unsecuredLoginStringClaim_sub="x";')["sasl.oauthbearer.config"] == \
        "principal=x lifeSeconds=3600"
    with pytest.raises(ConfigException):
        translate("producer", {"sasl.jaas.config": f"{JAAS};"}, "producer.override.")
