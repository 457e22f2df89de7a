"""The session id and epoch a Fetch request carries (KIP-227), as both sides of a fetch session read them: id 0 is
no session; epoch 0 asks for a new session, -1 for none, and the epochs of a session's incremental requests count
up from 1, wrapping from 2^31-1 back to 1."""

from __future__ import annotations

__all__ = ["FINAL_EPOCH", "INITIAL_EPOCH", "INVALID_SESSION_ID", "next_epoch"]

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """The epoch of the request after one with `epoch`: 1 after the full fetch that made the session."""
    return 1 if epoch >= MAX_EPOCH else epoch + 1
