"""A fetcher's side of an incremental fetch session (KIP-227): what the next Fetch request to one broker lists.

The first request is a full fetch with session epoch 0, which asks the broker for a session. While the broker keeps
it, each request carries the session id and the next epoch, lists only the partitions whose position changed since
the broker last heard it (or that are new to the session), and names as forgotten those no longer fetched. A
session error in the answer (unknown session, wrong epoch), or a request that got no answer at all (the connection
broke, it timed out: the broker may or may not have seen it), starts over with a full fetch that closes the old
session and asks for a new one, so the two sides never disagree about what the session holds.

No I/O: the fetcher calls `plan` to build a request and `answered` or `failed` with its outcome.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from moldau.protocol.fetch_metadata import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch

__all__ = ["FetchPlan", "FetcherSession"]

K = TypeVar("K", bound=Hashable)  # a partition: (topic id, index)
P = TypeVar("P")  # its fetch position, compared by equality


@dataclass(frozen=True, slots=True)
class FetchPlan(Generic[K, P]):
    session_id: int
    epoch: int
    listed: dict[K, P]  # every partition fetched (full) or those new or moved (incremental)
    forgotten: list[K]

    @property
    def full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)


class FetcherSession(Generic[K, P]):
    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled  # False: every request a full fetch without a session
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH if enabled else FINAL_EPOCH
        self._held: dict[K, P] = {}  # what the broker's session holds for us: the positions it last heard

    def plan(self, wanted: Mapping[K, P]) -> FetchPlan[K, P]:
        """The next request for the partitions to fetch now, at these positions."""
        if self.session_id == INVALID_SESSION_ID or self.epoch == INITIAL_EPOCH:
            return FetchPlan(self.session_id, self.epoch, dict(wanted), [])
        held = self._held
        listed = {key: position for key, position in wanted.items() if held.get(key) != position}
        forgotten = [key for key in held if key not in wanted]
        return FetchPlan(self.session_id, self.epoch, listed, forgotten)

    def answered(self, plan: FetchPlan[K, P], error_code: int, session_id: int) -> None:
        """The broker answered `plan` with this top-level error and session id."""
        if error_code != 0:
            self._start_over()
            return
        if plan.full:
            if self.enabled and session_id != INVALID_SESSION_ID:
                self.session_id, self.epoch, self._held = session_id, next_epoch(INITIAL_EPOCH), dict(plan.listed)
            else:
                self.session_id = INVALID_SESSION_ID  # no room for a session: ask again with the next full fetch
            return
        self.epoch = next_epoch(self.epoch)
        for key in plan.forgotten:
            self._held.pop(key, None)
        self._held.update(plan.listed)

    def failed(self) -> None:
        """The request got no answer: the broker may have moved the session on, or not; start over."""
        self._start_over()

    def _start_over(self) -> None:
        # The next full fetch names the old session (if any), which closes it on the broker and frees its slot.
        self.epoch = INITIAL_EPOCH if self.enabled else FINAL_EPOCH
        self._held = {}
