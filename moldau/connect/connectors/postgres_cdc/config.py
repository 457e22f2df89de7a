"""The connector's configs, with Debezium's names and defaults, and the checks that span several keys.

`PostgresCdcConfig.from_props` turns the (validated) string properties into typed settings for the task.

The include and exclude lists are Debezium's: comma-separated regular expressions, each matching the whole
name (`schema`, `schema.table` or `schema.table.column`) without regard to case, as Debezium matches them.
`message.key.columns` is Debezium's too: `<table regex>:<column>,<column>;<table regex>:...`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from moldau.connect.config import ConfigDef, ConfigType, ConfigValue, Importance, NonEmptyString, Range, ValidString
from moldau.connect.errors import ConfigException

__all__ = ["ColumnFilter", "MessageKeyColumns", "PostgresCdcConfig", "TableFilter", "config_def",
           "cross_field_errors"]

HOSTNAME = "database.hostname"
PORT = "database.port"
USER = "database.user"
PASSWORD = "database.password"
DBNAME = "database.dbname"
TOPIC_PREFIX = "topic.prefix"
PLUGIN_NAME = "plugin.name"
SLOT_NAME = "slot.name"
PUBLICATION_NAME = "publication.name"
PUBLICATION_AUTOCREATE = "publication.autocreate.mode"
TABLE_INCLUDE = "table.include.list"
TABLE_EXCLUDE = "table.exclude.list"
SCHEMA_INCLUDE = "schema.include.list"
SCHEMA_EXCLUDE = "schema.exclude.list"
COLUMN_INCLUDE = "column.include.list"
COLUMN_EXCLUDE = "column.exclude.list"
MESSAGE_KEY_COLUMNS = "message.key.columns"
PROVIDE_TRANSACTION_METADATA = "provide.transaction.metadata"
TOPIC_TRANSACTION = "topic.transaction"
SNAPSHOT_MODE = "snapshot.mode"
HEARTBEAT_INTERVAL = "heartbeat.interval.ms"
HEARTBEAT_PREFIX = "topic.heartbeat.prefix"
DECIMAL_MODE = "decimal.handling.mode"
SKIPPED_OPERATIONS = "skipped.operations"
MAX_BATCH_SIZE = "max.batch.size"
POLL_INTERVAL = "poll.interval.ms"
TASKS_MAX = "tasks.max"

SNAPSHOT_MODES = ("initial", "never", "no_data", "initial_only", "always")
_OPERATIONS = ("c", "u", "d", "t")
# Pairs no config may set both of (Debezium refuses them together too).
_EXCLUSIVE = ((TABLE_INCLUDE, TABLE_EXCLUDE), (SCHEMA_INCLUDE, SCHEMA_EXCLUDE), (COLUMN_INCLUDE, COLUMN_EXCLUDE))
# One entry of message.key.columns: a table regex, a colon, the column names (no spaces inside).
_KEY_ENTRY = re.compile(r"\s*([^\s:]+):([^:\s]+)\s*")


def config_def() -> ConfigDef:
    return (ConfigDef()
            .define(HOSTNAME, ConfigType.STRING, importance=Importance.HIGH,
                    documentation="Resolvable hostname or IP address of the PostgreSQL server",
                    validator=NonEmptyString())
            .define(PORT, ConfigType.INT, 5432, Importance.HIGH, "Port of the PostgreSQL server",
                    validator=Range.between(1, 65535))
            .define(USER, ConfigType.STRING, importance=Importance.HIGH,
                    documentation="Name of the database user (needs the REPLICATION attribute)",
                    validator=NonEmptyString())
            .define(PASSWORD, ConfigType.PASSWORD, None, Importance.HIGH, "Password of the database user")
            .define(DBNAME, ConfigType.STRING, importance=Importance.HIGH,
                    documentation="The name of the database to capture changes from", validator=NonEmptyString())
            .define(TOPIC_PREFIX, ConfigType.STRING, importance=Importance.HIGH,
                    documentation="Prefix of every topic name; also the logical name of the server in the "
                                  "source partition and the events' source.name",
                    validator=_topic_prefix)
            .define(PLUGIN_NAME, ConfigType.STRING, "pgoutput", Importance.MEDIUM,
                    "The logical decoding plugin; only pgoutput (built into PostgreSQL 10+) is supported",
                    validator=ValidString.in_("pgoutput"))
            .define(SLOT_NAME, ConfigType.STRING, "debezium", Importance.MEDIUM,
                    "The name of the logical replication slot", validator=_slot_name)
            .define(PUBLICATION_NAME, ConfigType.STRING, "dbz_publication", Importance.MEDIUM,
                    "The name of the publication to stream changes from", validator=NonEmptyString())
            .define(PUBLICATION_AUTOCREATE, ConfigType.STRING, "all_tables", Importance.LOW,
                    "all_tables: create the publication for all tables if missing; filtered: for the tables "
                    "the include/exclude lists select; disabled: the publication must exist",
                    validator=ValidString.in_("all_tables", "filtered", "disabled"))
            .define(TABLE_INCLUDE, ConfigType.LIST, "", Importance.MEDIUM,
                    "Regular expressions matching schema.table of the tables to capture (all when empty)",
                    validator=_regex_list)
            .define(TABLE_EXCLUDE, ConfigType.LIST, "", Importance.MEDIUM,
                    "Regular expressions matching schema.table of the tables not to capture",
                    validator=_regex_list)
            .define(SCHEMA_INCLUDE, ConfigType.LIST, "", Importance.MEDIUM,
                    "Regular expressions matching the schemas whose tables are captured (all when empty)",
                    validator=_regex_list)
            .define(SCHEMA_EXCLUDE, ConfigType.LIST, "", Importance.MEDIUM,
                    "Regular expressions matching the schemas whose tables are not captured",
                    validator=_regex_list)
            .define(COLUMN_INCLUDE, ConfigType.LIST, "", Importance.MEDIUM,
                    "Regular expressions matching schema.table.column of the columns in change event values "
                    "(all when empty)", validator=_regex_list)
            .define(COLUMN_EXCLUDE, ConfigType.LIST, "", Importance.MEDIUM,
                    "Regular expressions matching schema.table.column of the columns left out of change event "
                    "values (keys keep their columns)", validator=_regex_list)
            .define(MESSAGE_KEY_COLUMNS, ConfigType.STRING, None, Importance.LOW,
                    "The columns of the record key of some tables instead of their primary key: "
                    "<table regex>:<column>,<column>;<table regex>:<column>,...", validator=_key_columns)
            .define(PROVIDE_TRANSACTION_METADATA, ConfigType.BOOLEAN, False, Importance.LOW,
                    "Write a BEGIN and an END record of every captured transaction to <topic.prefix>."
                    "<topic.transaction>, and fill the transaction block of change events")
            .define(TOPIC_TRANSACTION, ConfigType.STRING, "transaction", Importance.LOW,
                    "The transaction topic's name after <topic.prefix>.", validator=_topic_prefix)
            .define(SNAPSHOT_MODE, ConfigType.STRING, "initial", Importance.MEDIUM,
                    "initial: snapshot the tables once, then stream; never/no_data: only stream; initial_only: "
                    "snapshot and stop; always: snapshot at every start, then stream",
                    validator=ValidString.in_(*SNAPSHOT_MODES))
            .define(HEARTBEAT_INTERVAL, ConfigType.INT, 0, Importance.MEDIUM,
                    "Milliseconds between heartbeat records (0: none); heartbeats let the slot advance when no "
                    "captured table changes", validator=Range.at_least(0))
            .define(HEARTBEAT_PREFIX, ConfigType.STRING, "__debezium-heartbeat", Importance.LOW,
                    "Prefix of the heartbeat topic, <prefix>.<topic.prefix>", validator=NonEmptyString())
            .define(DECIMAL_MODE, ConfigType.STRING, "precise", Importance.MEDIUM,
                    "How numeric columns are written: precise (Connect Decimal), string or double",
                    validator=ValidString.in_("precise", "string", "double"))
            .define(SKIPPED_OPERATIONS, ConfigType.LIST, "t", Importance.LOW,
                    "Operations not emitted: any of c, u, d, t, or none", validator=_operations)
            .define(MAX_BATCH_SIZE, ConfigType.INT, 2048, Importance.LOW,
                    "Most records returned by one poll", validator=Range.at_least(1))
            .define(POLL_INTERVAL, ConfigType.INT, 100, Importance.LOW,
                    "Milliseconds a poll waits for new changes when there are none", validator=Range.at_least(1)))


def _topic_prefix(name: str, value: object) -> None:
    if value is None or not re.fullmatch(r"[A-Za-z0-9._-]+", str(value)):
        raise ConfigException(name, value, "Must be a non-empty string of letters, digits, '.', '_' or '-'")


def _slot_name(name: str, value: object) -> None:
    if value is None or not re.fullmatch(r"[a-z0-9_]{1,63}", str(value)):
        raise ConfigException(name, value, "Slot names may contain only lower case letters, digits and '_' "
                                           "(at most 63)")


def _regex_list(name: str, value: object) -> None:
    for pattern in value if isinstance(value, list) else []:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigException(name, value, f"Invalid regular expression {pattern!r}: {exc}") from None


def _key_columns(name: str, value: object) -> None:
    if value is None:
        return
    try:
        MessageKeyColumns.parse(str(value))
    except ValueError as exc:
        raise ConfigException(name, value, str(exc)) from None


def _operations(name: str, value: object) -> None:
    for op in value if isinstance(value, list) else []:
        if op not in (*_OPERATIONS, "none"):
            raise ConfigException(name, value, f"Unknown operation {op!r}; use c, u, d, t or none")


def cross_field_errors(props: Mapping[str, str]) -> dict[str, str]:
    """Errors that involve more than one key, by the key they are reported on."""
    errors = {}
    for include, exclude in _EXCLUSIVE:
        if props.get(include, "").strip() and props.get(exclude, "").strip():
            errors[exclude] = f"{include} and {exclude} are mutually exclusive; set only one"
    tasks = props.get(TASKS_MAX, "1").strip()
    if tasks != "1":
        errors[TASKS_MAX] = "Only a single connector task may be started (tasks.max must be 1)"
    return errors


def validate(props: Mapping[str, str]) -> list[ConfigValue]:
    values = config_def().validate(props)
    by_name = {value.name: value for value in values}
    for key, message in cross_field_errors(props).items():
        value = by_name.get(key)
        if value is None:
            value = ConfigValue(key, props.get(key))
            values.append(value)
        value.errors.append(message)
    return values


def _patterns(regexes: Sequence[str]) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(regex, re.IGNORECASE) for regex in regexes)


def _selected(name: str, include: Sequence[re.Pattern[str]], exclude: Sequence[re.Pattern[str]]) -> bool:
    """Debezium's rule: with an include list, only what one of its regexes matches; else all but what an exclude
    regex matches. A regex matches the whole name."""
    if include:
        return any(p.fullmatch(name) for p in include)
    return not any(p.fullmatch(name) for p in exclude)


@dataclass(frozen=True)
class TableFilter:
    """Which tables are captured: a table is when its schema passes the schema lists and `schema.table` passes
    the table lists."""

    include: tuple[re.Pattern[str], ...] = ()
    exclude: tuple[re.Pattern[str], ...] = ()
    schema_include: tuple[re.Pattern[str], ...] = ()
    schema_exclude: tuple[re.Pattern[str], ...] = ()

    @classmethod
    def of(cls, include: Sequence[str] = (), exclude: Sequence[str] = (), schema_include: Sequence[str] = (),
           schema_exclude: Sequence[str] = ()) -> TableFilter:
        return cls(_patterns(include), _patterns(exclude), _patterns(schema_include), _patterns(schema_exclude))

    def accepts(self, schema: str, table: str) -> bool:
        return (_selected(schema, self.schema_include, self.schema_exclude)
                and _selected(f"{schema}.{table}", self.include, self.exclude))


@dataclass(frozen=True)
class ColumnFilter:
    """Which columns go into change event values, by `schema.table.column`."""

    include: tuple[re.Pattern[str], ...] = ()
    exclude: tuple[re.Pattern[str], ...] = ()

    @classmethod
    def of(cls, include: Sequence[str] = (), exclude: Sequence[str] = ()) -> ColumnFilter:
        return cls(_patterns(include), _patterns(exclude))

    def accepts(self, schema: str, table: str, column: str) -> bool:
        return _selected(f"{schema}.{table}.{column}", self.include, self.exclude)


@dataclass(frozen=True)
class MessageKeyColumns:
    """`message.key.columns`: each entry `<table regex>:<c1>,<c2>` becomes the regexes `<table regex>.<c1>`,
    `<table regex>.<c2>` over `schema.table.column`, as Debezium turns them."""

    patterns: tuple[re.Pattern[str], ...] = ()

    @classmethod
    def parse(cls, text: str | None) -> MessageKeyColumns:
        """Raises ValueError naming the entry that is not `<table>:<column>[,<column>...]`."""
        if text is None or not text.strip():
            return cls()
        regexes = []
        entries = text.split(";")
        while entries and not entries[-1]:  # a trailing ';' is allowed (Java's split drops what follows it)
            entries.pop()
        for entry in entries:
            match = _KEY_ENTRY.fullmatch(entry)
            if match is None:
                raise ValueError(f"Invalid entry {entry.strip()!r}: each entry of {MESSAGE_KEY_COLUMNS} is "
                                 "<fully-qualified table>:<column>[,<column>...], entries separated by ';'")
            table, columns = match.groups()
            regexes += [f"{table}.{column}" for column in columns.split(",") if column]
        try:
            return cls(_patterns(regexes))
        except re.error as exc:
            raise ValueError(f"Invalid regular expression in {text!r}: {exc}") from None

    def for_table(self, schema: str, table: str, columns: Sequence[str]) -> list[str] | None:
        """The key columns of the table, in the order of the entries; None when no entry names one (the primary
        key is the key then)."""
        chosen: list[str] = []
        for pattern in self.patterns:
            chosen += [c for c in columns if c not in chosen and pattern.fullmatch(f"{schema}.{table}.{c}")]
        return chosen or None


@dataclass(frozen=True)
class PostgresCdcConfig:
    hostname: str
    port: int
    user: str
    password: str | None
    dbname: str
    topic_prefix: str
    slot_name: str
    publication_name: str
    publication_autocreate: str
    tables: TableFilter
    columns: ColumnFilter
    message_key_columns: MessageKeyColumns
    transaction_topic: str | None  # <topic.prefix>.<topic.transaction> with provide.transaction.metadata, else None
    snapshot_mode: str
    heartbeat_interval_ms: int
    heartbeat_prefix: str
    decimal_mode: str
    skipped_operations: frozenset[str]
    max_batch_size: int
    poll_interval_ms: int

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> PostgresCdcConfig:
        for key, message in cross_field_errors(props).items():
            raise ConfigException(key, props.get(key), message)
        p = config_def().parse(props)
        return cls(p[HOSTNAME], p[PORT], p[USER], p[PASSWORD], p[DBNAME], p[TOPIC_PREFIX], p[SLOT_NAME],
                   p[PUBLICATION_NAME], p[PUBLICATION_AUTOCREATE],
                   TableFilter.of(p[TABLE_INCLUDE], p[TABLE_EXCLUDE], p[SCHEMA_INCLUDE], p[SCHEMA_EXCLUDE]),
                   ColumnFilter.of(p[COLUMN_INCLUDE], p[COLUMN_EXCLUDE]),
                   MessageKeyColumns.parse(p[MESSAGE_KEY_COLUMNS]),
                   f"{p[TOPIC_PREFIX]}.{p[TOPIC_TRANSACTION]}" if p[PROVIDE_TRANSACTION_METADATA] else None,
                   p[SNAPSHOT_MODE],
                   p[HEARTBEAT_INTERVAL], p[HEARTBEAT_PREFIX], p[DECIMAL_MODE],
                   frozenset(op for op in p[SKIPPED_OPERATIONS] if op != "none"), p[MAX_BATCH_SIZE],
                   p[POLL_INTERVAL])

    def dsn(self) -> dict[str, Any]:
        """psycopg2 connection keywords; UTC and ISO dates so values' text forms are predictable."""
        dsn: dict[str, Any] = {"host": self.hostname, "port": str(self.port), "user": self.user, "dbname": self.dbname,
               "options": "-c TimeZone=UTC -c DateStyle=ISO -c extra_float_digits=3",
               "application_name": f"moldau-cdc-{self.topic_prefix}"}
        if self.password:
            dsn["password"] = self.password
        return dsn
