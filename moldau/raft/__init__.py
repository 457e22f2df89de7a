"""Sans-I/O Raft core for the metadata quorum (KRaft-style: pre-vote, fetch-based replication)."""

from moldau.raft.core import Config, NotLeader, RaftNode, ReplicaState, Role
from moldau.raft.log import Entry, Log, PersistedState, Snapshot
from moldau.raft.messages import (
    Action,
    Append,
    BeginEpoch,
    EndEpoch,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    InstallSnapshot,
    Message,
    SaveSnapshot,
    Send,
    SetTermVote,
    Truncate,
    VoteRequest,
    VoteResponse,
)

__all__ = [
    "Action", "Append", "BeginEpoch", "Config", "EndEpoch", "Entry", "FetchRequest", "FetchResponse",
    "FetchSnapshotRequest", "FetchSnapshotResponse", "InstallSnapshot", "Log", "Message", "NotLeader",
    "PersistedState", "RaftNode", "ReplicaState", "Role", "SaveSnapshot", "Send", "SetTermVote", "Snapshot",
    "Truncate", "VoteRequest", "VoteResponse",
]
