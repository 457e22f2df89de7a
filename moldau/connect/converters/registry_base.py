"""What the schema-registry converters share: their options (`schema.registry.url`, `auto.register.schemas`,
`use.latest.version`, `key.subject.name.strategy`/`value.subject.name.strategy`), a registry client, one
confluent-kafka serializer per writer schema, and reading the schema id from Confluent's wire format
(magic byte 0, then the id as a 4-byte big-endian int)."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import secrets
import struct
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from confluent_kafka.schema_registry import (
    Schema as RegistrySchema,
)
from confluent_kafka.schema_registry import (
    SchemaRegistryClient,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
    topic_subject_name_strategy,
)
from confluent_kafka.serialization import MessageField, SerializationContext

from moldau.connect.api import Converter, Header
from moldau.connect.config import ConfigDef, ConfigType, Importance
from moldau.connect.data import Schema, SchemaAndValue
from moldau.connect.errors import ConfigException, DataException

_STRATEGIES: dict[str, Callable[..., Any]] = {
    "io.confluent.kafka.serializers.subject.TopicNameStrategy": topic_subject_name_strategy,
    "io.confluent.kafka.serializers.subject.RecordNameStrategy": record_subject_name_strategy,
    "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy": topic_record_subject_name_strategy,
}
_DEFAULT_STRATEGY = "io.confluent.kafka.serializers.subject.TopicNameStrategy"

log = logging.getLogger(__name__)


def _strategy(name: str, value: Any) -> None:
    if value not in _STRATEGIES:
        raise ConfigException(name, value, "Unknown subject name strategy; one of: " + ", ".join(_STRATEGIES))


def _credentials_source(name: str, value: Any) -> None:
    if str(value).upper() not in ("URL", "USER_INFO"):
        raise ConfigException(name, value, "One of URL, USER_INFO (SASL_INHERIT is not supported)")


def _store_type(name: str, value: Any) -> None:
    if value is not None and str(value).upper() not in ("PEM", "JKS", "PKCS12"):
        raise ConfigException(name, value, "One of PEM, JKS, PKCS12")


# The CA files written for Java trust stores (confluent-kafka's registry client takes a file path): one per store
# file as it was when read, removed when the process exits. They hold public certificates only.
_CA_FILES: dict[tuple[str, int, int, str | None], str] = {}


def _ca_file(location: str, store_type: str | None, password: str | None) -> str:
    """A PEM file of the trust store's CAs: the store itself when it is PEM, else one written for it.
    Raises ConfigException naming the config."""
    from moldau.cli.command_config import java_trust_pem

    props = {"ssl.truststore.location": location, **({"ssl.truststore.type": store_type} if store_type else {}),
             **({"ssl.truststore.password": password} if password is not None else {})}
    try:
        info = os.stat(location)
        key = (location, info.st_mtime_ns, info.st_size, password)
        if key in _CA_FILES:
            return _CA_FILES[key]
        pem = java_trust_pem(props)
    except (OSError, ValueError) as exc:
        message = str(exc).replace("ssl.truststore.location=", "")
        raise ConfigException(TRUSTSTORE_LOCATION, location, message) from None
    if pem is None:
        return location
    _CA_FILES[key] = _pem_file("moldau-registry-ca-", pem)
    return _CA_FILES[key]


# The certificate files written for Java key stores: the chain and the private key, encrypted under a random
# password the registry client is given; private to this process (0600), removed when it exits.
_CERTIFICATE_FILES: dict[tuple[str, int, int, str | None, str | None], tuple[str, str]] = {}


def _client_certificate(location: str, store_type: str | None, password: str | None,
                        key_password: str | None) -> tuple[str, str | None]:
    """(`ssl.certificate.location`, `ssl.key.password`) for confluent-kafka's registry client: a PEM key store as it
    is, a JKS or PKCS12 one as a PEM file written for it. Raises ConfigException naming the config."""
    from moldau.cli.command_config import java_key_pem

    props = {"ssl.keystore.location": location, **({"ssl.keystore.type": store_type} if store_type else {}),
             **({"ssl.keystore.password": password} if password is not None else {}),
             **({"ssl.key.password": key_password} if key_password is not None else {})}
    file_password = secrets.token_hex(16)
    try:
        info = os.stat(location)
        key = (location, info.st_mtime_ns, info.st_size, password, key_password)
        if key in _CERTIFICATE_FILES:
            return _CERTIFICATE_FILES[key]
        pem = java_key_pem(props, file_password)
    except (OSError, ValueError) as exc:
        message = str(exc).replace("ssl.keystore.location=", "")
        raise ConfigException(KEYSTORE_LOCATION, location, message) from None
    if pem is None:
        return location, key_password
    chain, encrypted_key = pem
    _CERTIFICATE_FILES[key] = (_pem_file("moldau-registry-client-", chain + encrypted_key), file_password)
    return _CERTIFICATE_FILES[key]


def _pem_file(prefix: str, text: str) -> str:
    """A new file only this process may read (mkstemp's 0600), holding `text`, removed when the process exits."""
    fd, path = tempfile.mkstemp(prefix=prefix, suffix=".pem")
    with os.fdopen(fd, "w") as out:
        out.write(text)
    atexit.register(_remove, path)
    return path


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


TRUSTSTORE_LOCATION = "schema.registry.ssl.truststore.location"
KEYSTORE_LOCATION = "schema.registry.ssl.keystore.location"


CONFIG_DEF = (
    ConfigDef()
    .define("schema.registry.url", ConfigType.LIST, importance=Importance.HIGH,
            documentation="Comma-separated list of URLs for Schema Registry instances.")
    .define("auto.register.schemas", ConfigType.BOOLEAN, True, Importance.MEDIUM,
            "Specify if the Serializer should attempt to register the Schema with Schema Registry")
    .define("use.latest.version", ConfigType.BOOLEAN, False, Importance.LOW,
            "Use the latest version of the subject's schema instead of registering the record's own.")
    .define("basic.auth.user.info", ConfigType.PASSWORD, None, Importance.MEDIUM,
            "user:password for the registry's HTTP basic authentication")
    .define("basic.auth.credentials.source", ConfigType.STRING, "URL", Importance.MEDIUM,
            "Where the basic authentication credentials come from: URL (user:password@ in schema.registry.url) or "
            "USER_INFO (basic.auth.user.info)", validator=_credentials_source)
    .define(TRUSTSTORE_LOCATION, ConfigType.STRING, None, Importance.MEDIUM,
            "The trust store with the CA certificates that sign an https registry's certificate (JKS, PKCS12 or "
            "PEM); unset: the system's CAs")
    .define("schema.registry.ssl.truststore.type", ConfigType.STRING, None, Importance.LOW,
            "The trust store's format: JKS, PKCS12 or PEM; unset: what the file holds", validator=_store_type)
    .define("schema.registry.ssl.truststore.password", ConfigType.PASSWORD, None, Importance.MEDIUM,
            "The password of a JKS or PKCS12 trust store")
    .define(KEYSTORE_LOCATION, ConfigType.STRING, None, Importance.MEDIUM,
            "The key store with this client's certificate and private key, for a registry that asks for client "
            "certificates (JKS, PKCS12 or PEM: the certificate chain and key in one file)")
    .define("schema.registry.ssl.keystore.type", ConfigType.STRING, None, Importance.LOW,
            "The key store's format: JKS, PKCS12 or PEM; unset: what the file holds", validator=_store_type)
    .define("schema.registry.ssl.keystore.password", ConfigType.PASSWORD, None, Importance.MEDIUM,
            "The password of a JKS or PKCS12 key store")
    .define("schema.registry.ssl.key.password", ConfigType.PASSWORD, None, Importance.MEDIUM,
            "The password of the private key, when it differs from the key store's (JKS) or the PEM key is "
            "encrypted")
    .define("key.subject.name.strategy", ConfigType.STRING, _DEFAULT_STRATEGY, Importance.MEDIUM,
            "How the subject of key schemas is named", validator=_strategy)
    .define("value.subject.name.strategy", ConfigType.STRING, _DEFAULT_STRATEGY, Importance.MEDIUM,
            "How the subject of value schemas is named", validator=_strategy)
)


class RegistryConverter(Converter, ABC):
    """A converter whose bytes are Confluent's wire format against a schema registry."""

    def __init__(self) -> None:
        self.client: SchemaRegistryClient | None = None
        self._serializers: dict[str, Callable[[Any, SerializationContext], bytes | None]] = {}
        self._deserializer: Callable[[bytes, SerializationContext], Any] | None = None
        self._connect_schemas: dict[int, Schema] = {}
        self.is_key = False
        self.serializer_conf: dict[str, Any] = {}

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        known = {k: v for k, v in configs.items() if k in CONFIG_DEF.keys}
        parsed = CONFIG_DEF.parse(known)
        if parsed["use.latest.version"] and "auto.register.schemas" not in configs:
            parsed["auto.register.schemas"] = False  # both cannot be on; asking for the latest implies not registering
        if parsed["use.latest.version"] and parsed["auto.register.schemas"]:
            raise ConfigException("use.latest.version", "true", "cannot be enabled with auto.register.schemas")
        client_conf: dict[str, Any] = {"url": ",".join(parsed["schema.registry.url"])}
        # Kafka's converters read user:password from the URL unless the source is USER_INFO; confluent-kafka's
        # client does the same when it is given no basic.auth.user.info.
        if parsed["basic.auth.user.info"]:
            if parsed["basic.auth.credentials.source"].upper() == "USER_INFO":
                client_conf["basic.auth.user.info"] = parsed["basic.auth.user.info"]
            else:
                log.warning("basic.auth.user.info is ignored: set basic.auth.credentials.source=USER_INFO to use it")
        if parsed[TRUSTSTORE_LOCATION]:
            password = parsed["schema.registry.ssl.truststore.password"]
            client_conf["ssl.ca.location"] = _ca_file(parsed[TRUSTSTORE_LOCATION],
                                                      parsed["schema.registry.ssl.truststore.type"],
                                                      None if password is None else str(password))
        if parsed[KEYSTORE_LOCATION]:
            store_password, key_password = (parsed["schema.registry.ssl.keystore.password"],
                                            parsed["schema.registry.ssl.key.password"])
            certificate, certificate_password = _client_certificate(
                parsed[KEYSTORE_LOCATION], parsed["schema.registry.ssl.keystore.type"],
                None if store_password is None else str(store_password),
                None if key_password is None else str(key_password))
            client_conf["ssl.certificate.location"] = certificate
            if certificate_password is not None:
                client_conf["ssl.key.password"] = certificate_password
        self.client = SchemaRegistryClient(client_conf)
        self.is_key = is_key
        strategy = parsed["key.subject.name.strategy" if is_key else "value.subject.name.strategy"]
        self.serializer_conf = {"auto.register.schemas": parsed["auto.register.schemas"],
                                "use.latest.version": parsed["use.latest.version"],
                                "subject.name.strategy": _STRATEGIES[strategy]}
        self._serializers.clear()
        self._deserializer = None

    def context(self, topic: str) -> SerializationContext:
        return SerializationContext(topic, MessageField.KEY if self.is_key else MessageField.VALUE)

    def _client(self) -> SchemaRegistryClient:
        if self.client is None:
            raise DataException("The converter is not configured (schema.registry.url)")
        return self.client

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any,
                          headers: Sequence[Header] = ()) -> bytes | None:
        if value is None and (schema is None or schema.optional):
            return None
        if schema is None:
            raise DataException(f"{type(self).__name__} needs a schema to write a value (topic {topic})")
        writer, data = self.writer_schema(schema), self.writer_value(schema, value)
        serializer = self._serializers.get(writer)
        if serializer is None:
            serializer = self._serializers[writer] = self.make_serializer(self._client(), writer)
        try:
            return serializer(data, self.context(topic))
        except Exception as e:
            raise DataException(f"Failed to serialize data of topic {topic} to {self.format_name}: {e}") from e

    def to_connect_data(self, topic: str, data: bytes | None, headers: Sequence[Header] = ()) -> SchemaAndValue:
        if data is None:
            return SchemaAndValue(None, None)
        return self.decode(topic, schema_id_of(data), data)

    format_name = "?"

    @abstractmethod
    def writer_schema(self, schema: Schema) -> str:
        """The registry schema text (or another key identifying the writer schema) for a Connect schema."""

    @abstractmethod
    def writer_value(self, schema: Schema, value: Any) -> Any:
        """What the confluent-kafka serializer takes for a Connect value."""

    @abstractmethod
    def make_serializer(self, client: SchemaRegistryClient, writer: str) -> Callable[[Any, SerializationContext],
                                                                                      bytes | None]: ...

    @abstractmethod
    def decode(self, topic: str, schema_id: int, data: bytes) -> SchemaAndValue:
        """The Connect data of a record value in the wire format, written with schema `schema_id`."""


class SchemaReadingConverter(RegistryConverter, ABC):
    """A registry converter whose one confluent-kafka deserializer reads any writer schema (Avro, JSON Schema);
    the Connect schema comes from the registered writer schema, cached by id."""

    def decode(self, topic: str, schema_id: int, data: bytes) -> SchemaAndValue:
        try:
            if self._deserializer is None:
                self._deserializer = self.make_deserializer(self._client())
            decoded = self._deserializer(data, self.context(topic))
        except Exception as e:
            raise DataException(f"Failed to deserialize data for topic {topic} to {self.format_name}: {e}") from e
        schema = self._connect_schemas.get(schema_id)
        if schema is None:
            registered = self._client().get_schema(schema_id)
            schema = self._connect_schemas[schema_id] = self.connect_schema(registered)
        return SchemaAndValue(schema, self.connect_value(schema, decoded))

    @abstractmethod
    def make_deserializer(self, client: SchemaRegistryClient) -> Callable[[bytes, SerializationContext], Any]: ...

    @abstractmethod
    def connect_schema(self, registered: RegistrySchema) -> Schema:
        """The Connect schema of a registered writer schema."""

    @abstractmethod
    def connect_value(self, schema: Schema, decoded: Any) -> Any:
        """The Connect value of what the deserializer decoded."""


def schema_id_of(data: bytes) -> int:
    """The schema id of Confluent's wire format (magic byte 0, 4-byte id, payload)."""
    if len(data) < 5 or data[0] != 0:
        raise DataException("Unknown magic byte!" if data else "Data is empty")
    return int(struct.unpack(">I", data[1:5])[0])
