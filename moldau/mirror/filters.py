"""Which topics, consumer groups and topic configs a flow replicates: MirrorMaker 2's default filters, with
its config names, defaults and deprecated aliases.

Each config is a comma-separated list of names and regexes, matched against the whole name (as Java's
`matches`); an exclude wins over an include.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["ConfigPropertyFilter", "GroupFilter", "TopicFilter", "pattern_list"]

TOPICS = "topics"
TOPICS_EXCLUDE = "topics.exclude"
GROUPS = "groups"
GROUPS_EXCLUDE = "groups.exclude"
CONFIG_PROPERTIES_EXCLUDE = "config.properties.exclude"

DEFAULTS = {
    TOPICS: ".*",
    TOPICS_EXCLUDE: r".*[\-\.]internal, .*\.replica, __.*",
    GROUPS: ".*",
    GROUPS_EXCLUDE: "console-consumer-.*, connect-.*, __.*",
    # Properties that describe the source cluster rather than the data, or would break the target if copied.
    CONFIG_PROPERTIES_EXCLUDE: (r"follower\.replication\.throttled\.replicas, "
                                r"leader\.replication\.throttled\.replicas, "
                                r"message\.timestamp\.difference\.max\.ms, message\.timestamp\.type, "
                                r"unclean\.leader\.election\.enable, min\.insync\.replicas"),
}
# MirrorMaker 2's deprecated names, still read when the new one is absent.
ALIASES = {
    TOPICS_EXCLUDE: "topics.blacklist",
    GROUPS_EXCLUDE: "groups.blacklist",
    CONFIG_PROPERTIES_EXCLUDE: "config.properties.blacklist",
}


def pattern_list(config: Mapping[str, str], name: str) -> re.Pattern[str] | None:
    """The config's list as one pattern matching any of its entries; None for an empty list. A bad regex is
    a ValueError naming the config."""
    raw = config.get(name)
    if raw is None and name in ALIASES:
        raw = config.get(ALIASES[name])
    if raw is None:
        raw = DEFAULTS[name]
    entries = [entry.strip() for entry in raw.split(",") if entry.strip()]
    if not entries:
        return None
    try:
        return re.compile("|".join(f"(?:{entry})" for entry in entries))
    except re.error as e:
        raise ValueError(f"{name}: invalid regex in {raw!r}: {e}") from e


def _included(name: str, include: re.Pattern[str] | None, exclude: re.Pattern[str] | None) -> bool:
    return include is not None and include.fullmatch(name) is not None and not (
        exclude is not None and exclude.fullmatch(name) is not None)


class TopicFilter:
    def __init__(self, config: Mapping[str, str]) -> None:
        self._include = pattern_list(config, TOPICS)
        self._exclude = pattern_list(config, TOPICS_EXCLUDE)

    def should_replicate(self, topic: str) -> bool:
        return _included(topic, self._include, self._exclude)


class GroupFilter:
    def __init__(self, config: Mapping[str, str]) -> None:
        self._include = pattern_list(config, GROUPS)
        self._exclude = pattern_list(config, GROUPS_EXCLUDE)

    def should_replicate(self, group: str) -> bool:
        return _included(group, self._include, self._exclude)


class ConfigPropertyFilter:
    def __init__(self, config: Mapping[str, str]) -> None:
        self._exclude = pattern_list(config, CONFIG_PROPERTIES_EXCLUDE)

    def should_replicate(self, prop: str) -> bool:
        return self._exclude is None or self._exclude.fullmatch(prop) is None
