"""`--command-config FILE`: a Kafka client properties file, so the client tools work against a secured cluster.

The file is what Kafka's own scripts take (`security.protocol`, `ssl.truststore.location`, `sasl.mechanism`,
`sasl.jaas.config`, ...); librdkafka's names for the same settings (`ssl.ca.location`,
`ssl.certificate.location`, `ssl.key.location`, `sasl.username`, `sasl.password`) are accepted too. Each tool's
client gets the settings in its own words: librdkafka's (`to_librdkafka`), kafka-python's (`to_kafka_python`),
or Moldau's own connection pool's (`to_client_security` for TLS, `to_authenticator` for SASL). Pure functions
apart from reading files.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from typing import Any

from moldau.config.properties import load_properties
from moldau.config.schema import ConfigError
from moldau.net.client import Authenticator
from moldau.security.client_security import TLS_PROTOCOLS, ClientSecurity
from moldau.security.sasl.client import RoundTrip, SaslClientConfig, authenticate
from moldau.security.sasl.jaas import JaasConfigError, parse_jaas_config
from moldau.security.sasl.login import ClientCredentials, Login, TokenCache, login_from_options
from moldau.security.sasl.mechanisms import OAUTHBEARER, PASSWORD_MECHANISMS
from moldau.security.sasl.settings import SASL_PROTOCOLS
from moldau.security.tls import TlsSettings, key_store_pem, load_keystore, trust_store_pem

# Java-client settings librdkafka has no use for (PEM stores need no store password or type).
_JAVA_ONLY = frozenset(("ssl.truststore.type", "ssl.keystore.type", "ssl.truststore.password", "ssl.protocol",
                        "ssl.enabled.protocols", "sasl.jaas.config", "ssl.keystore.password",
                        "ssl.truststore.location", "ssl.keystore.location", "ssl.keystore.certificate.chain",
                        "ssl.keystore.key", "ssl.truststore.certificates"))
# The Java client's OAUTHBEARER settings, which librdkafka gets in its own words (`oauthbearer_librdkafka`).
_JAVA_OAUTH = frozenset(("sasl.login.callback.handler.class", "sasl.oauthbearer.client.credentials.client.id",
                         "sasl.oauthbearer.client.credentials.client.secret", "sasl.login.refresh.window.factor",
                         "sasl.login.refresh.window.jitter", "sasl.login.refresh.min.period.seconds",
                         "sasl.login.refresh.buffer.seconds", "sasl.oauthbearer.jwt.retriever.class"))
_JAAS_OPTION = re.compile(r"""(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)'|([^\s;]+))""")
_ESCAPE = re.compile(r"\\(.)")


def load(path: str) -> dict[str, str]:
    """The properties in `path` (Java properties syntax)."""
    try:
        return load_properties(path)
    except OSError as exc:
        raise ValueError(f"cannot read --command-config {path}: {exc.strerror or exc}") from None


def jaas_credentials(props: Mapping[str, str]) -> tuple[str | None, str | None]:
    """`username` and `password` of `sasl.jaas.config` (PlainLoginModule, ScramLoginModule), if given."""
    options = _jaas_options(props)
    return options.get("username"), options.get("password")


def token_auth(props: Mapping[str, str]) -> bool:
    """Whether the JAAS config logs in with a delegation token (ScramLoginModule's `tokenauth="true"`, KIP-48):
    the username is then the token id and the password its HMAC."""
    return _jaas_options(props).get("tokenauth", "").lower() == "true"


def _jaas_options(props: Mapping[str, str]) -> dict[str, str]:
    options = {}
    for match in _JAAS_OPTION.finditer(props.get("sasl.jaas.config", "")):
        quoted = match[2] if match[2] is not None else match[3]
        options[match[1]] = _ESCAPE.sub(r"\1", quoted) if quoted is not None else match[4]
    return options


def _refuse_token_auth(props: Mapping[str, str], library: str) -> None:
    if token_auth(props) and props.get("security.protocol", "PLAINTEXT").upper() in SASL_PROTOCOLS:
        raise ValueError(f"this command's client ({library}) cannot log in with a delegation token (tokenauth): "
                         "it sends no SCRAM extensions. The commands that send their requests themselves "
                         "(acls, configs, quotas, features, quorum, transactions, client-metrics) can, and so can "
                         "Java clients and kafka-python with a token-aware SCRAM mechanism (docs/security.md)")


def _store_type(props: Mapping[str, str], name: str) -> str:
    """PEM, or JAVA for a JKS or PKCS12 store: the type given, else what the file holds. (A Kafka client's default
    type is JKS, but these tools took PEM files without a type before they read Java stores.)"""
    given = props.get(name, "").strip().upper()
    if given:
        return "PEM" if given == "PEM" else "JAVA"
    location = props.get(name.removesuffix(".type") + ".location")
    if not location:
        return "PEM"
    try:
        with open(location, "rb") as store:
            head = store.read(64)
    except OSError:
        return "PEM"  # the client names the file it cannot read
    return "PEM" if head.lstrip().startswith(b"-----BEGIN") else "JAVA"


def _java_store_settings(props: Mapping[str, str]) -> TlsSettings:
    """The Java stores of the properties, as `moldau.security.tls` reads them (the broker's own code)."""
    return TlsSettings("", keystore_type="JKS", keystore_location=props.get("ssl.keystore.location"),
                       keystore_password=props.get("ssl.keystore.password"),
                       key_password=props.get("ssl.key.password"), truststore_type="JKS",
                       truststore_location=props.get("ssl.truststore.location"),
                       truststore_password=props.get("ssl.truststore.password"))


def _names_java_store(props: Mapping[str, str], store: str) -> bool:
    """Whether `ssl.<store>.location` (store: keystore or truststore) names a JKS or PKCS12 store."""
    return f"ssl.{store}.location" in props and _store_type(props, f"ssl.{store}.type") != "PEM"


def java_trust_pem(props: Mapping[str, str]) -> str | None:
    """The certificates of a JKS or PKCS12 `ssl.truststore.location`, as PEM; None for a PEM trust store or none.
    Raises ValueError naming the config."""
    if not _names_java_store(props, "truststore"):
        return None
    try:
        return trust_store_pem(_java_store_settings(props))
    except ConfigError as exc:
        raise ValueError(str(exc)) from None


def java_key_pem(props: Mapping[str, str], key_password: str | None = None) -> tuple[str, str] | None:
    """The certificate chain and the private key (encrypted under `key_password` when given) of a JKS or PKCS12
    `ssl.keystore.location`, as PEM; None for a PEM key store or none. Raises ValueError naming the config."""
    if not _names_java_store(props, "keystore"):
        return None
    try:
        return key_store_pem(_java_store_settings(props), key_password)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None


def check_stores(props: Mapping[str, str]) -> None:
    """Raise ValueError naming the config when a Java store of the properties cannot be read."""
    java_trust_pem(props)
    java_key_pem(props)


def _files(props: Mapping[str, str]) -> dict[str, str]:
    """CA file, certificate file, key file, key password: from librdkafka's names, else the Java client's."""
    out: dict[str, str] = {}
    ca = props.get("ssl.ca.location") or (props.get("ssl.truststore.location")
                                           if _store_type(props, "ssl.truststore.type") == "PEM" else None)
    if ca:
        out["ca"] = ca
    keystore = props.get("ssl.keystore.location") if _store_type(props, "ssl.keystore.type") == "PEM" else None
    cert = props.get("ssl.certificate.location") or keystore
    key = props.get("ssl.key.location") or keystore
    if cert:
        out["cert"] = cert
    if key:
        out["key"] = key
    if props.get("ssl.key.password"):
        out["password"] = props["ssl.key.password"]
    return out


def _mechanism(props: Mapping[str, str]) -> str:
    return (props.get("sasl.mechanism") or props.get("sasl.mechanisms") or "GSSAPI").upper()


def oauth_login(props: Mapping[str, str]) -> Login:
    """Where OAUTHBEARER tokens come from, per the properties (moldau.security.sasl.login); raises ValueError."""
    text = props.get("sasl.jaas.config")
    try:
        options = parse_jaas_config(text).options if text else {}
    except JaasConfigError as exc:
        raise ValueError(f"sasl.jaas.config: {exc}") from None
    return login_from_options(options, props)


def oauthbearer_librdkafka(props: Mapping[str, str]) -> dict[str, Any]:
    """librdkafka's OAUTHBEARER settings for the login the properties describe: its OIDC client credentials, or
    its unsecured tokens. Raises ValueError for what librdkafka cannot do (a token read from a file)."""
    login = oauth_login(props)
    if isinstance(login, ClientCredentials):
        if login.token_url.lower().startswith("file:"):
            raise ValueError("librdkafka cannot read an OAUTHBEARER token from a file; give a token endpoint")
        return {"sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.token.endpoint.url": login.token_url,
                "sasl.oauthbearer.client.id": login.client_id, "sasl.oauthbearer.client.secret": login.client_secret,
                **({"sasl.oauthbearer.scope": login.scope} if login.scope else {})}
    scope = login.claims.get("scope")
    config = " ".join([f"principal={login.claims['sub']}", f"lifeSeconds={login.lifetime_s}",
                       *([f"scope={','.join(scope)}"] if isinstance(scope, list) and scope else [])])
    return {"enable.sasl.oauthbearer.unsecure.jwt": True, "sasl.oauthbearer.config": config}


def jaas_oauth_librdkafka(text: str) -> dict[str, Any]:
    """librdkafka's OAUTHBEARER settings from an OAuthBearerLoginModule JAAS config alone (a connector's
    `sasl.jaas.config` override): client credentials (the token endpoint is a setting of its own, with the same
    name in both clients) or unsecured tokens. Raises ValueError."""
    try:
        options = parse_jaas_config(text).options
    except JaasConfigError as exc:
        raise ValueError(f"sasl.jaas.config: {exc}") from None
    if "clientId" in options or "clientSecret" in options:
        return {"sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": options.get("clientId", ""),
                "sasl.oauthbearer.client.secret": options.get("clientSecret", ""),
                **({"sasl.oauthbearer.scope": options["scope"]} if options.get("scope") else {})}
    return oauthbearer_librdkafka({"sasl.jaas.config": text})


def to_librdkafka(props: Mapping[str, str]) -> dict[str, Any]:
    """librdkafka settings: its own names pass through, the Java client's are translated."""
    _refuse_token_auth(props, "librdkafka")
    out: dict[str, Any] = {k: v for k, v in props.items() if k not in _JAVA_ONLY | _JAVA_OAUTH}
    if _mechanism(props) == OAUTHBEARER and props.get("security.protocol", "").upper() in SASL_PROTOCOLS:
        out.update(oauthbearer_librdkafka(props))
    files = _files(props)
    for ours, theirs in (("ca", "ssl.ca.location"), ("cert", "ssl.certificate.location"),
                         ("key", "ssl.key.location")):
        if ours in files:
            out[theirs] = files[ours]
    # Java stores become PEM: librdkafka reads PKCS12 key stores but no JKS, and no Java trust store at all.
    trusted = java_trust_pem(props)
    if trusted is not None:
        out["ssl.ca.pem"] = trusted
    key = java_key_pem(props)
    if key is not None:
        out["ssl.certificate.pem"], out["ssl.key.pem"] = key
    username, password = jaas_credentials(props)
    if username is not None and "sasl.username" not in out:
        out["sasl.username"] = username
    if password is not None and "sasl.password" not in out:
        out["sasl.password"] = password
    return out


def to_kafka_python(props: Mapping[str, str]) -> dict[str, Any]:
    """kafka-python's keyword arguments for the same settings."""
    _refuse_token_auth(props, "kafka-python")
    out: dict[str, Any] = {}
    if "security.protocol" in props:
        out["security_protocol"] = props["security.protocol"].upper()
    files = _files(props)
    for ours, theirs in (("ca", "ssl_cafile"), ("cert", "ssl_certfile"), ("key", "ssl_keyfile"),
                         ("password", "ssl_password")):
        if ours in files:
            out[theirs] = files[ours]
    if props.get("ssl.endpoint.identification.algorithm", "https") == "":
        out["ssl_check_hostname"] = False
    if out.get("security_protocol") in TLS_PROTOCOLS and (_names_java_store(props, "truststore")
                                                          or _names_java_store(props, "keystore")):
        # kafka-python reads PEM files only; a context made here carries the Java stores' contents.
        out["ssl_context"] = to_client_security(props).ssl_context
    mechanism = props.get("sasl.mechanism") or props.get("sasl.mechanisms")
    if mechanism:
        out["sasl_mechanism"] = mechanism
    if _mechanism(props) == OAUTHBEARER:
        out["sasl_oauth_token_provider"] = _kafka_python_tokens(TokenCache(oauth_login(props)))
        return out
    username, password = jaas_credentials(props)
    username = props.get("sasl.username", username)
    password = props.get("sasl.password", password)
    if username is not None:
        out["sasl_plain_username"] = username
    if password is not None:
        out["sasl_plain_password"] = password
    return out


def to_client_security(props: Mapping[str, str]) -> ClientSecurity:
    """Security for Moldau's own connections (the `transactions` tool): TLS with the CA and client certificate."""
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in TLS_PROTOCOLS:
        return ClientSecurity(protocol)
    files = _files(props)
    context = ssl.create_default_context(cafile=files.get("ca"), cadata=java_trust_pem(props))
    context.check_hostname = props.get("ssl.endpoint.identification.algorithm", "https") != ""
    if "cert" in files:
        context.load_cert_chain(files["cert"], files.get("key"), files.get("password"))
    elif _names_java_store(props, "keystore"):
        try:
            load_keystore(context, _java_store_settings(props))
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
    return ClientSecurity(protocol, context)


def to_authenticator(props: Mapping[str, str]) -> Authenticator | None:
    """SASL for Moldau's own connections when `security.protocol` is a SASL one, else None.

    Raises ValueError when the properties cannot authenticate (a mechanism Moldau's client lacks, no credentials).
    """
    if props.get("security.protocol", "PLAINTEXT").upper() not in SASL_PROTOCOLS:
        return None
    mechanism = _mechanism(props)
    if mechanism == OAUTHBEARER:
        config = SaslClientConfig.oauthbearer(TokenCache(oauth_login(props)))
    elif mechanism in PASSWORD_MECHANISMS:
        username, password = jaas_credentials(props)
        username = props.get("sasl.username", username)
        password = props.get("sasl.password", password)
        if username is None or password is None:
            raise ValueError("SASL needs a username and password: sasl.jaas.config, or sasl.username and "
                             "sasl.password")
        config = SaslClientConfig(mechanism, username, password, token_auth=token_auth(props))
    else:
        raise ValueError(f"sasl.mechanism {mechanism} is not supported; use one of "
                         f"{', '.join((*PASSWORD_MECHANISMS, OAUTHBEARER))}")

    async def authenticator(send: RoundTrip) -> int:
        return await authenticate(config, send)
    return authenticator


def _kafka_python_tokens(tokens: TokenCache) -> Any:
    """kafka-python's token provider over a token cache: it asks from its own thread, so the blocking form.

    kafka-python's oauth module imports most of kafka-python (about 0.3 s), so only a run that logs in with
    OAUTHBEARER loads it: every command of the CLI imports this module.
    """
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class KafkaPythonTokens(AbstractTokenProvider):  # type: ignore[misc]
        def token(self) -> str:
            return tokens.token_now()

    return KafkaPythonTokens()
