"""Client settings for the two clusters a mirror connector talks to, from MirrorMaker 2's connector keys.

A connector config reaches the source cluster through `source.cluster.*` (connection and security: the
Java client's names or librdkafka's) and per-client `source.consumer.*` / `source.producer.*` /
`source.admin.*` overrides (librdkafka's names); the target likewise through `target.cluster.*` and
`target.*`. MirrorMaker 2's dedicated mode (`moldau.mirror.config`) writes exactly these keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from moldau.cli.command_config import to_librdkafka

__all__ = ["Side", "admin_config", "client_config", "cluster_settings"]

Side = Literal["source", "target"]
Role = Literal["consumer", "producer", "admin"]


def _with_prefix_stripped(props: Mapping[str, str], prefix: str) -> dict[str, str]:
    return {key[len(prefix):]: value for key, value in props.items() if key.startswith(prefix)}


def cluster_settings(props: Mapping[str, str], side: Side) -> dict[str, str]:
    """The `<side>.cluster.*` keys, prefix stripped."""
    return _with_prefix_stripped(props, f"{side}.cluster.")


def client_config(props: Mapping[str, str], side: Side, role: Role) -> dict[str, Any]:
    """librdkafka settings for a `role` client of the `side` cluster. Without `bootstrap.servers` for that
    side it is a ValueError naming the key."""
    cluster = cluster_settings(props, side)
    if not cluster.get("bootstrap.servers"):
        raise ValueError(f"{side}.cluster.bootstrap.servers: required")
    connection = {key: value for key, value in cluster.items()
                  if key == "bootstrap.servers" or key.startswith(("security.", "ssl.", "sasl."))}
    return {**to_librdkafka(connection), **_with_prefix_stripped(props, f"{side}.{role}.")}


def admin_config(props: Mapping[str, str], side: Side) -> dict[str, Any]:
    return client_config(props, side, "admin")
