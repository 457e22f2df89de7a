"""One scrape of a node's `/metrics`, parsed with prometheus-client's own parser: samples by name and labels."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

Labels = frozenset[tuple[str, str]]


class Scrape:
    def __init__(self, url: str, timeout_s: float = 10.0) -> None:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            self.content_type = response.headers["Content-Type"]
            text = response.read().decode()
        self.samples: dict[str, dict[Labels, float]] = {}
        self.types: dict[str, str] = {}
        for family in text_string_to_metric_families(text):
            self.types[family.name] = family.type
            for sample in family.samples:
                self.samples.setdefault(sample.name, {})[frozenset(sample.labels.items())] = sample.value

    def value(self, name: str, **labels: str) -> float:
        return self.samples[name][frozenset(labels.items())]

    def get(self, name: str, **labels: str) -> float | None:
        return self.samples.get(name, {}).get(frozenset(labels.items()))

    def labelled(self, name: str, **labels: str) -> dict[Labels, float]:
        """The samples of `name` whose labels include `labels`."""
        wanted = set(labels.items())
        return {key: v for key, v in self.samples.get(name, {}).items() if wanted <= key}
