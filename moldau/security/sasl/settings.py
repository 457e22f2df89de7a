"""What each SASL listener accepts, read from the broker config with Kafka's names and override rules.

For a listener `L` (lower case in the keys, as Kafka writes them) and a mechanism `M`:

- mechanisms: `listener.name.L.sasl.enabled.mechanisms`, else `sasl.enabled.mechanisms` (and likewise
  `connections.max.reauth.ms` and `connection.failed.authentication.delay.ms`);
- JAAS config: `listener.name.L.M.sasl.jaas.config`, else `listener.name.L.sasl.jaas.config`, else
  `sasl.jaas.config`.

Kafka's default mechanism is GSSAPI (Kerberos), which Moldau does not support: such names are ignored with a
warning, and a SASL listener left with no supported mechanism is a configuration error (the broker refuses to
start) rather than a listener nobody can authenticate on. PLAIN needs a JAAS config with `user_<name>` options
on that listener; SCRAM needs no JAAS users (credentials are in the metadata log).

OAUTHBEARER validates tokens with the handler `listener.name.L.oauthbearer.sasl.server.callback.handler.class`
names, as Kafka does: unset (or Kafka's unsecured validator), unsigned tokens with the JAAS config's
`unsecuredValidator*` options; Kafka's `OAuthBearerValidatorCallbackHandler`, tokens signed by a key of
`sasl.oauthbearer.jwks.endpoint.url` (each `sasl.oauthbearer.*` setting may be given for the listener as
`listener.name.L.oauthbearer.sasl.oauthbearer.*`). Any other class cannot be loaded and is a configuration error.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from moldau.clock import Clock, SystemClock
from moldau.config import BROKER_CONFIGS, BrokerConfig, ConfigError, ConfigValue
from moldau.security.sasl.authenticator import SaslListenerConfig
from moldau.security.sasl.jaas import JaasConfig, JaasConfigError, parse_jaas_config
from moldau.security.sasl.mechanisms import OAUTHBEARER, PLAIN, SERVER_MECHANISMS, CredentialLookup
from moldau.security.sasl.oauthbearer import TokenValidator

if TYPE_CHECKING:
    from moldau.security.sasl.jwks import JwksKeySet

log = logging.getLogger(__name__)

SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})


def listener_override(config: BrokerConfig, listener: str, name: str) -> str | None:
    """`listener.name.<listener>.<name>` as given (listener names match case-insensitively)."""
    wanted = f"listener.name.{listener.lower()}.{name}"
    for key, value in config.unknown.items():
        if key.lower() == wanted.lower():
            return value
    return None


def enabled_mechanisms(config: BrokerConfig, listener: str) -> tuple[str, ...]:
    override = listener_override(config, listener, "sasl.enabled.mechanisms")
    names = ([n.strip() for n in override.split(",") if n.strip()] if override is not None
             else config.sasl_enabled_mechanisms)
    unsupported = [n for n in names if n not in SERVER_MECHANISMS]
    if unsupported:
        log.warning("listener %s: SASL mechanisms %s are not supported and ignored (supported: %s)",
                    listener, ", ".join(unsupported), ", ".join(SERVER_MECHANISMS))
    mechanisms = tuple(dict.fromkeys(n for n in names if n in SERVER_MECHANISMS))
    if not mechanisms:
        raise ConfigError(f"listener {listener} is a SASL listener but enables no supported SASL mechanism "
                          f"({', '.join(names) or 'none'}); set sasl.enabled.mechanisms (or listener.name."
                          f"{listener.lower()}.sasl.enabled.mechanisms) to some of {', '.join(SERVER_MECHANISMS)}",
                          "sasl.enabled.mechanisms")
    return mechanisms


def jaas_config(config: BrokerConfig, listener: str, mechanism: str) -> JaasConfig | None:
    """The JAAS config for a mechanism on a listener, or None when none is given."""
    candidates = (
        (f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config",
         listener_override(config, listener, f"{mechanism.lower()}.sasl.jaas.config")),
        (f"listener.name.{listener.lower()}.sasl.jaas.config",
         listener_override(config, listener, "sasl.jaas.config")),
        ("sasl.jaas.config", config.sasl_jaas_config),
    )
    for name, text in candidates:
        if text is not None:
            try:
                return parse_jaas_config(text)
            except JaasConfigError as exc:
                raise ConfigError(f"Invalid value [hidden] for configuration {name}: {exc}", name) from None
    return None


def plain_users(config: BrokerConfig, listener: str) -> Mapping[str, str]:
    jaas = jaas_config(config, listener, PLAIN)
    if jaas is None:
        raise ConfigError(f"listener {listener} enables SASL PLAIN but has no JAAS configuration: set listener.name."
                          f"{listener.lower()}.plain.sasl.jaas.config (or sasl.jaas.config) with user_<name> options",
                          "sasl.jaas.config")
    users = jaas.users()
    if not users:
        log.warning("listener %s: the PLAIN JAAS configuration names no user_<name>; nobody can log in with PLAIN",
                    listener)
    return users


def sasl_listener_config(config: BrokerConfig, listener: str, scram_lookup: CredentialLookup,
                         controller: bool = False, clock: Clock | None = None,
                         key_sets: dict[str, JwksKeySet] | None = None) -> SaslListenerConfig:
    """Raises ConfigError when the listener's SASL settings cannot work. A controller listener offers PLAIN only:
    SCRAM credentials live in the metadata log, which the controllers replicate among themselves first.

    `key_sets` collects the JWKS key sets OAUTHBEARER validators read, one per URL, for the broker to keep
    fresh."""
    mechanisms = enabled_mechanisms(config, listener)
    if controller:
        if PLAIN not in mechanisms:
            raise ConfigError(f"the controller listener {listener} is a SASL listener, and controllers "
                              f"authenticate with PLAIN only; enable it (listener.name.{listener.lower()}."
                              "sasl.enabled.mechanisms=PLAIN)", "sasl.enabled.mechanisms")
        mechanisms = (PLAIN,)
    users = plain_users(config, listener) if PLAIN in mechanisms else {}
    validator = (token_validator(config, listener, clock or SystemClock(), {} if key_sets is None else key_sets)
                 if OAUTHBEARER in mechanisms else None)
    return SaslListenerConfig(mechanisms, users, scram_lookup,
                              _int_override(config, listener, "connections.max.reauth.ms",
                                            config.connections_max_reauth_ms),
                              _int_override(config, listener, "connection.failed.authentication.delay.ms",
                                            config.connection_failed_authentication_delay_ms),
                              _int_override(config, listener, "sasl.server.max.receive.size",
                                            config.sasl_server_max_receive_size),
                              validator)


OAUTHBEARER_HANDLER = "oauthbearer.sasl.server.callback.handler.class"
UNSECURED_VALIDATOR = ("org.apache.kafka.common.security.oauthbearer.internals.unsecured."
                       "OAuthBearerUnsecuredValidatorCallbackHandler")
# Kafka 3.1 introduced it in the `secured` package; Kafka 3.4 moved it out.
JWKS_VALIDATORS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
                   "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler")


def token_validator(config: BrokerConfig, listener: str, clock: Clock,
                    key_sets: dict[str, JwksKeySet]) -> TokenValidator:
    """How the listener's OAUTHBEARER tokens are checked (see the module docstring); raises ConfigError."""
    # Imported here: PyJWT and the cryptography it loads would cost every process importing this module (each
    # command of the CLI does, through the SASL client) a tenth of a second; only OAUTHBEARER listeners need them.
    from moldau.security.sasl.jwks import JwksKeySet, check_url
    from moldau.security.sasl.tokens import (
        JwksTokenValidator,
        JwtExpectations,
        UnsecuredOptions,
        UnsecuredTokenValidator,
    )

    handler = (listener_override(config, listener, OAUTHBEARER_HANDLER) or "").strip()
    if handler in ("", UNSECURED_VALIDATOR):
        jaas = jaas_config(config, listener, OAUTHBEARER)
        try:
            options = UnsecuredOptions.from_jaas(jaas.options if jaas is not None else {})
        except ValueError as exc:
            raise ConfigError(f"listener {listener}: OAUTHBEARER JAAS config: {exc}", "sasl.jaas.config") from None
        log.warning("listener %s accepts unsecured (unsigned) OAUTHBEARER tokens, Kafka's default for development; "
                    "set listener.name.%s.%s=%s to require signed ones", listener, listener.lower(),
                    OAUTHBEARER_HANDLER, JWKS_VALIDATORS[0])
        return UnsecuredTokenValidator(options, clock)
    if handler not in JWKS_VALIDATORS:
        raise ConfigError(f"listener.name.{listener.lower()}.{OAUTHBEARER_HANDLER}: {handler} cannot be used; "
                          f"Moldau offers Kafka's two OAUTHBEARER validators, {JWKS_VALIDATORS[0]} (signed tokens, "
                          f"with sasl.oauthbearer.jwks.endpoint.url) and {UNSECURED_VALIDATOR}",
                          "sasl.server.callback.handler.class")
    url = _oauth_setting(config, listener, "sasl.oauthbearer.jwks.endpoint.url")
    if not isinstance(url, str) or not url.strip():
        raise ConfigError(f"listener {listener} validates OAUTHBEARER tokens with {handler}, which needs "
                          "sasl.oauthbearer.jwks.endpoint.url", "sasl.oauthbearer.jwks.endpoint.url")
    try:
        url = check_url(url.strip())
    except ValueError as exc:
        raise ConfigError(f"Invalid value {url} for configuration sasl.oauthbearer.jwks.endpoint.url: {exc}",
                          "sasl.oauthbearer.jwks.endpoint.url") from None
    keys = key_sets.get(url)
    if keys is None:
        keys = key_sets[url] = JwksKeySet(
            url, clock, _oauth_int(config, listener, "sasl.oauthbearer.jwks.endpoint.refresh.ms"),
            _oauth_int(config, listener, "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms"),
            _oauth_int(config, listener, "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms"))
    audience = _oauth_setting(config, listener, "sasl.oauthbearer.expected.audience")
    issuer = _oauth_setting(config, listener, "sasl.oauthbearer.expected.issuer")
    expectations = JwtExpectations(
        tuple(audience) if isinstance(audience, tuple | list) else (),
        issuer if isinstance(issuer, str) and issuer else None,
        str(_oauth_setting(config, listener, "sasl.oauthbearer.sub.claim.name") or "sub"),
        str(_oauth_setting(config, listener, "sasl.oauthbearer.scope.claim.name") or "scope"),
        _oauth_int(config, listener, "sasl.oauthbearer.clock.skew.seconds"))
    return JwksTokenValidator(keys, expectations, clock)


def _oauth_setting(config: BrokerConfig, listener: str, name: str) -> ConfigValue:
    """`listener.name.<listener>.oauthbearer.<name>`, else the broker's `<name>`."""
    raw = listener_override(config, listener, f"oauthbearer.{name}")
    return config.value(name) if raw is None else BROKER_CONFIGS[name].parse(raw)


def _oauth_int(config: BrokerConfig, listener: str, name: str) -> int:
    value = _oauth_setting(config, listener, name)
    assert isinstance(value, int)
    return value


def _int_override(config: BrokerConfig, listener: str, name: str, default: int) -> int:
    value = listener_int(config, listener, name)
    return default if value is None else value


def listener_int(config: BrokerConfig, listener: str, name: str) -> int | None:
    """`listener.name.<listener>.<name>` as a whole number of at least 0; None when not set. Raises ConfigError."""
    raw = listener_override(config, listener, name)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        value = -1
    if value < 0:
        raise ConfigError(f"Invalid value {raw} for configuration listener.name.{listener.lower()}.{name}: "
                          "expected a non-negative integer", name)
    return value
