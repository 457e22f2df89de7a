"""The metadata quorum's backoffs, as pure functions of the injected time and random generator.

- Election backoff (``controller.quorum.election.backoff.max.ms``): a candidate whose election failed waits a
  random time before it stands again, drawn from a range that doubles with each failure in a row. Candidates
  that split the vote, and would otherwise keep standing at the same moments, drift apart.
- Retry backoff (``controller.quorum.retry.backoff.ms``): after a request to a node failed, nothing is sent to
  that node for a while, so an unreachable peer is not asked again at every tick.
"""

from __future__ import annotations

import random

# Kafka's fixed step of the election backoff (not a config there either): the wait is a whole number of steps,
# plus a jitter below one step.
ELECTION_BACKOFF_STEP_MS = 50
# The range stops doubling after this many failures (2**11 steps, about 100 s): the cap is far below by then.
_MAX_DOUBLINGS = 11


def election_backoff_ms(failed_elections: int, max_ms: int, rng: random.Random) -> int:
    """How long to wait after the `failed_elections`-th failed election in a row (at least 1).

    A number of steps drawn uniformly from [0, 2**failed_elections), capped at `max_ms`, plus a jitter drawn from
    [0, one step). The jitter keeps nodes that all reached the cap from standing again in lockstep.
    """
    if failed_elections < 1:
        raise ValueError(f"failed_elections must be at least 1, not {failed_elections}")
    steps = rng.randrange(1 << min(failed_elections, _MAX_DOUBLINGS))
    return min(ELECTION_BACKOFF_STEP_MS * steps, max_ms) + rng.randrange(ELECTION_BACKOFF_STEP_MS)


class RetryBackoff:
    """Until when each node that a request failed to gets no further request."""

    def __init__(self, backoff_ms: int) -> None:
        self.backoff_ms = backoff_ms
        self._until_ms: dict[int, int] = {}

    def failed(self, node: int, now_ms: int) -> None:
        """A request to `node` failed at `now_ms`."""
        self._until_ms[node] = now_ms + self.backoff_ms

    def ready(self, node: int, now_ms: int) -> bool:
        """True if a request may go to `node` at `now_ms`."""
        until = self._until_ms.get(node)
        if until is None:
            return True
        if now_ms < until:
            return False
        del self._until_ms[node]
        return True
