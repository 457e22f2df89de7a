"""Sans-I/O Raft core for the metadata quorum (KRaft-style: pre-vote, fetch-based replication)."""

from moldau.raft.core import Config, NotLeader, RaftNode, Role
from moldau.raft.log import Entry, PersistedState
from moldau.raft.messages import (
    Action,
    Append,
    BeginEpoch,
    FetchRequest,
    FetchResponse,
    Message,
    Send,
    SetTermVote,
    Truncate,
    VoteRequest,
    VoteResponse,
)

__all__ = [
    "Action", "Append", "BeginEpoch", "Config", "Entry", "FetchRequest", "FetchResponse", "Message",
    "NotLeader", "PersistedState", "RaftNode", "Role", "Send", "SetTermVote", "Truncate",
    "VoteRequest", "VoteResponse",
]
