import pytest

from moldau.config import BrokerConfig, ConfigError
from moldau.security.sasl.authenticator import SaslListenerConfig
from moldau.security.sasl.settings import sasl_listener_config

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
BASE = {"listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9094"}


def _config(**extra: str) -> BrokerConfig:
    return BrokerConfig({**BASE, **extra})


def _settings(config: BrokerConfig) -> SaslListenerConfig:
    return sasl_listener_config(config, "SASL_PLAINTEXT", lambda m, u: None)


def test_kafka_default_gssapi_is_refused_with_a_hint() -> None:
    with pytest.raises(ConfigError, match=r"sasl\.enabled\.mechanisms"):
        _settings(_config())


def test_per_listener_overrides_win() -> None:
    config = BrokerConfig({**BASE, "sasl.enabled.mechanisms": "GSSAPI,PLAIN",
                           "sasl.jaas.config": JAAS.replace("user_alice", "user_bob"),
                           "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
                           "listener.name.SASL_PLAINTEXT.plain.sasl.jaas.config": JAAS,
                           "listener.name.sasl_plaintext.connections.max.reauth.ms": "5000",
                           "connections.max.reauth.ms": "9000"})
    settings = _settings(config)
    assert settings.mechanisms == ("SCRAM-SHA-512", "PLAIN")
    assert dict(settings.plain_users) == {"admin": "admin-secret", "alice": "alice-secret"}
    assert settings.max_reauth_ms == 5000 and settings.failed_delay_ms == 100


def test_global_jaas_and_unsupported_names_dropped() -> None:
    settings = _settings(_config(**{"sasl.enabled.mechanisms": "GSSAPI,PLAIN", "sasl.jaas.config": JAAS}))
    assert settings.mechanisms == ("PLAIN",) and "alice" in settings.plain_users


def test_plain_without_jaas_or_with_bad_jaas() -> None:
    with pytest.raises(ConfigError, match="no JAAS configuration"):
        _settings(_config(**{"sasl.enabled.mechanisms": "PLAIN"}))
    with pytest.raises(ConfigError, match=r"\[hidden\]"):
        _settings(_config(**{"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": 'M required password="x"'}))
    # SCRAM needs no JAAS users.
    assert _settings(_config(**{"sasl.enabled.mechanisms": "SCRAM-SHA-256"})).plain_users == {}
