"""Worker and connector configuration: Kafka Connect's worker config names, the configs every connector
takes (`name`, `connector.class`, `tasks.max`, converters, `transforms`, `predicates`, `errors.*`), and
reading connector configs from `.properties` or `.json` files. Pure apart from reading files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from moldau.config.properties import load_properties
from moldau.connect.config import ConfigDef, ConfigType, Importance, NonEmptyString, Range, ValidString
from moldau.connect.distributed.request_signing import DEFAULT_ALGORITHM, MIN_KEY_BITS, algorithm_error
from moldau.connect.error_policy import CONFIG_DEF as ERRORS_CONFIG_DEF
from moldau.connect.errors import ConfigException
from moldau.connect.worker.client_overrides import (
    OVERRIDE_POLICY,
    librdkafka_security,
    parse_policy,
    translate,
    worker_settings,
)
from moldau.connect.worker.rest_listeners import (
    ADMIN_HTTPS_PREFIX,
    ADMIN_LISTENERS,
    ADVERTISED_LISTENER,
    LISTENERS,
    RestTls,
    advertised_listener,
    parse_admin_listeners,
    parse_listeners,
    rest_tls,
    url_of,
)
from moldau.net.http_server import ListenerUrl

__all__ = [
    "CONNECTOR_CLASS", "CONNECT_PROTOCOL", "EXACTLY_ONCE_SOURCE_SUPPORT", "EXACTLY_ONCE_SUPPORT", "KEY_ALGORITHM",
    "KEY_SIZE", "KEY_TTL_MS", "NAME", "OFFSETS_STORAGE_TOPIC", "SIGNATURE_ALGORITHM", "TASKS_MAX",
    "TRANSACTION_BOUNDARY", "TRANSACTION_BOUNDARY_INTERVAL_MS", "VERIFICATION_ALGORITHMS", "WorkerConfig",
    "connector_config_def", "exactly_once_source", "load_connector_file", "prefixed", "sink_config_def",
    "source_config_def", "worker_config_def",
]

NAME = "name"
CONNECTOR_CLASS = "connector.class"
TASKS_MAX = "tasks.max"
EXACTLY_ONCE_SOURCE_SUPPORT = "exactly.once.source.support"
EXACTLY_ONCE_SUPPORT = "exactly.once.support"
TRANSACTION_BOUNDARY = "transaction.boundary"
TOPIC_TRACKING = "topic.tracking.enable"
TOPIC_TRACKING_RESET = "topic.tracking.allow.reset"
TRANSACTION_BOUNDARY_INTERVAL_MS = "transaction.boundary.interval.ms"
OFFSETS_STORAGE_TOPIC = "offsets.storage.topic"
DEFAULT_LISTENER = "http://0.0.0.0:8083"
CONNECT_PROTOCOL = "connect.protocol"
KEY_TTL_MS = "inter.worker.key.ttl.ms"
KEY_ALGORITHM = "inter.worker.key.generation.algorithm"
KEY_SIZE = "inter.worker.key.size"
SIGNATURE_ALGORITHM = "inter.worker.signature.algorithm"
VERIFICATION_ALGORITHMS = "inter.worker.verification.algorithms"


def worker_config_def(standalone: bool) -> ConfigDef:
    definition = (
        ConfigDef()
        .define("bootstrap.servers", ConfigType.LIST, "localhost:9092", Importance.HIGH,
                "The Kafka (Moldau) brokers to connect to.")
        .define("key.converter", ConfigType.CLASS, importance=Importance.HIGH,
                documentation="The converter of record keys (e.g. org.apache.kafka.connect.storage.StringConverter)")
        .define("value.converter", ConfigType.CLASS, importance=Importance.HIGH,
                documentation="The converter of record values")
        .define("header.converter", ConfigType.CLASS, "org.apache.kafka.connect.storage.SimpleHeaderConverter",
                Importance.LOW, "The converter of header values")
        .define(LISTENERS, ConfigType.LIST, DEFAULT_LISTENER, Importance.LOW,
                "The REST API's listeners: http://host:port and https://host:port URLs (https ones are secured "
                "with the listeners.https.ssl.* configs, or without any of those the worker's ssl.* configs)")
        .define(ADMIN_LISTENERS, ConfigType.LIST, None, Importance.LOW,
                "Where the /admin endpoints are served: http://host:port and https://host:port URLs (https ones "
                "with the admin.listeners.https.ssl.* configs, or without any of those the worker's ssl.* "
                "configs); empty: nowhere; not set: on the listeners of 'listeners'")
        .define("rest.advertised.host.name", ConfigType.STRING, None, Importance.LOW,
                "The host name other workers and the status answers give for this worker")
        .define("rest.advertised.port", ConfigType.INT, None, Importance.LOW, "The port given with it")
        .define(ADVERTISED_LISTENER, ConfigType.STRING, None, Importance.LOW,
                "The listener other workers reach this one on: http or https (default: http if a listener is http)",
                validator=ValidString(("http", "https"), case_sensitive=False))
        .define("plugin.path", ConfigType.LIST, "", Importance.LOW,
                "Directories of Python modules holding plugins")
        .define("offset.flush.interval.ms", ConfigType.LONG, 60000, Importance.LOW,
                "How often source offsets and sink consumer offsets are committed", validator=Range.at_least(1))
        .define("offset.flush.timeout.ms", ConfigType.LONG, 5000, Importance.LOW,
                "How long a commit waits for outstanding records to be acknowledged", validator=Range.at_least(0))
        .define("task.shutdown.graceful.timeout.ms", ConfigType.LONG, 5000, Importance.LOW,
                "How long stopping waits for each task to finish")
        .define(TOPIC_TRACKING, ConfigType.BOOLEAN, True, Importance.LOW,
                "Whether the topics connectors use are recorded (KIP-558, GET /connectors/{name}/topics)")
        .define(TOPIC_TRACKING_RESET, ConfigType.BOOLEAN, True, Importance.LOW,
                "Whether PUT /connectors/{name}/topics/reset may clear a connector's recorded topics")
        .define(OVERRIDE_POLICY, ConfigType.STRING, "All", Importance.MEDIUM,
                "Which producer.override.*, consumer.override.* and admin.override.* configs connectors may "
                "set: All, None or Principal (or Kafka's policy class names)",
                validator=_check_policy)
    )
    if standalone:
        definition.define("offset.storage.file.filename", ConfigType.STRING, importance=Importance.HIGH,
                          documentation="The file where standalone mode keeps source offsets")
    else:
        for name in ("config", "offset", "status"):
            definition.define(f"{name}.storage.topic", ConfigType.STRING, importance=Importance.HIGH,
                              documentation=f"The topic holding connector {name}s")
            definition.define(f"{name}.storage.replication.factor", ConfigType.SHORT, 3, Importance.LOW,
                              "The replication factor of that topic (-1: the broker default)")
        definition.define("group.id", ConfigType.STRING, importance=Importance.HIGH,
                          documentation="The group of the workers of this Connect cluster")
        _define_distributed(definition)
    return definition


def _define_distributed(definition: ConfigDef) -> None:
    """Distributed mode's own configs, with Kafka Connect's names and defaults."""
    (definition
     .define("offset.storage.partitions", ConfigType.INT, 25, Importance.LOW,
             "The number of partitions of offset.storage.topic when the worker creates it",
             validator=Range.at_least(1))
     .define("status.storage.partitions", ConfigType.INT, 5, Importance.LOW,
             "The number of partitions of status.storage.topic when the worker creates it",
             validator=Range.at_least(1))
     .define("session.timeout.ms", ConfigType.INT, 10000, Importance.HIGH,
             "How long the group coordinator waits for a worker's heartbeat before removing it from the group")
     .define("heartbeat.interval.ms", ConfigType.INT, 3000, Importance.HIGH,
             "How often a worker heartbeats to the group coordinator", validator=Range.at_least(1))
     .define("rebalance.timeout.ms", ConfigType.INT, 60000, Importance.HIGH,
             "How long the coordinator waits for every worker to rejoin during a rebalance")
     .define("scheduled.rebalance.max.delay.ms", ConfigType.INT, 300000, Importance.LOW,
             "How long the connectors and tasks of a departed worker stay unassigned, waiting for it to return",
             validator=Range.at_least(0))
     .define(CONNECT_PROTOCOL, ConfigType.STRING, "sessioned", Importance.LOW,
             "sessioned: incremental cooperative rebalancing (KIP-415) with requests between workers signed by a "
             "session key (KIP-507); compatible: the same rebalancing unsigned; eager: stop everything each "
             "rebalance", validator=ValidString(("sessioned", "compatible", "eager"), case_sensitive=False))
     .define(KEY_TTL_MS, ConfigType.INT, 3_600_000, Importance.LOW,
             "How long the leader uses a session key before it writes a new one (0: never)",
             validator=Range.at_least(0))
     .define(KEY_ALGORITHM, ConfigType.STRING, DEFAULT_ALGORITHM, Importance.LOW,
             "The algorithm session keys are generated for", validator=_check_algorithm)
     .define(KEY_SIZE, ConfigType.INT, None, Importance.LOW,
             "The size of session keys in bits (default: the algorithm's, e.g. 256 for HmacSHA256)",
             validator=Range.at_least(MIN_KEY_BITS))
     .define(SIGNATURE_ALGORITHM, ConfigType.STRING, DEFAULT_ALGORITHM, Importance.LOW,
             "The algorithm this worker signs requests to the leader with", validator=_check_algorithm)
     .define(VERIFICATION_ALGORITHMS, ConfigType.LIST, DEFAULT_ALGORITHM, Importance.LOW,
             "The algorithms the leader accepts signatures of; must include inter.worker.signature.algorithm",
             validator=_check_algorithms)
     .define(EXACTLY_ONCE_SOURCE_SUPPORT, ConfigType.STRING, "disabled", Importance.HIGH,
             "KIP-618: enabled runs every source task with a transactional producer that writes its records and "
             "source offsets in one transaction; preparing only reads offsets read_committed and fences the "
             "previous tasks of a connector on reconfiguration (the step before enabled on a running cluster)",
             validator=ValidString(("disabled", "preparing", "enabled"), case_sensitive=False)))


def _check_algorithm(name: str, value: Any) -> None:
    problem = algorithm_error(str(value))
    if problem is not None:
        raise ConfigException(name, value, problem)


def _check_algorithms(name: str, value: Any) -> None:
    if not value:
        raise ConfigException(name, value, "At least one signature verification algorithm must be provided")
    for algorithm in value:
        _check_algorithm(name, algorithm)


def _check_signing(values: Mapping[str, Any]) -> None:
    """Kafka's cross-check: a worker must accept the signatures it makes itself."""
    if values[SIGNATURE_ALGORITHM] not in values[VERIFICATION_ALGORITHMS]:
        raise ConfigException(SIGNATURE_ALGORITHM, values[SIGNATURE_ALGORITHM],
                              f"Signature algorithm must be present in {VERIFICATION_ALGORITHMS} list")


def exactly_once_source(worker: WorkerConfig) -> str:
    """The worker's `exactly.once.source.support`: disabled (always in standalone mode, as in Kafka, which has
    no such config there), preparing or enabled."""
    if worker.standalone:
        return "disabled"
    return str(worker.values.get(EXACTLY_ONCE_SOURCE_SUPPORT) or "disabled").lower()


def _check_policy(name: str, value: Any) -> None:
    parse_policy(value)


def prefixed(props: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """The entries of `props` whose key starts with `prefix`, with the prefix removed."""
    return {key[len(prefix):]: value for key, value in props.items() if key.startswith(prefix)}


@dataclass(frozen=True)
class WorkerConfig:
    """A worker's parsed configuration; `raw` keeps every property as given (client pass-through)."""

    raw: dict[str, str]
    values: dict[str, Any]
    standalone: bool = True

    @classmethod
    def parse(cls, props: Mapping[str, str], standalone: bool = True) -> WorkerConfig:
        """Raises ConfigException naming the first bad config (the REST listeners are checked too)."""
        worker = cls(dict(props), worker_config_def(standalone).parse(props), standalone)
        worker.advertised_listener()
        worker.admin_listeners()
        if not standalone:
            _check_signing(worker.values)
        return worker

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(self.values["bootstrap.servers"])

    def rest_listeners(self) -> tuple[ListenerUrl, ...]:
        """Every REST listener of `listeners`, in order."""
        return parse_listeners(self.values[LISTENERS])

    def admin_listeners(self) -> tuple[ListenerUrl, ...] | None:
        """The listeners of `admin.listeners`: None when it is not set (the /admin endpoints are served with the
        rest), none when it is empty (they are served nowhere)."""
        return parse_admin_listeners(self.values.get(ADMIN_LISTENERS))

    def admin_rest_tls(self) -> RestTls:
        """The TLS settings of the https listeners of `admin.listeners`."""
        return rest_tls(self.raw, ADMIN_HTTPS_PREFIX)

    def advertised_listener(self) -> ListenerUrl:
        """The listener other workers reach this one on (`rest.advertised.listener`)."""
        return advertised_listener(self.rest_listeners(), self.values.get(ADVERTISED_LISTENER))

    def rest_url(self) -> str:
        """The URL other workers reach this one at: the advertised listener's scheme, `rest.advertised.host.name`
        and `rest.advertised.port` (each defaulting to the listener's)."""
        return url_of(self.advertised_listener(), self.values.get("rest.advertised.host.name"),
                      self.values.get("rest.advertised.port"))

    def worker_id(self) -> str:
        """`host:port` of the advertised URL, as Kafka Connect names its workers."""
        return urlsplit(self.rest_url()).netloc

    def rest_tls(self) -> RestTls:
        """The TLS settings of the https listeners, and of this worker's requests to other workers."""
        return rest_tls(self.raw)

    def client_config(self, client: str) -> dict[str, Any]:
        """librdkafka settings for the worker's `producer`/`consumer`/`admin` clients: `bootstrap.servers`,
        the worker's security settings, then its `<client>.` settings (Java client names translated in both, so
        a worker's `sasl.jaas.config` works as in Kafka Connect)."""
        security = librdkafka_security(self.security_properties())
        return {"bootstrap.servers": self.bootstrap_servers, **translate(client, security, ""),
                **worker_settings(client, self.raw)}

    def security_properties(self) -> dict[str, str]:
        """The worker's `security.*`, `ssl.*` and `sasl.*` settings, which every client of the worker takes (its
        group membership and OffsetDelete, on Moldau's own client, too)."""
        return {k: str(v) for k, v in self.raw.items() if k.startswith(("security.", "ssl.", "sasl."))}


def connector_config_def() -> ConfigDef:
    """The configs every connector takes, in Kafka's groups."""
    return (
        ConfigDef()
        .define(NAME, ConfigType.STRING, importance=Importance.HIGH, documentation="Globally unique connector name",
                validator=NonEmptyString(), group="Common", order_in_group=1)
        .define(CONNECTOR_CLASS, ConfigType.STRING, importance=Importance.HIGH,
                documentation="Name of the connector class (Moldau's or Kafka's)", group="Common", order_in_group=2)
        .define(TASKS_MAX, ConfigType.INT, 1, Importance.HIGH, "Maximum number of tasks to use for this connector",
                validator=Range.at_least(1), group="Common", order_in_group=3)
        .define("key.converter", ConfigType.CLASS, None, Importance.LOW,
                "Converter of keys (default: the worker's)", group="Common", order_in_group=4)
        .define("value.converter", ConfigType.CLASS, None, Importance.LOW,
                "Converter of values (default: the worker's)", group="Common", order_in_group=5)
        .define("header.converter", ConfigType.CLASS, None, Importance.LOW,
                "Converter of header values (default: the worker's)", group="Common", order_in_group=6)
        .define("transforms", ConfigType.LIST, "", Importance.LOW, "Aliases of the transforms to apply, in order",
                group="Transforms", order_in_group=1)
        .define("predicates", ConfigType.LIST, "", Importance.LOW, "Aliases of the predicates transforms use",
                group="Predicates", order_in_group=1)
    ).merge(_error_config_def(sink=False))


def _error_config_def(sink: bool) -> ConfigDef:
    """The `errors.*` configs (the dead letter queue ones for sinks only), in Kafka's "Error Handling" group."""
    definition = ConfigDef()
    for order, key in enumerate(ERRORS_CONFIG_DEF.keys.values(), start=1):
        if sink or not key.name.startswith("errors.deadletterqueue."):
            definition.define(key.name, key.type, key.default, key.importance, key.documentation,
                              validator=key.validator, group="Error Handling", order_in_group=order)
    return definition


def source_config_def() -> ConfigDef:
    """The configs every source connector takes: the common ones and KIP-618's, in Kafka's "Exactly Once
    Support" group. They matter only on a distributed worker with `exactly.once.source.support=enabled`."""
    return (connector_config_def()
            .define(EXACTLY_ONCE_SUPPORT, ConfigType.STRING, "requested", Importance.MEDIUM,
                    "required: refuse the connector unless it says it can give exactly-once delivery with its "
                    "config; requested: run it transactionally either way",
                    validator=ValidString(("requested", "required"), case_sensitive=False),
                    group="Exactly Once Support", order_in_group=1)
            .define(TRANSACTION_BOUNDARY, ConfigType.STRING, "poll", Importance.MEDIUM,
                    "When a task's transaction is committed: poll (after the records of each poll()), interval "
                    "(every transaction.boundary.interval.ms) or connector (when the task asks, through its "
                    "transaction context; the connector must support it)",
                    validator=ValidString(("poll", "interval", "connector"), case_sensitive=False),
                    group="Exactly Once Support", order_in_group=2)
            .define(TRANSACTION_BOUNDARY_INTERVAL_MS, ConfigType.LONG, None, Importance.LOW,
                    "With transaction.boundary=interval, how often to commit (default: the worker's "
                    "offset.flush.interval.ms)", validator=Range.at_least(0),
                    group="Exactly Once Support", order_in_group=3)
            .define(OFFSETS_STORAGE_TOPIC, ConfigType.STRING, None, Importance.LOW,
                    "A connector-specific offsets topic (KIP-618); not supported: source offsets live in the "
                    "worker's offset.storage.topic", group="Exactly Once Support", order_in_group=4))


def sink_config_def() -> ConfigDef:
    return (connector_config_def().merge(_error_config_def(sink=True))
            .define("topics", ConfigType.LIST, "", Importance.HIGH, "The topics to consume",
                    group="Common", order_in_group=7)
            .define("topics.regex", ConfigType.STRING, "", Importance.HIGH,
                    "A regular expression of the topics to consume", group="Common", order_in_group=8))


def load_connector_file(path: str | Path) -> dict[str, str]:
    """A connector's config from a `.properties` file, or a `.json` file holding either the config map or
    `{"name": ..., "config": {...}}` (the body of `POST /connectors`)."""
    path = Path(path)
    if path.suffix != ".json":
        return load_properties(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ConfigException(NAME, None, f"{path.name} does not hold a JSON object")
    if isinstance(data.get("config"), dict):
        config = {str(k): _text(v) for k, v in data["config"].items()}
        if "name" in data:
            config.setdefault(NAME, str(data["name"]))
        return config
    return {str(k): _text(v) for k, v in data.items()}


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return value if isinstance(value, str) else json.dumps(value) if isinstance(value, (dict, list)) else str(value)
