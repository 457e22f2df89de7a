"""Client metrics subscriptions (KIP-714): CLIENT_METRICS config resources and which clients they match.

A subscription is a config resource of type 16 with Kafka's ClientMetricsConfigs: `metrics` (metric name
prefixes, `*` for all), `interval.ms` (how often matching clients push, 100 to 3600000, default 300000) and
`match` (`selector=regex` pairs over the client's attributes; none matches every client). They are stored as
ConfigRecords in the metadata log like any dynamic config.

A client's subscription is the union of the metrics of every subscription that matches it, at the shortest
interval among them; its id is a checksum of that and of the client instance, so it changes whenever what the
client should push changes, which is how a push with a stale id is recognised (UNKNOWN_SUBSCRIPTION_ID).

Pure: no I/O.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

from moldau.config import ConfigError

RESOURCE_CLIENT_METRICS = 16
METRICS, INTERVAL_MS, MATCH = "metrics", "interval.ms", "match"
DEFAULT_INTERVAL_MS = 300_000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
ALL_METRICS = "*"
SELECTORS = ("client_instance_id", "client_id", "client_software_name", "client_software_version",
             "client_source_address", "client_source_port")
# (name, Kafka config type number, default, documentation), for DescribeConfigs.
CONFIG_DEFS = (
    (METRICS, 7, "", "Metric name prefixes matching clients push; * for every metric."),
    (INTERVAL_MS, 3, str(DEFAULT_INTERVAL_MS), "How often matching clients push their metrics, in ms."),
    (MATCH, 7, "", "selector=regex pairs a client's attributes must all match: client_instance_id, client_id, "
                   "client_software_name, client_software_version, client_source_address, client_source_port."),
)


@dataclass(frozen=True, slots=True)
class ClientAttributes:
    """What a subscription's `match` selects on (KIP-714's client matching selectors)."""

    client_instance_id: str
    client_id: str
    client_software_name: str
    client_software_version: str
    client_source_address: str
    client_source_port: str


@dataclass(frozen=True, slots=True)
class Subscription:
    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: tuple[tuple[str, re.Pattern[str]], ...]

    def matches(self, client: ClientAttributes) -> bool:
        return all(pattern.fullmatch(getattr(client, selector)) for selector, pattern in self.match)


@dataclass(frozen=True, slots=True)
class ClientSubscription:
    """What one client is asked to push."""

    subscription_id: int
    metrics: tuple[str, ...]  # empty: nothing; ("",): every metric (the protocol's way to say "*")
    interval_ms: int


def parse(name: str, configs: Mapping[str, str]) -> Subscription:
    """A subscription from its configs. Raises ConfigError (INVALID_CONFIG) for unknown names or bad values."""
    unknown = sorted(set(configs) - {METRICS, INTERVAL_MS, MATCH})
    if unknown:
        raise ConfigError(f"unknown client metrics configs: {', '.join(unknown)}")
    metrics = tuple(m.strip() for m in configs.get(METRICS, "").split(",") if m.strip())
    raw_interval = configs.get(INTERVAL_MS, str(DEFAULT_INTERVAL_MS)).strip()
    if not re.fullmatch(r"[0-9]+", raw_interval) or not MIN_INTERVAL_MS <= int(raw_interval) <= MAX_INTERVAL_MS:
        raise ConfigError(f"Invalid value {raw_interval} for configuration {INTERVAL_MS}: "
                          f"not a number in [{MIN_INTERVAL_MS},...,{MAX_INTERVAL_MS}]")
    return Subscription(name, metrics, int(raw_interval), _match(configs.get(MATCH, "")))


def _match(text: str) -> tuple[tuple[str, re.Pattern[str]], ...]:
    out = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        selector, sep, regex = item.partition("=")
        if not sep or selector.strip() not in SELECTORS:
            raise ConfigError(f"Invalid value {item} for configuration {MATCH}: expected selector=regex with a "
                              f"selector among {', '.join(SELECTORS)}")
        try:
            out.append((selector.strip(), re.compile(regex.strip())))
        except re.error as exc:
            raise ConfigError(f"Invalid value {item} for configuration {MATCH}: bad regex: {exc}") from exc
    return tuple(out)


def from_configs(configs: Mapping[tuple[int, str], Mapping[str, str]]) -> list[Subscription]:
    """Every subscription in an image's configs; one that no longer parses is skipped (it was valid when set)."""
    out = []
    for (resource_type, name), values in sorted(configs.items()):
        if resource_type == RESOURCE_CLIENT_METRICS and values:
            try:
                out.append(parse(name, values))
            except ConfigError:
                continue
    return out


def resolve(subscriptions: list[Subscription], client: ClientAttributes) -> ClientSubscription:
    """The combined subscription of every one matching the client."""
    matched = [s for s in subscriptions if s.matches(client)]
    prefixes = sorted({m for s in matched for m in s.metrics})
    metrics: tuple[str, ...] = ("",) if ALL_METRICS in prefixes else tuple(prefixes)
    interval = min((s.interval_ms for s in matched if s.metrics), default=DEFAULT_INTERVAL_MS)
    key = f"{client.client_instance_id}|{interval}|{','.join(metrics)}".encode()
    return ClientSubscription(zlib.crc32(key) - 2**31, metrics, interval)
