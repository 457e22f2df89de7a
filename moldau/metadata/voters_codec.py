"""How the quorum's voter set (a `VotersRecord`, KIP-853) is written: in a metadata-log entry, and at the end
of a snapshot's data (so a snapshot fetched from the leader brings the voter set with it).

The encoding is one JSON line whose first key is `"type":"VotersRecord"`; metadata records put their type last,
so the line cannot be mistaken for one of them.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from moldau.raft import Endpoint, Snapshot, VoterInfo, VotersRecord

_PREFIX = b'{"type":"VotersRecord"'


def encode_voters(record: VotersRecord) -> bytes:
    voters = [{"id": v.node_id, "directory_id": None if v.directory_id is None else str(v.directory_id),
               "endpoints": [[e.name, e.host, e.port] for e in v.endpoints]} for v in record.voters]
    return json.dumps({"type": "VotersRecord", "version": 0, "voters": voters}, separators=(",", ":")).encode()


def decode_voters(payload: bytes) -> VotersRecord:
    body = json.loads(payload)
    return VotersRecord(tuple(_voter(v) for v in body["voters"]))


def _voter(v: dict[str, Any]) -> VoterInfo:
    directory = v.get("directory_id")
    return VoterInfo(int(v["id"]), None if directory is None else uuid.UUID(directory),
                     tuple(Endpoint(str(n), str(h), int(p)) for n, h, p in v.get("endpoints", ())))


def snapshot_bytes(snapshot: Snapshot) -> bytes:
    """The snapshot's data, with its voter set (if any) as the last line."""
    assert isinstance(snapshot.data, bytes)
    if snapshot.voters is None:
        return snapshot.data
    return snapshot.data + b"\n" + encode_voters(snapshot.voters) if snapshot.data else encode_voters(snapshot.voters)


def snapshot_from_bytes(end_offset: int, last_epoch: int, raw: bytes) -> Snapshot:
    """The inverse of `snapshot_bytes`."""
    head, _, last = raw.rpartition(b"\n")
    if last.startswith(_PREFIX):
        return Snapshot(end_offset, last_epoch, head, decode_voters(last))
    return Snapshot(end_offset, last_epoch, raw)
