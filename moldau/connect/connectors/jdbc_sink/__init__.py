"""A PostgreSQL sink connector with the config names and semantics of Confluent's JDBC sink connector
(`io.confluent.connect.jdbc.JdbcSinkConnector`), so a JDBC sink config written for PostgreSQL works unchanged.

Modules: `config` (the connector's configs and the connection URL), `dialect` (PostgreSQL's identifiers, types
and the SQL statements), `fields` (which columns a record maps to, per `pk.mode`), `rows` (a record's column
values), `tables` (reading, creating and evolving the destination tables), `writer` (one transaction per batch)
and `connector` (the connector and its task).
"""

from moldau.connect.connectors.jdbc_sink.connector import JdbcSinkConnector, JdbcSinkTask

__all__ = ["JdbcSinkConnector", "JdbcSinkTask"]
