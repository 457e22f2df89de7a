"""Broker liveness: when the last heartbeat came (volatile), and what a heartbeat decides (pure).

Only the active controller tracks heartbeats, in memory: after a failover the new controller does not know when
brokers last called, so it calls `reset` and gives every broker a full session before fencing anyone. Time is
passed in as `now_ms` (monotonic milliseconds), never read here.

What a heartbeat changes goes through the metadata log like any other change: `decide` returns the records, the
controller commits them, and brokers learn their new state from the next heartbeat's answer.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from moldau.metadata.image import MetadataImage
from moldau.metadata.leader_election import AllowUnclean, fence_changes, unfence_changes
from moldau.metadata.log_dirs import all_offline, offline_dir_changes
from moldau.metadata.records import FenceBrokerRecord, MetadataRecord, UnfenceBrokerRecord
from moldau.protocol.errors import ErrorCode


class BrokerHeartbeats:
    """Last contact per broker; brokers silent for longer than the session timeout are due to be fenced."""

    def __init__(self, session_timeout_ms: int) -> None:
        self.session_timeout_ms = session_timeout_ms
        self._last_contact_ms: dict[int, int] = {}

    def touch(self, broker_id: int, now_ms: int) -> None:
        # Never move backwards: a late, reordered call must not shorten the broker's session.
        self._last_contact_ms[broker_id] = max(now_ms, self._last_contact_ms.get(broker_id, now_ms))

    def forget(self, broker_id: int) -> None:
        self._last_contact_ms.pop(broker_id, None)

    def reset(self, now_ms: int, broker_ids: Iterable[int]) -> None:
        """Start over with these brokers, each with a full session from now (a newly elected controller)."""
        self._last_contact_ms = dict.fromkeys(broker_ids, now_ms)

    def last_contact_ms(self, broker_id: int) -> int | None:
        return self._last_contact_ms.get(broker_id)

    def expired(self, now_ms: int, live_brokers: Iterable[int] | None = None) -> list[int]:
        """Brokers whose last heartbeat is older than the session timeout, sorted.

        Pass `image.live_brokers()` as `live_brokers` to consider only registered, unfenced brokers (fencing a
        fenced broker again is pointless). A live broker never heard of gets a full session from now instead of
        being fenced at once: only silence for a whole session proves a broker is gone.
        """
        if live_brokers is None:
            candidates: Iterable[int] = self._last_contact_ms
        else:
            candidates = list(live_brokers)
            for broker_id in candidates:
                self._last_contact_ms.setdefault(broker_id, now_ms)
        return sorted(b for b in candidates if now_ms - self._last_contact_ms[b] > self.session_timeout_ms)


@dataclass(frozen=True, slots=True)
class HeartbeatDecision:
    """The answer to a broker heartbeat, and the records to commit before sending it.

    `is_fenced` and `should_shut_down` describe the broker once `records` are committed.
    """

    error: ErrorCode | None
    is_caught_up: bool
    is_fenced: bool
    should_shut_down: bool
    records: list[MetadataRecord] = field(default_factory=list)


def _never(topic: str) -> bool:
    return False


def decide(image: MetadataImage, broker_id: int, broker_epoch: int, current_metadata_offset: int,
           want_fence: bool, want_shutdown: bool, allow_unclean: AllowUnclean = _never,
           offline_dirs: Collection[str] = ()) -> HeartbeatDecision:
    """Decide a heartbeat against the current image, in order of precedence:

    0. log directories named offline (KIP-858) that the registration still lists online are dropped from it,
       and the broker's replicas in them leave their ISRs and leadership (whatever else the heartbeat decides);
       a broker whose every directory is offline is handled as one that wants to be fenced;

    1. unknown broker or a broker epoch other than its registration's: stale_broker_epoch (the broker must
       register again);
    2. want_shutdown (controlled shutdown): an unfenced broker is fenced, which moves its leaderships away; once
       that is committed (the broker is fenced and leads nothing) the answer is should_shut_down;
    3. want_fence: an unfenced broker is fenced;
    4. a fenced broker that has replayed the metadata log up to its own registration (current_metadata_offset >=
       broker_epoch, the registration's offset) is unfenced and takes back leaderless partitions in its ISR;
    5. otherwise nothing changes.
    """
    registration = image.brokers.get(broker_id)
    if registration is None or registration.broker_epoch != broker_epoch:
        return HeartbeatDecision(ErrorCode.stale_broker_epoch, is_caught_up=False, is_fenced=True,
                                 should_shut_down=False)
    lost = offline_dir_changes(image, broker_id, offline_dirs, allow_unclean)
    if lost:
        decision = decide(image.apply(lost, image.offset), broker_id, broker_epoch, current_metadata_offset,
                          want_fence, want_shutdown, allow_unclean)
        return HeartbeatDecision(decision.error, decision.is_caught_up, decision.is_fenced,
                                 decision.should_shut_down, lost + decision.records)
    caught_up = current_metadata_offset >= registration.broker_epoch
    want_fence = want_fence or all_offline(image, broker_id, offline_dirs)
    if want_shutdown or want_fence:
        if not registration.fenced:
            return HeartbeatDecision(None, caught_up, is_fenced=True, should_shut_down=False,
                                     records=_fence(image, broker_id, broker_epoch, allow_unclean))
        leads = any(p.leader == broker_id for _, p in image.partitions_of(broker_id))
        return HeartbeatDecision(None, caught_up, is_fenced=True, should_shut_down=want_shutdown and not leads)
    if registration.fenced and caught_up:
        records: list[MetadataRecord] = [UnfenceBrokerRecord(broker_id, broker_epoch)]
        records += unfence_changes(image, broker_id, allow_unclean)
        return HeartbeatDecision(None, caught_up, is_fenced=False, should_shut_down=False, records=records)
    return HeartbeatDecision(None, caught_up, is_fenced=registration.fenced, should_shut_down=False)


def fence(image: MetadataImage, broker_id: int, allow_unclean: AllowUnclean = _never, *,
          stopped_cleanly: bool = False) -> list[MetadataRecord]:
    """Records that fence the broker's current registration (session expired, or a new incarnation registers);
    empty if unknown or fenced. `stopped_cleanly`: the registration is replaced by a new incarnation of the broker
    that closed every log of it cleanly (its previous broker epoch, KIP-966): it keeps the leaderships nobody else
    could take (see `fence_changes`), so that a lone broker's restart changes no partition."""
    registration = image.brokers.get(broker_id)
    if registration is None or registration.fenced:
        return []
    return _fence(image, broker_id, registration.broker_epoch, allow_unclean, keep_sole_leaderships=stopped_cleanly)


def _fence(image: MetadataImage, broker_id: int, broker_epoch: int,
           allow_unclean: AllowUnclean, *, keep_sole_leaderships: bool = False) -> list[MetadataRecord]:
    records: list[MetadataRecord] = [FenceBrokerRecord(broker_id, broker_epoch)]
    records += fence_changes(image, broker_id, allow_unclean, keep_sole_leaderships=keep_sole_leaderships)
    return records
