"""The Raft core's messages in Kafka's KRaft wire format, both ways.

Voters talk to each other with Kafka's own quorum APIs: Vote v2 (with KIP-996's pre-vote flag),
BeginQuorumEpoch v1, EndQuorumEpoch v1, Fetch v17 with a replica id (the follower's fetch is its heartbeat and
acknowledgement, as in KRaft) and FetchSnapshot v1, on the `__cluster_metadata` topic, partition 0, with Kafka's
fixed topic id for it. The one departure is the `records` bytes of a Fetch answer: they carry entries in the
framing of `raft.log` itself (`quorum_store.encode_entry`: length, CRC, offset, epoch, JSON records) rather than
Kafka record batches, because only Moldau nodes read them.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import kio.schema.begin_quorum_epoch.v1.request as bqe_req
import kio.schema.begin_quorum_epoch.v1.response as bqe_resp
import kio.schema.end_quorum_epoch.v1.request as eqe_req
import kio.schema.end_quorum_epoch.v1.response as eqe_resp
import kio.schema.fetch.v17.request as fetch_req
import kio.schema.fetch.v17.response as fetch_resp
import kio.schema.fetch_snapshot.v1.request as snap_req
import kio.schema.fetch_snapshot.v1.response as snap_resp
import kio.schema.update_raft_voter.v0.request as update_voter_req
import kio.schema.vote.v2.request as vote_req
import kio.schema.vote.v2.response as vote_resp

from moldau.config import Voter
from moldau.metadata.quorum_store import encode_entry, read_entries
from moldau.metadata.voters_codec import snapshot_bytes, snapshot_from_bytes
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.raft import (
    BeginEpoch,
    EndEpoch,
    Entry,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    VoteRequest,
    VoteResponse,
    VoterInfo,
)

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka's fixed id of the metadata topic
_NO_THROTTLE = datetime.timedelta(0)
MAX_FETCH_BYTES = 8 * 1024 * 1024


class WireError(ValueError):
    """A quorum message that does not fit the protocol (wrong topic, corrupt entries)."""


# -- Vote ---------------------------------------------------------------------------------------------------------


def encode_vote_request(msg: VoteRequest, cluster_id: str) -> Any:
    part = make(vote_req.PartitionData,
        partition_index=0, replica_epoch=msg.term, replica_id=msg.src, replica_directory_id=None,
        voter_directory_id=None, last_offset_epoch=msg.last_epoch, last_offset=msg.end_offset,
        pre_vote=msg.pre_vote)
    return make(vote_req.VoteRequest, cluster_id=cluster_id, voter_id=msg.dst,
                                topics=(make(vote_req.TopicData, topic_name=METADATA_TOPIC, partitions=(part,)),))


def decode_vote_request(request: Any, dst: int) -> VoteRequest:
    part = _only_partition(request.topics)
    return VoteRequest(src=part.replica_id, dst=dst, term=part.replica_epoch, last_epoch=part.last_offset_epoch,
                       end_offset=part.last_offset, pre_vote=part.pre_vote)


def encode_vote_response(msg: VoteResponse, leader_address: Voter | None = None) -> Any:
    """`leader_address`, the address of the leader the answer names, goes in NodeEndpoints as in Kafka: a voter
    whose own set lacks that leader may not know where it is (`RaftNode._probe`)."""
    part = make(vote_resp.PartitionData, partition_index=0, error_code=ErrorCode.none, leader_id=_id(msg.leader_id),
                                   leader_epoch=msg.term, vote_granted=msg.granted)
    return make(vote_resp.VoteResponse, error_code=ErrorCode.none,
                                  topics=(make(vote_resp.TopicData, topic_name=METADATA_TOPIC, partitions=(part,)),),
                                  node_endpoints=_node_endpoints(vote_resp.NodeEndpoint, leader_address))


def vote_error_response(code: ErrorCode) -> Any:
    return make(vote_resp.VoteResponse, error_code=code, topics=())


def decode_vote_response(response: Any, src: int, dst: int, pre_vote: bool) -> VoteResponse | None:
    if response.error_code != ErrorCode.none or not response.topics:
        return None
    part = _only_partition(response.topics)
    if part.error_code != ErrorCode.none:
        return None
    leader = part.leader_id if part.leader_id >= 0 else None
    return VoteResponse(src=src, dst=dst, term=part.leader_epoch, granted=part.vote_granted, pre_vote=pre_vote,
                        leader_id=leader)


# -- BeginQuorumEpoch / EndQuorumEpoch ----------------------------------------------------------------------------


def encode_begin_epoch(msg: BeginEpoch, cluster_id: str) -> Any:
    part = make(bqe_req.PartitionData, partition_index=0, voter_directory_id=None, leader_id=msg.src,
                                 leader_epoch=msg.term)
    return make(bqe_req.BeginQuorumEpochRequest,
        cluster_id=cluster_id, voter_id=msg.dst,
        topics=(make(bqe_req.TopicData, topic_name=METADATA_TOPIC, partitions=(part,)),), leader_endpoints=())


def decode_begin_epoch(request: Any, dst: int) -> BeginEpoch:
    part = _only_partition(request.topics)
    return BeginEpoch(src=part.leader_id, dst=dst, term=part.leader_epoch)


def begin_epoch_response(code: ErrorCode, leader_id: int | None, term: int) -> Any:
    part = make(bqe_resp.PartitionData, partition_index=0, error_code=code, leader_id=_id(leader_id), leader_epoch=term)
    return make(bqe_resp.BeginQuorumEpochResponse,
        error_code=ErrorCode.none, topics=(make(bqe_resp.TopicData, topic_name=METADATA_TOPIC, partitions=(part,)),))


def encode_end_epoch(msg: EndEpoch, cluster_id: str) -> Any:
    part = make(eqe_req.PartitionData, partition_index=0, leader_id=msg.src, leader_epoch=msg.term,
                                 preferred_candidates=())
    return make(eqe_req.EndQuorumEpochRequest,
        cluster_id=cluster_id, topics=(make(eqe_req.TopicData, topic_name=METADATA_TOPIC, partitions=(part,)),),
        leader_endpoints=())


def decode_end_epoch(request: Any, dst: int) -> EndEpoch:
    part = _only_partition(request.topics)
    return EndEpoch(src=part.leader_id, dst=dst, term=part.leader_epoch)


def end_epoch_response(code: ErrorCode, leader_id: int | None, term: int) -> Any:
    part = make(eqe_resp.PartitionData, partition_index=0, error_code=code, leader_id=_id(leader_id), leader_epoch=term)
    return make(eqe_resp.EndQuorumEpochResponse,
        error_code=ErrorCode.none, topics=(make(eqe_resp.TopicData, topic_name=METADATA_TOPIC, partitions=(part,)),))


# -- Fetch --------------------------------------------------------------------------------------------------------


def encode_fetch_request(msg: FetchRequest, cluster_id: str) -> Any:
    part = make(fetch_req.FetchPartition, partition=0, current_leader_epoch=msg.term, fetch_offset=msg.offset,
                                    last_fetched_epoch=msg.last_epoch, log_start_offset=-1,
                                    partition_max_bytes=MAX_FETCH_BYTES, replica_directory_id=None)
    return make(fetch_req.FetchRequest,
        cluster_id=cluster_id, replica_state=make(fetch_req.ReplicaState, replica_id=msg.src, replica_epoch=-1),
        max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=MAX_FETCH_BYTES,
        topics=(make(fetch_req.FetchTopic, topic_id=METADATA_TOPIC_ID, partitions=(part,)),),
        forgotten_topics_data=(), rack_id="")


def is_metadata_fetch(request: Any) -> bool:
    """A fetch of the metadata log (from a voter or observer), as opposed to a consumer's or follower's fetch."""
    return (len(request.topics) == 1 and request.topics[0].topic_id == METADATA_TOPIC_ID
            and request.replica_state.replica_id >= 0)


def decode_fetch_request(request: Any, dst: int) -> FetchRequest:
    if not is_metadata_fetch(request):
        raise WireError("not a fetch of the metadata log")
    (part,) = request.topics[0].partitions
    if part.partition != 0:
        raise WireError(f"the metadata log has one partition, not {part.partition}")
    return FetchRequest(src=request.replica_state.replica_id, dst=dst, term=part.current_leader_epoch,
                        offset=part.fetch_offset, last_epoch=part.last_fetched_epoch)


def encode_fetch_response(msg: FetchResponse, log_start_offset: int, leader_address: Voter | None = None) -> Any:
    """`leader_address`, the address of the leader the answer names (its sender, or the leader a refusal points
    to), goes in NodeEndpoints as in Kafka."""
    code = ErrorCode.none if msg.ok else ErrorCode.not_leader_or_follower
    diverging = make(fetch_resp.EpochEndOffset)
    if msg.diverging_end is not None:
        diverging = make(fetch_resp.EpochEndOffset, epoch=msg.term, end_offset=msg.diverging_end)
    snapshot = make(fetch_resp.SnapshotId)
    if msg.snapshot_id is not None:
        snapshot = make(fetch_resp.SnapshotId, end_offset=msg.snapshot_id[0], epoch=msg.snapshot_id[1])
    leader = msg.src if msg.ok else msg.leader_id
    part = make(fetch_resp.PartitionData,
        partition_index=0, error_code=code, high_watermark=msg.high_watermark, last_stable_offset=-1,
        log_start_offset=log_start_offset, diverging_epoch=diverging,
        current_leader=make(fetch_resp.LeaderIdAndEpoch, leader_id=_id(leader), leader_epoch=msg.term),
        snapshot_id=snapshot, aborted_transactions=None, preferred_read_replica=-1,
        records=encode_entries(msg.offset, msg.entries))
    return make(fetch_resp.FetchResponse,
        throttle_time=_NO_THROTTLE, error_code=ErrorCode.none, session_id=0,
        responses=(make(fetch_resp.FetchableTopicResponse, topic_id=METADATA_TOPIC_ID, partitions=(part,)),),
        node_endpoints=_node_endpoints(fetch_resp.NodeEndpoint, leader_address, rack=None))


def decode_fetch_response(response: Any, request: FetchRequest) -> FetchResponse | None:
    """The core's view of the answer to `request`; None if it carries nothing usable.

    The answer repeats the request's offset and last epoch, so the core can tell it from a late answer to an
    older fetch from the same offset.
    """
    src, dst, offset, last_epoch = request.dst, request.src, request.offset, request.last_epoch
    if response.error_code != ErrorCode.none or len(response.responses) != 1:
        return None
    (part,) = response.responses[0].partitions
    leader = part.current_leader.leader_id
    if part.error_code != ErrorCode.none:
        if part.error_code not in (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch):
            return None
        return FetchResponse(src=src, dst=dst, term=part.current_leader.leader_epoch, ok=False, offset=offset,
                             entries=(), high_watermark=0, leader_id=None if leader < 0 else leader,
                             last_epoch=last_epoch)
    diverging = part.diverging_epoch.end_offset if part.diverging_epoch.epoch >= 0 else None
    snapshot_id = None
    if part.snapshot_id.end_offset >= 0:
        snapshot_id = (part.snapshot_id.end_offset, part.snapshot_id.epoch)
    return FetchResponse(src=src, dst=dst, term=part.current_leader.leader_epoch, ok=True, offset=offset,
                         entries=decode_entries(offset, part.records or b""), high_watermark=part.high_watermark,
                         diverging_end=diverging, snapshot_id=snapshot_id, last_epoch=last_epoch)


def encode_entries(offset: int, entries: tuple[Entry, ...]) -> bytes:
    return b"".join(encode_entry(offset + i, entry) for i, entry in enumerate(entries))


def decode_entries(offset: int, data: bytes) -> tuple[Entry, ...]:
    """The entries of a Fetch answer, which must start at `offset` and be whole: anything else is an error."""
    read, end = read_entries(data)
    if end != len(data):
        raise WireError(f"corrupt or truncated metadata entry at byte {end} of a fetch answer")
    if read and read[0][1] != offset:
        raise WireError(f"metadata entries start at offset {read[0][1]}, expected {offset}")
    return tuple(entry for _, _, entry in read)


# -- FetchSnapshot ------------------------------------------------------------------------------------------------


def encode_fetch_snapshot_request(msg: FetchSnapshotRequest, cluster_id: str, position: int) -> Any:
    part = make(snap_req.PartitionSnapshot,
        partition=0, current_leader_epoch=msg.term,
        snapshot_id=make(snap_req.SnapshotId, end_offset=msg.end_offset, epoch=msg.last_epoch), position=position,
        replica_directory_id=None)
    return make(snap_req.FetchSnapshotRequest,
        cluster_id=cluster_id, replica_id=msg.src, max_bytes=MAX_FETCH_BYTES,
        topics=(make(snap_req.TopicSnapshot, name=METADATA_TOPIC, partitions=(part,)),))


def decode_fetch_snapshot_request(request: Any, dst: int) -> tuple[FetchSnapshotRequest, int]:
    part = _only_partition(request.topics)
    msg = FetchSnapshotRequest(src=request.replica_id, dst=dst, term=part.current_leader_epoch,
                               end_offset=part.snapshot_id.end_offset, last_epoch=part.snapshot_id.epoch)
    return msg, part.position


def encode_fetch_snapshot_response(msg: FetchSnapshotResponse, position: int, max_bytes: int,
                                   leader_id: int | None) -> Any:
    code = ErrorCode.none
    data = b""
    snapshot_id = make(snap_resp.SnapshotId, end_offset=-1, epoch=-1)
    if not msg.ok:
        code = ErrorCode.not_leader_or_follower
    elif msg.snapshot is None:
        code = ErrorCode.snapshot_not_found
    else:
        data = snapshot_bytes(msg.snapshot)
        snapshot_id = make(snap_resp.SnapshotId, end_offset=msg.snapshot.end_offset, epoch=msg.snapshot.last_epoch)
        if not 0 <= position <= len(data):
            code = ErrorCode.position_out_of_range
    chunk = data[position:position + max_bytes] if code == ErrorCode.none else b""
    part = make(snap_resp.PartitionSnapshot,
        index=0, error_code=code, snapshot_id=snapshot_id,
        current_leader=make(snap_resp.LeaderIdAndEpoch, leader_id=_id(leader_id), leader_epoch=msg.term),
        size=len(data), position=position, unaligned_records=chunk)
    return make(snap_resp.FetchSnapshotResponse,
        throttle_time=_NO_THROTTLE, error_code=ErrorCode.none,
        topics=(make(snap_resp.TopicSnapshot, name=METADATA_TOPIC, partitions=(part,)),))


def decode_fetch_snapshot_chunk(response: Any) -> tuple[ErrorCode, int, int, int, int, bytes]:
    """(error, leader epoch, snapshot end offset, snapshot epoch, total size, chunk) of one answer."""
    part = _only_partition(response.topics)
    return (ErrorCode(part.error_code), part.current_leader.leader_epoch, part.snapshot_id.end_offset,
            part.snapshot_id.epoch, part.size, bytes(part.unaligned_records or b""))


def snapshot_response(src: int, dst: int, term: int, end_offset: int, epoch: int, data: bytes | None
                      ) -> FetchSnapshotResponse:
    snapshot = None if data is None else snapshot_from_bytes(end_offset, epoch, data)
    return FetchSnapshotResponse(src=src, dst=dst, term=term, ok=True, snapshot=snapshot)


# -- helpers ------------------------------------------------------------------------------------------------------


def _only_partition(topics: Any) -> Any:
    if len(topics) != 1 or len(topics[0].partitions) != 1:
        raise WireError("a quorum request names exactly one partition of the metadata topic")
    part = topics[0].partitions[0]
    name = getattr(topics[0], "topic_name", getattr(topics[0], "name", METADATA_TOPIC))
    index = getattr(part, "partition_index", getattr(part, "partition", getattr(part, "index", 0)))
    if name != METADATA_TOPIC or index != 0:
        raise WireError(f"unknown quorum partition {name}-{index}")
    return part


def _id(node_id: int | None) -> int:
    return -1 if node_id is None else node_id


def _node_endpoints(entity: Any, address: Voter | None, **extra: Any) -> tuple[Any, ...]:
    if address is None or not 0 < address.port < 65536:
        return ()
    return (make(entity, node_id=address.node_id, host=address.host, port=address.port, **extra),)


def node_endpoints(response: Any) -> list[Voter]:
    """The addresses a Vote or Fetch answer gives in NodeEndpoints (Kafka's: the leaders it names)."""
    return [Voter(e.node_id, e.host, e.port) for e in response.node_endpoints if e.node_id >= 0 and e.port > 0]


# -- UpdateRaftVoter (KIP-853) -----------------------------------------------------------------------------------


def update_voter_request(voter: VoterInfo, cluster_id: str, epoch: int) -> Any:
    """A voter's UpdateRaftVoter v0: its directory id and endpoints, and the kraft.version range it supports."""
    return make(update_voter_req.UpdateRaftVoterRequest, cluster_id=cluster_id, current_leader_epoch=epoch,
                voter_id=voter.node_id, voter_directory_id=voter.directory_id,
                listeners=tuple(make(update_voter_req.Listener, name=e.name, host=e.host, port=e.port)
                                for e in voter.endpoints),
                k_raft_version_feature=make(update_voter_req.KRaftVersionFeature, min_supported_version=0,
                                            max_supported_version=1))
