"""``BrokerConfig``: a broker's configuration, from defaults, static settings (file and flags) and dynamic
layers, with typed properties for the values the broker and its subsystems read.

Static broker settings come from a Kafka-style ``server.properties`` file and ``--override key=value``
flags: flags win over the file, the file over built-in defaults. Dynamic settings (IncrementalAlterConfigs)
are layered on top, a per-broker value over a cluster-wide default.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeAlias, TypeVar, overload

from moldau.config.addresses import Listener, Voter, parse_host_port, parse_listener, parse_protocol_map, parse_voter
from moldau.config.broker_defs import BROKER_CONFIGS
from moldau.config.properties import load_properties, parse_overrides
from moldau.config.schema import (
    LONG_MAX,
    ConfigDef,
    ConfigError,
    ConfigSource,
    ConfigType,
    ConfigValue,
    Synonym,
    format_value,
)
from moldau.config.topic_defs import RETENTION, ROLL

logger = logging.getLogger("moldau.config")

# Layers of explicitly set broker values, highest precedence first.
_BROKER_LAYERS = (
    ConfigSource.DYNAMIC_BROKER_CONFIG,
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    ConfigSource.STATIC_BROKER_CONFIG,
)

_Layers: TypeAlias = Mapping[ConfigSource, Mapping[str, ConfigValue]]

_DEFAULTS: Mapping[str, ConfigValue] = {
    name: None if d.default is None else d.parse(d.default) for name, d in BROKER_CONFIGS.items()
}


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    """A config that supplies or could supply a value, as listed in DescribeConfigs."""

    name: str
    value: str | None
    source: ConfigSource



def _known(name: str) -> ConfigDef:
    try:
        return BROKER_CONFIGS[name]
    except KeyError:
        raise KeyError(f"Unknown broker configuration {name}") from None


def _parse_static(props: Mapping[str, str]) -> tuple[dict[str, ConfigValue], dict[str, str]]:
    """Parse known static configs; warn about and keep unknown ones."""
    known: dict[str, ConfigValue] = {}
    unknown: dict[str, str] = {}
    for name, raw in props.items():
        if name in BROKER_CONFIGS:
            known[name] = BROKER_CONFIGS[name].parse(raw)
        elif _listener_override(name) is not None:
            # listener.name.<listener>.<config>: checked like the config it overrides, kept as given.
            _, base = _listener_override(name) or ("", "")
            if base in BROKER_CONFIGS:
                BROKER_CONFIGS[base].parse(raw)
            unknown[name] = raw
        else:
            # Kafka warns rather than fails, so files written for newer or other brokers still load.
            logger.warning("The configuration '%s' was supplied but isn't a known config.%s", name,
                           _broker_name_hint(name))
            unknown[name] = raw
    return known, unknown


def _broker_name_hint(name: str) -> str:
    """For a topic config given to a broker (`file.delete.delay.ms`), the broker config that sets its default
    (`log.segment.delete.delay.ms`): an easy slip, since the two names often differ, and the broker would
    otherwise run on with the default unnoticed."""
    for definition in BROKER_CONFIGS.values():
        if definition.topic_config == name:
            return f" It is a topic config; the broker config for its default is '{definition.name}'."
    return ""


_LISTENER_PREFIX = "listener.name."


def _listener_override(name: str) -> tuple[str, str] | None:
    """``listener.name.<listener>.<config>`` -> (listener, config), or None for any other name."""
    if not name.startswith(_LISTENER_PREFIX):
        return None
    listener, sep, base = name[len(_LISTENER_PREFIX):].partition(".")
    return (listener, base) if sep and listener and base else None


# The configs a listener reloads at runtime (its key and trust stores, `moldau.security.tls`): the only ones that
# may be set dynamically with a listener prefix, `listener.name.<listener>.<config>`, as Kafka's documented way of
# replacing a listener's certificate.
RELOADABLE_TLS_CONFIGS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.key.password", "ssl.keystore.password", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.certificates", "ssl.truststore.password",
})


def _definition(name: str) -> ConfigDef:
    """The definition of a known config, or of the config a `listener.name.<listener>.` name overrides."""
    override = _listener_override(name)
    return BROKER_CONFIGS[override[1] if override is not None else name]


def _parse_dynamic(name: str, raw: str | None) -> ConfigValue:
    """Check that ``name`` may change at runtime, then parse ``raw``."""
    override = _listener_override(name)
    if override is not None and override[1] in BROKER_CONFIGS:
        if override[1] not in RELOADABLE_TLS_CONFIGS:
            raise ConfigError(f"Cannot update configuration {name} dynamically: of a listener's configs, only its "
                              f"key and trust stores are ({', '.join(sorted(RELOADABLE_TLS_CONFIGS))})", name)
        return None if raw is None else BROKER_CONFIGS[override[1]].parse(raw)
    definition = BROKER_CONFIGS.get(name)
    if definition is None:
        raise ConfigError(f"Unknown broker configuration {name}", name)
    if not definition.dynamic:
        raise ConfigError(f"Cannot update configuration {name} dynamically: it is read-only", name)
    return None if raw is None else definition.parse(raw)


def validate_dynamic_broker_configs(configs: Mapping[str, str | None]) -> None:
    """Raise ConfigError unless every name is a dynamic broker config and every value is valid.

    A None value (deleting a dynamic value) is accepted for dynamic configs.
    """
    for name, raw in configs.items():
        _parse_dynamic(name, raw)


_V = TypeVar("_V")


class _Read(Generic[_V]):
    """A typed property of BrokerConfig reading one config, which must be named like the attribute."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __set_name__(self, owner: type[Any], attribute: str) -> None:
        # The naming rule, checked at import: a property is found by its config's name and vice versa.
        if attribute != self.name.replace(".", "_") or self.name not in BROKER_CONFIGS:
            raise TypeError(f"{owner.__name__}.{attribute} cannot read the configuration {self.name}")

    @overload
    def __get__(self, config: None, owner: type[Any]) -> _Read[_V]: ...

    @overload
    def __get__(self, config: BrokerConfig, owner: type[Any]) -> _V: ...

    def __get__(self, config: BrokerConfig | None, owner: type[Any]) -> _Read[_V] | _V:
        return self if config is None else self.read(config)

    def read(self, config: BrokerConfig) -> _V:
        raise NotImplementedError


class _Int(_Read[int]):
    __slots__ = ()

    def read(self, config: BrokerConfig) -> int:
        return config.get_int(self.name)


class _Bool(_Read[bool]):
    __slots__ = ()

    def read(self, config: BrokerConfig) -> bool:
        return config.get_bool(self.name)


class _Float(_Read[float]):
    __slots__ = ()

    def read(self, config: BrokerConfig) -> float:
        return config.get_float(self.name)


class _Str(_Read[str | None]):
    __slots__ = ()

    def read(self, config: BrokerConfig) -> str | None:
        return config.get_str(self.name)


class _List(_Read[list[str]]):
    __slots__ = ()

    def read(self, config: BrokerConfig) -> list[str]:
        return config.get_list(self.name)


class BrokerConfig:
    """An immutable broker configuration: defaults, static settings and dynamic layers.

    Build one with ``BrokerConfig()`` (all defaults), ``from_properties`` or ``load``. Code reads values with
    the typed properties (``node_id``, ``listeners``, ...); the by-name accessors (``value``, ``get_*``) serve
    them and code that walks the tables. ``with_dynamic`` returns a copy with runtime changes applied.
    """

    __slots__ = ("_layers", "_unknown")

    _layers: _Layers
    _unknown: Mapping[str, str]

    def __init__(self, static: Mapping[str, str] | None = None) -> None:
        """Build from static settings (file and flags already merged); raise ConfigError if invalid."""
        known, unknown = _parse_static(static or {})
        self._layers = {ConfigSource.STATIC_BROKER_CONFIG: known}
        self._unknown = unknown
        self._check_consistency()

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> BrokerConfig:
        """Build from a dict of raw strings with Kafka's names."""
        return cls(props)

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None, overrides: Iterable[str] = ()) -> BrokerConfig:
        """Build from an optional properties file and ``key=value`` overrides, which win over the file."""
        props = load_properties(path) if path is not None else {}
        props.update(parse_overrides(overrides))
        return cls(props)

    @classmethod
    def _from_layers(cls, layers: _Layers, unknown: Mapping[str, str]) -> BrokerConfig:
        config = cls.__new__(cls)
        config._layers = layers
        config._unknown = unknown
        config._check_consistency()
        return config

    def _check_consistency(self) -> None:
        """Rules spanning several configs, which single-value validators cannot see."""
        protocols = self.listener_security_protocol_map
        controllers = set(self.controller_listener_names)
        names = {listener.name for listener in self.listeners}
        unmapped = sorted(names - protocols.keys() - controllers)
        if unmapped:
            raise ConfigError(
                f"Listener {unmapped[0]} has no security protocol in listener.security.protocol.map",
                "listener.security.protocol.map",
            )
        by_protocol = self.source("security.inter.broker.protocol") != ConfigSource.DEFAULT_CONFIG
        if by_protocol and self.value("inter.broker.listener.name"):
            raise ConfigError("Only one of inter.broker.listener.name and security.inter.broker.protocol should be "
                              "set.", "security.inter.broker.protocol")
        inter_broker = self.inter_broker_listener_name
        if inter_broker is not None and inter_broker not in names - controllers:
            name = "security.inter.broker.protocol" if by_protocol else "inter.broker.listener.name"
            raise ConfigError(f"{name} {inter_broker} is not one of the non-controller listeners"
                              + (" (it names the listener of that name)" if by_protocol else ""), name)
        for listener in self.advertised_listeners:
            if listener.name not in names:
                raise ConfigError(f"Advertised listener {listener.name} is not one of the listeners",
                                  "advertised.listeners")
        if self.group_share_max_share_sessions < self.group_share_max_size:
            # Else a share group could not have all its members fetching from one broker.
            raise ConfigError("group.share.max.share.sessions must be greater than or equal to "
                              "group.share.max.size", "group.share.max.share.sessions")
        if self.replica_fetch_wait_max_ms > self.replica_lag_time_max_ms:
            # A follower waiting at its leader longer than the lag allowed would leave the ISR while idle.
            raise ConfigError("replica.fetch.wait.max.ms should always be less than or equal to "
                              "replica.lag.time.max.ms to prevent frequent changes in ISR", "replica.fetch.wait.max.ms")

    # -- generic access ---------------------------------------------------------------------------------

    def resolve(self, name: str) -> tuple[ConfigValue, ConfigSource]:
        """The effective value of a known config and where it comes from. Raises KeyError if unknown."""
        _known(name)
        for source in _BROKER_LAYERS:
            layer = self._layers.get(source, {})
            if name in layer:
                return layer[name], source
        return _DEFAULTS[name], ConfigSource.DEFAULT_CONFIG

    def value(self, name: str) -> ConfigValue:
        """The effective parsed value of a known config (None if it has none)."""
        return self.resolve(name)[0]

    def source(self, name: str) -> ConfigSource:
        return self.resolve(name)[1]

    def get_int(self, name: str) -> int:
        """An INT, SHORT or LONG config; raises TypeError for other types or when it has no value."""
        value = self.get_optional_int(name)
        if value is None:
            raise TypeError(f"Configuration {name} has no value")
        return value

    def get_optional_int(self, name: str) -> int | None:
        value = self._typed(name, ConfigType.INT, ConfigType.SHORT, ConfigType.LONG)
        assert value is None or isinstance(value, int)
        return value

    def get_float(self, name: str) -> float:
        value = self._typed(name, ConfigType.DOUBLE)
        assert isinstance(value, float)
        return value

    def get_bool(self, name: str) -> bool:
        value = self._typed(name, ConfigType.BOOLEAN)
        assert isinstance(value, bool)
        return value

    def get_str(self, name: str) -> str | None:
        """A STRING, CLASS or PASSWORD config."""
        value = self._typed(name, ConfigType.STRING, ConfigType.CLASS, ConfigType.PASSWORD)
        assert value is None or isinstance(value, str)
        return value

    def get_list(self, name: str) -> list[str]:
        """A LIST config; an unset list is empty."""
        value = self._typed(name, ConfigType.LIST)
        assert value is None or isinstance(value, tuple)
        return list(value or ())

    def _typed(self, name: str, *types: ConfigType) -> ConfigValue:
        definition = _known(name)
        if definition.type not in types:
            raise TypeError(f"Configuration {name} is of type {definition.type.name}")
        return self.value(name)

    @property
    def unknown(self) -> Mapping[str, str]:
        """Configs that were supplied but are not known, kept as given."""
        return dict(self._unknown)

    def dump(self) -> dict[str, str | None]:
        """Every effective value as a string, including unknown configs, sorted by name; passwords hidden."""
        values: dict[str, str | None] = dict(self._unknown)
        for name in values:  # listener.name.<listener>.<config> of a password config is hidden like it
            base = (_listener_override(name) or ("", ""))[1]
            if base in BROKER_CONFIGS and BROKER_CONFIGS[base].sensitive:
                values[name] = "[hidden]"
        for name, definition in BROKER_CONFIGS.items():
            value = format_value(self.value(name))
            values[name] = "[hidden]" if definition.sensitive and value is not None else value
        return dict(sorted(values.items()))

    def __repr__(self) -> str:
        # Passwords never reach a log line or a traceback, not even through repr.
        explicit = {name: "[hidden]" if _definition(name).sensitive else format_value(value)
                    for layer in self._layers.values() for name, value in layer.items()}
        return f"BrokerConfig({explicit!r})"

    # -- dynamic configs --------------------------------------------------------------------------------

    def with_dynamic(self, updates: Mapping[str, str | None], *, per_broker: bool = False) -> BrokerConfig:
        """A copy with dynamic values set (None removes one) in the cluster-wide or per-broker layer.

        Raises ConfigError for unknown or read-only names and invalid values; ``self`` is unchanged.
        """
        source = ConfigSource.DYNAMIC_BROKER_CONFIG if per_broker else ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        layer = dict(self._layers.get(source, {}))
        for name, raw in updates.items():
            value = _parse_dynamic(name, raw)
            if raw is None:
                layer.pop(name, None)
            else:
                layer[name] = value
        return BrokerConfig._from_layers({**self._layers, source: layer}, self._unknown)

    def dynamic_configs(self, *, per_broker: bool = False) -> dict[str, str]:
        """The dynamic values of one layer as strings, e.g. to persist them."""
        source = ConfigSource.DYNAMIC_BROKER_CONFIG if per_broker else ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        return {name: format_value(value) or "" for name, value in self._layers.get(source, {}).items()}

    # -- synonyms ---------------------------------------------------------------------------------------

    def synonyms(self, name: str) -> list[ConfigSynonym]:
        """Every value ``name`` has, highest precedence first: dynamic, static, then the default."""
        definition = _known(name)
        found: list[tuple[ConfigValue, ConfigSource]] = [
            (self._layers[source][name], source)
            for source in _BROKER_LAYERS
            if name in self._layers.get(source, {})
        ]
        if _DEFAULTS[name] is not None:
            found.append((_DEFAULTS[name], ConfigSource.DEFAULT_CONFIG))
        return [
            ConfigSynonym(name, None if definition.sensitive else format_value(value), source)
            for value, source in found
        ]

    def resolve_synonyms(self, synonyms: Iterable[Synonym]) -> tuple[ConfigValue, ConfigSource]:
        """The value of the first synonym that has one, converted to milliseconds where it has a unit.

        This is how ``log.retention.ms`` wins over ``log.retention.minutes`` over ``log.retention.hours``.
        A negative time means no limit and is reported as -1.
        """
        for synonym in synonyms:
            value, source = self.resolve(synonym.name)
            if value is not None:
                return _scale(value, synonym.unit_ms), source
        return None, ConfigSource.DEFAULT_CONFIG

    # -- typed properties -------------------------------------------------------------------------------
    # The one way code outside this package reads a broker config: a typed property named like the config
    # (dots become underscores). A plain read is one line, ``name_ms = _Int("name.ms")``; values derived from
    # several configs or parsed further are ordinary properties. Subsystems gather theirs in a settings class
    # built by ``from_config`` (see moldau.config.settings).

    # Identity and network.
    node_id = _Int("node.id")
    process_roles = _List("process.roles")
    cluster_id = _Str("cluster.id")
    broker_rack = _Str("broker.rack")
    schema_registry_listeners = _Str("schema.registry.listeners")
    console_listeners = _Str("console.listeners")
    console_connect_urls = _List("console.connect.urls")
    console_max_connections = _Int("console.max.connections")
    console_request_header_timeout_ms = _Int("console.request.header.timeout.ms")
    console_max_request_bytes = _Int("console.max.request.bytes")
    schema_registry_authentication_method = _Str("schema.registry.authentication.method")
    schema_registry_authentication_realm = _Str("schema.registry.authentication.realm")

    @property
    def listeners(self) -> list[Listener]:
        return [parse_listener(item) for item in self.get_list("listeners")]

    @property
    def advertised_listeners(self) -> list[Listener]:
        """The advertised listeners, or the listeners when ``advertised.listeners`` is not set."""
        if self.value("advertised.listeners") is None:
            return self.listeners
        return [parse_listener(item) for item in self.get_list("advertised.listeners")]

    @property
    def listener_security_protocol_map(self) -> dict[str, str]:
        return parse_protocol_map(self.get_list("listener.security.protocol.map"))

    @property
    def inter_broker_listener_name(self) -> str | None:
        """`inter.broker.listener.name`, else the listener named after `security.inter.broker.protocol` when that
        is set (Kafka's older way to choose it); None when neither is."""
        value = self.value("inter.broker.listener.name")
        if value:
            return str(value).upper()
        if self.source("security.inter.broker.protocol") != ConfigSource.DEFAULT_CONFIG:
            return str(self.value("security.inter.broker.protocol")).upper()
        return None

    @property
    def controller_listener_names(self) -> list[str]:
        return [name.upper() for name in self.get_list("controller.listener.names")]

    def security_protocol(self, listener_name: str) -> str:
        """The security protocol of a listener; unmapped (controller) listeners use PLAINTEXT."""
        protocols = self.listener_security_protocol_map
        return protocols.get(listener_name.upper(), "PLAINTEXT")

    def listener_value(self, listener_name: str, name: str) -> ConfigValue:
        """A config as one listener sees it: ``listener.name.<listener>.<name>`` (the listener's name in lower
        case, as Kafka writes it), from whichever layer has it (per-broker dynamic, cluster-wide dynamic, static),
        wins over ``name`` itself, as Kafka merges the layers first and then lets prefixed names override."""
        definition = _known(name)
        prefixed = f"{_LISTENER_PREFIX}{listener_name.lower()}.{name}"
        for source in _BROKER_LAYERS:
            layer = self._layers.get(source, {})
            if prefixed in layer:
                return layer[prefixed]
        raw = self._unknown.get(prefixed)
        return self.value(name) if raw is None else definition.parse(raw)

    def dynamic_listener_configs(self) -> dict[str, tuple[ConfigValue, ConfigSource]]:
        """The `listener.name.<listener>.<config>` values set dynamically, with their layer (per-broker first)."""
        found: dict[str, tuple[ConfigValue, ConfigSource]] = {}
        for source in _BROKER_LAYERS[:2]:
            for name, value in self._layers.get(source, {}).items():
                if _listener_override(name) is not None:
                    found.setdefault(name, (value, source))
        return found

    @property
    def controller_quorum_voters(self) -> list[Voter]:
        return [parse_voter(item) for item in self.get_list("controller.quorum.voters")]

    @property
    def controller_quorum_bootstrap_servers(self) -> list[tuple[str, int]]:
        return [parse_host_port(item) for item in self.get_list("controller.quorum.bootstrap.servers")]

    socket_request_max_bytes = _Int("socket.request.max.bytes")
    socket_listen_backlog_size = _Int("socket.listen.backlog.size")
    socket_send_buffer_bytes = _Int("socket.send.buffer.bytes")
    socket_receive_buffer_bytes = _Int("socket.receive.buffer.bytes")
    queued_max_requests = _Int("queued.max.requests")
    queued_max_request_bytes = _Int("queued.max.request.bytes")
    max_request_partition_size_limit = _Int("max.request.partition.size.limit")
    telemetry_max_bytes = _Int("telemetry.max.bytes")
    connections_max_idle_ms = _Int("connections.max.idle.ms")
    socket_request_read_timeout_ms = _Int("socket.request.read.timeout.ms")
    fetch_zero_copy_enable = _Bool("fetch.zero.copy.enable")
    network_idle_poll_us = _Int("network.idle.poll.us")
    log_writeback_interval_bytes = _Int("log.writeback.interval.bytes")
    log_drop_behind_bytes = _Int("log.drop.behind.bytes")
    quota_window_num = _Int("quota.window.num")
    quota_window_size_seconds = _Int("quota.window.size.seconds")
    controller_quota_window_num = _Int("controller.quota.window.num")
    controller_quota_window_size_seconds = _Int("controller.quota.window.size.seconds")
    max_connections = _Int("max.connections")
    max_connections_per_ip = _Int("max.connections.per.ip")

    @property
    def max_connections_per_ip_overrides(self) -> str:
        return str(self.value("max.connections.per.ip.overrides") or "")

    # The metadata quorum and broker liveness.
    controller_quorum_election_timeout_ms = _Int("controller.quorum.election.timeout.ms")
    controller_quorum_election_backoff_max_ms = _Int("controller.quorum.election.backoff.max.ms")
    controller_quorum_fetch_timeout_ms = _Int("controller.quorum.fetch.timeout.ms")
    controller_quorum_fetch_interval_ms = _Int("controller.quorum.fetch.interval.ms")
    broker_heartbeat_interval_ms = _Int("broker.heartbeat.interval.ms")
    log_dir_failure_timeout_ms = _Int("log.dir.failure.timeout.ms")
    broker_session_timeout_ms = _Int("broker.session.timeout.ms")
    metadata_log_max_record_bytes_between_snapshots = _Int("metadata.log.max.record.bytes.between.snapshots")
    metadata_log_max_snapshot_interval_ms = _Int("metadata.log.max.snapshot.interval.ms")
    controller_quorum_request_timeout_ms = _Int("controller.quorum.request.timeout.ms")
    controller_quorum_retry_backoff_ms = _Int("controller.quorum.retry.backoff.ms")
    controlled_shutdown_enable = _Bool("controlled.shutdown.enable")

    # Topics.
    num_partitions = _Int("num.partitions")
    default_replication_factor = _Int("default.replication.factor")
    auto_create_topics_enable = _Bool("auto.create.topics.enable")
    delete_topic_enable = _Bool("delete.topic.enable")

    # Authorization (ACLs).
    @property
    def authorizer_class_name(self) -> str:
        return self.get_str("authorizer.class.name") or ""

    @property
    def super_users(self) -> list[str]:
        """``super.users``: principals separated by semicolons."""
        return [p.strip() for p in (self.get_str("super.users") or "").split(";") if p.strip()]

    allow_everyone_if_no_acl_found = _Bool("allow.everyone.if.no.acl.found")

    @property
    def auto_create_topics(self) -> bool:
        """Short name for ``auto_create_topics_enable``."""
        return self.auto_create_topics_enable

    # Log storage.
    @property
    def log_dirs(self) -> list[str]:
        """``log.dirs`` if set, else ``[log.dir]``."""
        if self.value("log.dirs") is not None:
            return self.get_list("log.dirs")
        return [self.get_str("log.dir") or ""]

    @property
    def metadata_log_parent(self) -> str:
        """The directory the metadata log's directory is in: ``metadata.log.dir`` if set, else the first log dir."""
        return self.get_str("metadata.log.dir") or self.log_dirs[0]

    @property
    def log_retention_ms(self) -> int:
        """Resolved from log.retention.ms, .minutes, .hours (first set wins); -1 means no limit."""
        return _as_int(self.resolve_synonyms(RETENTION)[0])

    @property
    def log_roll_ms(self) -> int:
        """Resolved from log.roll.ms and log.roll.hours."""
        return _as_int(self.resolve_synonyms(ROLL)[0])

    log_retention_bytes = _Int("log.retention.bytes")
    log_segment_bytes = _Int("log.segment.bytes")
    log_retention_check_interval_ms = _Int("log.retention.check.interval.ms")
    log_cleanup_policy = _List("log.cleanup.policy")
    log_cleaner_dedupe_buffer_size = _Int("log.cleaner.dedupe.buffer.size")
    log_cleaner_enable = _Bool("log.cleaner.enable")
    log_cleaner_threads = _Int("log.cleaner.threads")
    log_cleaner_backoff_ms = _Int("log.cleaner.backoff.ms")
    log_cleaner_io_max_bytes_per_second = _Float("log.cleaner.io.max.bytes.per.second")
    log_cleaner_io_buffer_size = _Int("log.cleaner.io.buffer.size")
    log_cleaner_io_buffer_load_factor = _Float("log.cleaner.io.buffer.load.factor")
    message_max_bytes = _Int("message.max.bytes")

    # Replication.
    min_insync_replicas = _Int("min.insync.replicas")
    unclean_leader_election_enable = _Bool("unclean.leader.election.enable")
    replica_lag_time_max_ms = _Int("replica.lag.time.max.ms")
    replica_alter_log_dirs_io_max_bytes_per_second = _Int("replica.alter.log.dirs.io.max.bytes.per.second")
    leader_replication_throttled_rate = _Int("leader.replication.throttled.rate")
    follower_replication_throttled_rate = _Int("follower.replication.throttled.rate")
    replication_quota_window_num = _Int("replication.quota.window.num")
    replication_quota_window_size_seconds = _Int("replication.quota.window.size.seconds")
    replica_fetch_wait_max_ms = _Int("replica.fetch.wait.max.ms")
    replica_fetch_min_bytes = _Int("replica.fetch.min.bytes")
    replica_fetch_max_bytes = _Int("replica.fetch.max.bytes")
    replica_fetch_response_max_bytes = _Int("replica.fetch.response.max.bytes")
    replica_fetch_backoff_ms = _Int("replica.fetch.backoff.ms")
    num_replica_fetchers = _Int("num.replica.fetchers")
    replica_selector_class = _Str("replica.selector.class")
    replica_socket_timeout_ms = _Int("replica.socket.timeout.ms")
    replica_socket_receive_buffer_bytes = _Int("replica.socket.receive.buffer.bytes")
    request_timeout_ms = _Int("request.timeout.ms")
    controller_socket_timeout_ms = _Int("controller.socket.timeout.ms")
    socket_connection_setup_timeout_ms = _Int("socket.connection.setup.timeout.ms")
    socket_connection_setup_timeout_max_ms = _Int("socket.connection.setup.timeout.max.ms")
    max_incremental_fetch_session_cache_slots = _Int("max.incremental.fetch.session.cache.slots")
    min_incremental_fetch_session_eviction_ms = _Int("min.incremental.fetch.session.eviction.ms")
    auto_leader_rebalance_enable = _Bool("auto.leader.rebalance.enable")
    leader_imbalance_check_interval_seconds = _Int("leader.imbalance.check.interval.seconds")
    leader_imbalance_per_broker_percentage = _Int("leader.imbalance.per.broker.percentage")

    # Consumer groups.
    offsets_topic_num_partitions = _Int("offsets.topic.num.partitions")
    offsets_topic_replication_factor = _Int("offsets.topic.replication.factor")
    offsets_commit_timeout_ms = _Int("offsets.commit.timeout.ms")
    offsets_topic_compression_codec = _Int("offsets.topic.compression.codec")
    offsets_load_buffer_size = _Int("offsets.load.buffer.size")
    offsets_retention_check_interval_ms = _Int("offsets.retention.check.interval.ms")
    offset_metadata_max_bytes = _Int("offset.metadata.max.bytes")

    @property
    def offsets_retention_ms(self) -> int:
        """``offsets.retention.minutes`` in milliseconds."""
        return self.get_int("offsets.retention.minutes") * 60_000

    group_initial_rebalance_delay_ms = _Int("group.initial.rebalance.delay.ms")
    group_min_session_timeout_ms = _Int("group.min.session.timeout.ms")
    group_max_session_timeout_ms = _Int("group.max.session.timeout.ms")
    group_max_size = _Int("group.max.size")
    group_consumer_heartbeat_interval_ms = _Int("group.consumer.heartbeat.interval.ms")
    group_consumer_session_timeout_ms = _Int("group.consumer.session.timeout.ms")
    group_consumer_assignors = _List("group.consumer.assignors")
    group_consumer_max_size = _Int("group.consumer.max.size")
    group_consumer_migration_policy = _Str("group.consumer.migration.policy")
    group_share_heartbeat_interval_ms = _Int("group.share.heartbeat.interval.ms")
    group_share_session_timeout_ms = _Int("group.share.session.timeout.ms")
    group_share_max_size = _Int("group.share.max.size")
    group_share_max_share_sessions = _Int("group.share.max.share.sessions")
    group_share_record_lock_duration_ms = _Int("group.share.record.lock.duration.ms")
    group_share_delivery_count_limit = _Int("group.share.delivery.count.limit")
    group_share_partition_max_record_locks = _Int("group.share.partition.max.record.locks")
    share_auto_offset_reset = _Str("share.auto.offset.reset")
    share_coordinator_state_topic_num_partitions = _Int("share.coordinator.state.topic.num.partitions")
    share_coordinator_state_topic_replication_factor = _Int("share.coordinator.state.topic.replication.factor")
    share_coordinator_state_topic_min_isr = _Int("share.coordinator.state.topic.min.isr")
    share_coordinator_state_topic_compression_codec = _Int("share.coordinator.state.topic.compression.codec")
    share_coordinator_load_buffer_size = _Int("share.coordinator.load.buffer.size")
    share_coordinator_append_linger_ms = _Int("share.coordinator.append.linger.ms")
    share_coordinator_snapshot_update_records_per_snapshot = _Int(
        "share.coordinator.snapshot.update.records.per.snapshot")
    share_isolation_level = _Str("share.isolation.level")

    # Transactions and producer state.
    transactional_id_expiration_ms = _Int("transactional.id.expiration.ms")
    transaction_max_timeout_ms = _Int("transaction.max.timeout.ms")
    transaction_state_log_num_partitions = _Int("transaction.state.log.num.partitions")
    transaction_state_log_replication_factor = _Int("transaction.state.log.replication.factor")
    transaction_state_log_min_isr = _Int("transaction.state.log.min.isr")
    transaction_state_log_segment_bytes = _Int("transaction.state.log.segment.bytes")
    transaction_state_log_load_buffer_size = _Int("transaction.state.log.load.buffer.size")
    transaction_abort_timed_out_transaction_cleanup_interval_ms = _Int(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms")
    transaction_remove_expired_transaction_cleanup_interval_ms = _Int(
        "transaction.remove.expired.transaction.cleanup.interval.ms")
    transaction_partition_verification_enable = _Bool("transaction.partition.verification.enable")
    producer_id_expiration_ms = _Int("producer.id.expiration.ms")
    # SASL (per-listener overrides are read by moldau.security.sasl.settings).
    sasl_enabled_mechanisms = _List("sasl.enabled.mechanisms")
    sasl_jaas_config = _Str("sasl.jaas.config")
    sasl_mechanism_inter_broker_protocol = _Str("sasl.mechanism.inter.broker.protocol")
    sasl_mechanism_controller_protocol = _Str("sasl.mechanism.controller.protocol")
    connections_max_reauth_ms = _Int("connections.max.reauth.ms")
    connection_failed_authentication_delay_ms = _Int("connection.failed.authentication.delay.ms")
    sasl_server_max_receive_size = _Int("sasl.server.max.receive.size")
    delegation_token_secret_key = _Str("delegation.token.secret.key")
    delegation_token_max_lifetime_ms = _Int("delegation.token.max.lifetime.ms")
    delegation_token_expiry_time_ms = _Int("delegation.token.expiry.time.ms")
    delegation_token_expiry_check_interval_ms = _Int("delegation.token.expiry.check.interval.ms")
    fetch_max_bytes = _Int("fetch.max.bytes")
    max_connection_creation_rate = _Int("max.connection.creation.rate")
    group_coordinator_rebalance_protocols = _List("group.coordinator.rebalance.protocols")
    group_coordinator_append_linger_ms = _Int("group.coordinator.append.linger.ms")
    initial_broker_registration_timeout_ms = _Int("initial.broker.registration.timeout.ms")
    offsets_topic_segment_bytes = _Int("offsets.topic.segment.bytes")
    share_coordinator_state_topic_segment_bytes = _Int("share.coordinator.state.topic.segment.bytes")


def _scale(value: ConfigValue, unit_ms: int) -> ConfigValue:
    if unit_ms == 1:
        return value
    millis = _as_int(value) * unit_ms
    # Kafka treats any negative time as unlimited (-1); cap to a Java long like Kafka's arithmetic would.
    return -1 if millis < 0 else min(millis, LONG_MAX)


def _as_int(value: ConfigValue) -> int:
    assert isinstance(value, int) and not isinstance(value, bool), value
    return value

