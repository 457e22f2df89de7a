"""The settings of a task's Kafka clients: the worker's `producer.*` / `consumer.*` / `admin.*` configs, then
the connector's `producer.override.*` / `consumer.override.*` / `admin.override.*` as the worker's
`connector.client.config.override.policy` allows (Kafka's `All`, `None` and `Principal` policies, by short or
class name), translated from the Java client's names to librdkafka's where they differ.

Pure apart from `librdkafka_error`, which asks librdkafka itself whether it knows a setting.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from moldau.cli.command_config import jaas_credentials, jaas_oauth_librdkafka, to_librdkafka
from moldau.connect.config import ConfigValue
from moldau.connect.errors import ConfigException
from moldau.security.sasl.jaas import OAUTHBEARER_LOGIN_MODULE
from moldau.security.sasl.mechanisms import OAUTHBEARER

__all__ = [
    "CLIENT_KINDS", "OVERRIDE_POLICY", "OverridePolicy", "connector_settings", "librdkafka_security",
    "max_poll_records", "override_errors", "parse_policy", "translate", "worker_settings",
]

OVERRIDE_POLICY = "connector.client.config.override.policy"
CLIENT_KINDS = ("producer", "consumer", "admin")
MAX_POLL_RECORDS = "max.poll.records"
DEFAULT_MAX_POLL_RECORDS = 500  # Kafka's default; librdkafka has no such setting, the sink runner applies it
POLICY_PACKAGE = "org.apache.kafka.connect.connector.policy."
# Kafka's PrincipalConnectorClientConfigOverridePolicy lets a connector choose only its principal.
JAAS_CONFIG = "sasl.jaas.config"
PRINCIPAL_SETTINGS = frozenset({JAAS_CONFIG, "sasl.mechanism", "security.protocol"})


class OverridePolicy(enum.Enum):
    ALL = "All"
    NONE = "None"
    PRINCIPAL = "Principal"

    def allows(self, setting: str) -> bool:
        return self is OverridePolicy.ALL or (self is OverridePolicy.PRINCIPAL and setting in PRINCIPAL_SETTINGS)


def parse_policy(name: str | None) -> OverridePolicy:
    """`All` (the default), `None` or `Principal`, or Kafka's class name for one of them."""
    text = (name or "All").strip()
    for policy in OverridePolicy:
        if text in (policy.value, f"{POLICY_PACKAGE}{policy.value}ConnectorClientConfigOverridePolicy",
                    f"{policy.value}ConnectorClientConfigOverridePolicy"):
            return policy
    raise ConfigException(OVERRIDE_POLICY, name, "expected All, None or Principal (or Kafka's class name, "
                                                 f"e.g. {POLICY_PACKAGE}AllConnectorClientConfigOverridePolicy)")


# Java client settings librdkafka spells differently: name -> (librdkafka name, value conversion).
RENAMED: dict[str, tuple[str, Any]] = {
    "buffer.memory": ("queue.buffering.max.kbytes", lambda v: str(max(1, int(v) // 1024))),
    "max.request.size": ("message.max.bytes", str),
    "send.buffer.bytes": ("socket.send.buffer.bytes", str),
    "receive.buffer.bytes": ("socket.receive.buffer.bytes", str),
}
# Java settings with no librdkafka equivalent: refused with the reason rather than silently ignored.
REFUSED = {
    "key.serializer": "Connect serializes with the connector's converters",
    "value.serializer": "Connect serializes with the connector's converters",
    "key.deserializer": "Connect deserializes with the connector's converters",
    "value.deserializer": "Connect deserializes with the connector's converters",
    "interceptor.classes": "Java interceptors cannot run in librdkafka clients",
    "partitioner.class": "Java partitioners cannot run in librdkafka clients; use partitioner (e.g. murmur2_random)",
    "default.api.timeout.ms": "librdkafka has no such setting",
}


def translate(kind: str, settings: Mapping[str, Any], source: str) -> dict[str, Any]:
    """librdkafka settings for `settings` given in Java client names (`source` is the config prefix, for
    errors). `max.poll.records` is left out: the sink runner applies it to its consume batches."""
    translated: dict[str, Any] = {}
    for name, value in settings.items():
        if name in REFUSED:
            raise ConfigException(source + name, value, REFUSED[name])
        if kind == "consumer" and name == MAX_POLL_RECORDS:
            continue
        if name == JAAS_CONFIG:
            translated.update(_jaas_credentials(source + name, value))
            continue
        if name in RENAMED:
            target, convert = RENAMED[name]
            try:
                translated[target] = convert(value)
            except ValueError:
                raise ConfigException(source + name, value, "expected a number") from None
        else:
            translated[name] = value
    return translated


# The REST server's own settings among a worker's top-level ssl.* configs: no Kafka client takes them.
REST_SERVER_ONLY = frozenset({"ssl.client.auth", "ssl.client.authentication"})


def librdkafka_security(settings: Mapping[str, str]) -> dict[str, str]:
    """The worker's top-level `security.*`, `ssl.*` and `sasl.*` settings for librdkafka. A worker names its
    stores as Kafka Connect does (`ssl.truststore.location`, `ssl.keystore.location`: JKS, PKCS12 or PEM), which
    librdkafka refuses, and they double as the REST server's HTTPS settings; its clients get the CA, certificate
    and key under librdkafka's names instead (PEM files by name, Java stores read into PEM text), and no setting
    only the REST server uses."""
    # An OAUTHBEARER login is read whole by to_librdkafka (its JAAS options with the token endpoint setting);
    # a password one's JAAS config goes on to `translate`, which refuses one it cannot read.
    oauth = str(settings.get("sasl.mechanism", "")).upper() == OAUTHBEARER
    try:
        translated = to_librdkafka({k: v for k, v in settings.items()
                                    if k not in REST_SERVER_ONLY | (set() if oauth else {JAAS_CONFIG})})
    except ValueError as exc:
        # A Java store that cannot be read is named by its message (`ssl.truststore.location=...: ...`).
        named = str(exc).partition("=")[0] if str(exc).startswith("ssl.") else None
        raise ConfigException(named or ("sasl.jaas.config" if oauth else "security.protocol"), "[hidden]",
                              str(exc)) from None
    if JAAS_CONFIG in settings and not oauth:
        translated[JAAS_CONFIG] = settings[JAAS_CONFIG]
    if translated.get("ssl.endpoint.identification.algorithm") == "":
        translated["ssl.endpoint.identification.algorithm"] = "none"  # Java's empty value; librdkafka's none
    return translated


def _jaas_credentials(key: str, value: Any) -> dict[str, Any]:
    """librdkafka's `sasl.username`/`sasl.password` from a PlainLoginModule or ScramLoginModule JAAS config, or
    its OAUTHBEARER settings from an OAuthBearerLoginModule one."""
    if OAUTHBEARER_LOGIN_MODULE in str(value):
        try:
            return jaas_oauth_librdkafka(str(value))
        except ValueError as exc:
            raise ConfigException(key, "[hidden]", str(exc)) from None
    username, password = jaas_credentials({JAAS_CONFIG: str(value)})
    if username is None or password is None:
        raise ConfigException(key, "[hidden]", "expected a PlainLoginModule or ScramLoginModule with username "
                                               "and password")
    return {"sasl.username": username, "sasl.password": password}


def _prefixed(props: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    return {key[len(prefix):]: value for key, value in props.items() if key.startswith(prefix)}


def worker_settings(kind: str, worker_raw: Mapping[str, str]) -> dict[str, Any]:
    """The worker's `<kind>.*` settings, translated."""
    return translate(kind, _prefixed(worker_raw, kind + "."), kind + ".")


def connector_settings(kind: str, connector_config: Mapping[str, str]) -> dict[str, Any]:
    """The connector's `<kind>.override.*` settings, translated (the policy is checked when it is validated)."""
    return translate(kind, _prefixed(connector_config, f"{kind}.override."), f"{kind}.override.")


def max_poll_records(worker_raw: Mapping[str, str], connector_config: Mapping[str, str]) -> int:
    """`consumer.max.poll.records` (worker) or `consumer.override.max.poll.records` (connector): the most
    records handed to a sink task's `put` at once."""
    raw = connector_config.get("consumer.override." + MAX_POLL_RECORDS,
                               worker_raw.get("consumer." + MAX_POLL_RECORDS))
    if raw is None:
        return DEFAULT_MAX_POLL_RECORDS
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigException("consumer.override." + MAX_POLL_RECORDS
                              if "consumer.override." + MAX_POLL_RECORDS in connector_config
                              else "consumer." + MAX_POLL_RECORDS, raw, "Value must be at least 1")
    return value


def override_errors(policy: OverridePolicy, connector_config: Mapping[str, str]) -> list[ConfigValue]:
    """One ConfigValue per connector client override, with an error if the policy forbids it, the name is
    refused, or librdkafka does not know the setting."""
    results = []
    for kind in CLIENT_KINDS:
        prefix = f"{kind}.override."
        for name, value in _prefixed(connector_config, prefix).items():
            key = prefix + name
            if not policy.allows(name):
                results.append(ConfigValue(key, value, errors=[
                    f"The '{policy.value}' policy does not allow '{name}' to be overridden in the connector "
                    f"configuration ({OVERRIDE_POLICY})."]))
                continue
            try:
                translated = translate(kind, {name: value}, prefix)
                max_poll_records({}, {key: value} if kind == "consumer" and name == MAX_POLL_RECORDS else {})
            except ConfigException as exc:
                results.append(ConfigValue(key, value, errors=[exc.reason]))
                continue
            problem = librdkafka_error(kind, translated)
            results.append(ConfigValue(key, value, errors=[problem] if problem else []))
    return results


def librdkafka_error(kind: str, settings: Mapping[str, Any]) -> str | None:
    """librdkafka's complaint about `settings` (an unknown name or a bad value), or None. The client is made
    without brokers, so nothing is contacted, and closed at once."""
    if not settings:
        return None
    settings = {**settings, "log_level": 0}  # no warning about the missing brokers
    try:
        if kind == "consumer":
            consumer = Consumer({"group.id": "validation", **settings})
            consumer.close()
        elif kind == "producer":
            Producer(dict(settings))
        else:
            AdminClient(dict(settings))
    except (KafkaException, ValueError, TypeError) as exc:
        return str(exc.args[0].str() if isinstance(exc, KafkaException) else exc)
    return None
