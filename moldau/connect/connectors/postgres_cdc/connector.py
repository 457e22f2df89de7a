"""The connector class: Debezium's `io.debezium.connector.postgresql.PostgresConnector`, one task."""

from __future__ import annotations

from collections.abc import Mapping

from moldau.connect.api import SourceConnector, Task
from moldau.connect.config import ConfigDef, ConfigValue

from . import config
from .task import PostgresCdcSourceTask

__all__ = ["PostgresCdcSourceConnector"]


class PostgresCdcSourceConnector(SourceConnector):
    """Captures row changes of a PostgreSQL database into `<topic.prefix>.<schema>.<table>` topics."""

    aliases = ("io.debezium.connector.postgresql.PostgresConnector", "PostgresConnector")

    def __init__(self) -> None:
        self.props: dict[str, str] = {}

    def config_def(self) -> ConfigDef:
        return config.config_def()

    def validate(self, props: Mapping[str, str]) -> list[ConfigValue]:
        return config.validate(props)

    def start(self, props: Mapping[str, str]) -> None:
        config.PostgresCdcConfig.from_props(props)  # a bad config fails the connector, not its task
        self.props = dict(props)

    def task_class(self) -> type[Task]:
        return PostgresCdcSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]  # one replication slot, one reader

    def stop(self) -> None:
        pass
