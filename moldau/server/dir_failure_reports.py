"""Which failed log directories the controller has not been told of yet, and for how long (KIP-858).

A broker tells the controller of a failed log directory in its heartbeats, so that the controller moves leadership
of the partitions in it to other replicas. Until a heartbeat naming it has been answered, those partitions have
no leader that can serve them and nobody else knows. As in Kafka, a broker that cannot get that news through
within `log.dir.failure.timeout.ms` stops: then the controller fences it after its session timeout and moves
every leadership it had, the failed directory's included. Sans-I/O: the lifecycle tells it what it saw and sent,
with the time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(slots=True)
class DirFailureReports:
    timeout_ms: int  # log.dir.failure.timeout.ms
    _since_ms: dict[str, float] = field(default_factory=dict)  # directory id -> first seen offline, not yet told
    _told: set[str] = field(default_factory=set)

    def seen_offline(self, directory_ids: Iterable[str], now_ms: float) -> None:
        """These directories are offline now; the clock starts at the first time each is seen."""
        for directory in directory_ids:
            if directory not in self._told:
                self._since_ms.setdefault(directory, now_ms)

    def told(self, directory_ids: Iterable[str]) -> None:
        """A heartbeat naming these directories as offline was answered without error."""
        for directory in directory_ids:
            self._since_ms.pop(directory, None)
            self._told.add(directory)

    def overdue(self, now_ms: float) -> list[str]:
        """The directories offline for `timeout_ms` or more that the controller has not been told of."""
        return sorted(d for d, since in self._since_ms.items() if now_ms - since >= self.timeout_ms)
