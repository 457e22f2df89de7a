"""The JDBC sink's configs, with Confluent's names and defaults, and the PostgreSQL connection they describe.

`connection.url` is a JDBC URL for PostgreSQL (`jdbc:postgresql://host:port/db?user=..&password=..`) or a
libpq URL (`postgresql://...`); anything else is a config error on `connection.url`. Pure: no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from moldau.connect.config import ConfigDef, ConfigType, ConfigValue, Importance, Range, ValidString
from moldau.connect.errors import ConfigException

__all__ = [
    "CONNECTION_URL", "DELETE_ENABLED", "INSERT_MODE", "PK_FIELDS", "PK_MODE", "InsertMode", "JdbcSinkConfig",
    "PkMode", "config_def", "connection_params", "cross_check",
]

CONNECTION_URL = "connection.url"
CONNECTION_USER = "connection.user"
CONNECTION_PASSWORD = "connection.password"
CONNECTION_ATTEMPTS = "connection.attempts"
CONNECTION_BACKOFF_MS = "connection.backoff.ms"
INSERT_MODE = "insert.mode"
BATCH_SIZE = "batch.size"
DELETE_ENABLED = "delete.enabled"
TABLE_NAME_FORMAT = "table.name.format"
PK_MODE = "pk.mode"
PK_FIELDS = "pk.fields"
FIELDS_WHITELIST = "fields.whitelist"
DB_TIMEZONE = "db.timezone"
AUTO_CREATE = "auto.create"
AUTO_EVOLVE = "auto.evolve"
QUOTE_SQL_IDENTIFIERS = "quote.sql.identifiers"
MAX_RETRIES = "max.retries"
RETRY_BACKOFF_MS = "retry.backoff.ms"
DIALECT_NAME = "dialect.name"

POSTGRES_DIALECT = "PostgreSqlDatabaseDialect"
KAFKA_PK_DEFAULTS = ("__connect_topic", "__connect_partition", "__connect_offset")
# JDBC URL parameters that have a libpq equivalent; others (driver tuning) have no meaning here.
_JDBC_TO_LIBPQ = {"user": "user", "password": "password", "sslmode": "sslmode", "applicationName":
                  "application_name", "ApplicationName": "application_name", "connectTimeout": "connect_timeout",
                  "options": "options"}


class InsertMode(enum.Enum):
    INSERT = "insert"
    UPSERT = "upsert"
    UPDATE = "update"


class PkMode(enum.Enum):
    NONE = "none"
    KAFKA = "kafka"
    RECORD_KEY = "record_key"
    RECORD_VALUE = "record_value"


def config_def() -> ConfigDef:
    group_conn, group_writes, group_map, group_ddl, group_retry = (
        "Connection", "Writes", "Data Mapping", "DDL Support", "Retries")
    return (ConfigDef()
            .define(CONNECTION_URL, ConfigType.STRING, importance=Importance.HIGH, group=group_conn,
                    documentation="JDBC connection URL of the PostgreSQL database "
                                  "(jdbc:postgresql://host:port/db, or postgresql://...)")
            .define(CONNECTION_USER, ConfigType.STRING, None, Importance.HIGH, "JDBC connection user.",
                    group=group_conn)
            .define(CONNECTION_PASSWORD, ConfigType.PASSWORD, None, Importance.HIGH, "JDBC connection password.",
                    group=group_conn)
            .define(CONNECTION_ATTEMPTS, ConfigType.INT, 3, Importance.LOW,
                    "Maximum number of attempts to get a connection.", validator=Range.at_least(1),
                    group=group_conn)
            .define(CONNECTION_BACKOFF_MS, ConfigType.LONG, 10000, Importance.LOW,
                    "Backoff time in milliseconds between connection attempts.", validator=Range.at_least(0),
                    group=group_conn)
            .define(DIALECT_NAME, ConfigType.STRING, "", Importance.LOW,
                    "The database dialect; only PostgreSqlDatabaseDialect (or empty, to derive it from the URL).",
                    validator=ValidString.in_("", POSTGRES_DIALECT), group=group_conn)
            .define(INSERT_MODE, ConfigType.STRING, InsertMode.INSERT.value, Importance.HIGH,
                    "insert, upsert (INSERT ... ON CONFLICT) or update.",
                    validator=ValidString.in_(*(m.value for m in InsertMode)), group=group_writes)
            .define(BATCH_SIZE, ConfigType.INT, 3000, Importance.MEDIUM,
                    "How many rows to send to the database in one statement batch.",
                    validator=Range.at_least(1), group=group_writes)
            .define(DELETE_ENABLED, ConfigType.BOOLEAN, False, Importance.MEDIUM,
                    "Whether a record with a null value (a tombstone) deletes the row of its key. "
                    "Requires pk.mode=record_key.", group=group_writes)
            .define(TABLE_NAME_FORMAT, ConfigType.STRING, "${topic}", Importance.MEDIUM,
                    "The destination table name; ${topic} stands for the record's topic.", group=group_map)
            .define(PK_MODE, ConfigType.STRING, PkMode.NONE.value, Importance.HIGH,
                    "Where the primary key comes from: none, kafka, record_key or record_value.",
                    validator=ValidString.in_(*(m.value for m in PkMode)), group=group_map)
            .define(PK_FIELDS, ConfigType.LIST, "", Importance.MEDIUM,
                    "The primary key column names; their meaning depends on pk.mode.", group=group_map)
            .define(FIELDS_WHITELIST, ConfigType.LIST, "", Importance.MEDIUM,
                    "The record value fields to write (empty: all of them).", group=group_map)
            .define(DB_TIMEZONE, ConfigType.STRING, "UTC", Importance.MEDIUM,
                    "The time zone TIMESTAMP columns are written in.", group=group_map)
            .define(AUTO_CREATE, ConfigType.BOOLEAN, False, Importance.MEDIUM,
                    "Create a missing table from the record's schema (CREATE TABLE).", group=group_ddl)
            .define(AUTO_EVOLVE, ConfigType.BOOLEAN, False, Importance.MEDIUM,
                    "Add the columns a record's schema has and the table lacks (ALTER TABLE ... ADD).",
                    group=group_ddl)
            .define(QUOTE_SQL_IDENTIFIERS, ConfigType.STRING, "always", Importance.MEDIUM,
                    "Whether to quote table and column names: always or never.",
                    validator=ValidString(("always", "never"), case_sensitive=False), group=group_ddl)
            .define(MAX_RETRIES, ConfigType.INT, 10, Importance.MEDIUM,
                    "How many times a batch is retried after a lost connection before the task fails.",
                    validator=Range.at_least(0), group=group_retry)
            .define(RETRY_BACKOFF_MS, ConfigType.INT, 3000, Importance.MEDIUM,
                    "Milliseconds to wait before retrying a batch.", validator=Range.at_least(0),
                    group=group_retry))


def connection_params(url: str, user: str | None = None, password: str | None = None) -> dict[str, Any]:
    """psycopg2 connect() keywords for `url`; ConfigException on `connection.url` unless it is PostgreSQL's.
    `user`/`password` (connection.user/connection.password) win over the URL's."""
    text = url.strip()
    if text.startswith("jdbc:"):
        text = text[len("jdbc:"):]
    scheme, _, rest = text.partition(":")
    if scheme not in ("postgresql", "postgres"):
        raise ConfigException(CONNECTION_URL, url, "Only PostgreSQL is supported: expected "
                                                   "jdbc:postgresql://host:port/database or postgresql://...")
    if not rest.startswith("//"):
        rest = "///" + rest  # jdbc:postgresql:database means localhost
    parts = urlsplit(f"postgresql:{rest}")
    params: dict[str, Any] = {"host": parts.hostname or "localhost"}
    try:
        params["port"] = parts.port or 5432
    except ValueError:
        raise ConfigException(CONNECTION_URL, url, "the port is not a number") from None
    database = unquote(parts.path.lstrip("/"))
    if database:
        params["dbname"] = database
    if parts.username:
        params["user"] = unquote(parts.username)
    if parts.password:
        params["password"] = unquote(parts.password)
    for name, value in parse_qsl(parts.query):
        if name == "currentSchema":
            params["options"] = f"-c search_path={value}"
        elif name in _JDBC_TO_LIBPQ:
            params[_JDBC_TO_LIBPQ[name]] = value
    if user:
        params["user"] = user
    if password:
        params["password"] = password
    return params


@dataclass(frozen=True)
class JdbcSinkConfig:
    """The parsed configs a task works with."""

    connection: dict[str, Any]
    connection_attempts: int
    connection_backoff_ms: int
    insert_mode: InsertMode
    batch_size: int
    delete_enabled: bool
    table_name_format: str
    pk_mode: PkMode
    pk_fields: tuple[str, ...]
    fields_whitelist: frozenset[str]
    db_timezone: str
    auto_create: bool
    auto_evolve: bool
    quote_identifiers: bool
    max_retries: int
    retry_backoff_ms: int

    @classmethod
    def parse(cls, props: Mapping[str, str]) -> JdbcSinkConfig:
        """The typed config; ConfigException (naming the key) for a bad value or combination."""
        values = config_def().parse(props)
        for result in cross_check(values):
            raise ConfigException(result.name, result.value, result.errors[0])
        pk_mode = PkMode(values[PK_MODE])
        pk_fields = tuple(values[PK_FIELDS])
        if pk_mode is PkMode.KAFKA and not pk_fields:
            pk_fields = KAFKA_PK_DEFAULTS
        return cls(
            connection=connection_params(values[CONNECTION_URL], values[CONNECTION_USER],
                                         values[CONNECTION_PASSWORD]),
            connection_attempts=values[CONNECTION_ATTEMPTS], connection_backoff_ms=values[CONNECTION_BACKOFF_MS],
            insert_mode=InsertMode(values[INSERT_MODE]), batch_size=values[BATCH_SIZE],
            delete_enabled=values[DELETE_ENABLED], table_name_format=values[TABLE_NAME_FORMAT], pk_mode=pk_mode,
            pk_fields=pk_fields, fields_whitelist=frozenset(values[FIELDS_WHITELIST]),
            db_timezone=values[DB_TIMEZONE], auto_create=values[AUTO_CREATE], auto_evolve=values[AUTO_EVOLVE],
            quote_identifiers=values[QUOTE_SQL_IDENTIFIERS].lower() == "always",
            max_retries=values[MAX_RETRIES], retry_backoff_ms=values[RETRY_BACKOFF_MS])


def cross_check(values: Mapping[str, Any]) -> list[ConfigValue]:
    """Errors of combinations of (already parsed) configs, each on the key to change."""
    errors: list[ConfigValue] = []
    url = values.get(CONNECTION_URL)
    if isinstance(url, str):
        try:
            connection_params(url)
        except ConfigException as exc:
            errors.append(ConfigValue(CONNECTION_URL, url, errors=[exc.reason]))
    pk_mode = values.get(PK_MODE)
    if values.get(DELETE_ENABLED) and pk_mode != PkMode.RECORD_KEY.value:
        errors.append(ConfigValue(DELETE_ENABLED, "true", errors=[
            f"Primary key mode must be '{PkMode.RECORD_KEY.value}' when delete support is enabled "
            f"({PK_MODE} is {pk_mode})"]))
    if values.get(INSERT_MODE) in (InsertMode.UPSERT.value, InsertMode.UPDATE.value) and \
            pk_mode == PkMode.NONE.value:
        errors.append(ConfigValue(PK_MODE, pk_mode, errors=[
            f"{INSERT_MODE}={values.get(INSERT_MODE)} needs the primary key: set {PK_MODE} to kafka, "
            "record_key or record_value"]))
    pk_fields = values.get(PK_FIELDS) or []
    if pk_mode == PkMode.KAFKA.value and pk_fields and len(pk_fields) != 3:
        errors.append(ConfigValue(PK_FIELDS, ",".join(pk_fields), errors=[
            "PK mode for kafka requires exactly three field names (topic, partition, offset), or none for "
            f"the defaults {','.join(KAFKA_PK_DEFAULTS)}"]))
    return errors
