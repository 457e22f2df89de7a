"""The durable state of one metadata-quorum member: term and vote, the Raft log, and the latest snapshot.

Files in the metadata directory:
- `quorum-state`: `{"term": t, "voted_for": v}`, replaced atomically (write, fsync, rename, fsync the dir);
- `raft.log`: entries `length u32 | crc32c u32 | offset i64 | epoch i32 | kind u8 | payload`, the CRC covering
  everything after it. kind 0 is a leader-change entry (no payload), kind 1 carries metadata records as JSON
  lines, kind 2 a voter set (KIP-853's VotersRecord, moldau.metadata.voters_codec). Appends are written at
  once and fsynced by `sync()`, which the driver calls before anything that
  depends on them leaves the node (the Raft core's contract);
- `snapshot-<end offset>-<epoch>.checkpoint`: `crc32c u32 | data`, the state machine below `end offset` (and
  the voter set in effect there, as the last line of the data).

Opening drops a torn or corrupt log tail: only an entry that was never synced can be torn, and an unsynced entry
was never reported to anyone.

A full disk must not take the metadata quorum down with the data: the operator's way out (deleting a topic)
is itself a metadata change. So the directory keeps `space-reserve`, a small file of zeros written when there is
room; a metadata write that fails with ENOSPC deletes it and tries once more.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import struct
import uuid
from collections.abc import Sequence

import crc32c

from moldau.metadata.records import MetadataRecord, RecordDecodeError, decode_record, encode_record
from moldau.metadata.voters_codec import decode_voters, encode_voters, snapshot_bytes, snapshot_from_bytes
from moldau.raft import Entry, PersistedState, Snapshot, VotersRecord

log = logging.getLogger(__name__)

_HEADER = struct.Struct(">IIqib")  # length, crc, offset, epoch, kind; length counts what follows the crc
_AFTER_CRC = struct.calcsize(">qib")
KIND_LEADER_CHANGE, KIND_RECORDS, KIND_VOTERS = 0, 1, 2
MAX_ENTRY_BYTES = 64 * 1024 * 1024
RESERVE_FILE = "space-reserve"
RESERVE_BYTES = 256 * 1024
_SNAPSHOT_NAME = re.compile(r"^snapshot-(\d{20})-(\d{10})\.checkpoint$")

MetadataBatch = tuple[MetadataRecord, ...]


def encode_entry_value(value: object) -> tuple[int, bytes]:
    """(kind, payload) of an entry value: None (leader change), a voter set, or a tuple of metadata records."""
    if value is None:
        return KIND_LEADER_CHANGE, b""
    if isinstance(value, VotersRecord):
        return KIND_VOTERS, encode_voters(value)
    assert isinstance(value, tuple)
    return KIND_RECORDS, b"\n".join(encode_record(r) for r in value)


def decode_entry_value(kind: int, payload: bytes) -> MetadataBatch | VotersRecord | None:
    if kind == KIND_LEADER_CHANGE:
        return None
    if kind == KIND_VOTERS:
        return decode_voters(payload)
    return tuple(decode_record(line) for line in payload.split(b"\n") if line)


def encode_records(records: Sequence[MetadataRecord]) -> bytes:
    return b"\n".join(encode_record(r) for r in records)


def decode_records(data: bytes) -> list[MetadataRecord]:
    return [decode_record(line) for line in data.split(b"\n") if line]


class QuorumStore:
    def __init__(self, directory: str) -> None:
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self._log_path = os.path.join(directory, "raft.log")
        self._positions: list[int] = []  # file position of each entry, from the log start offset on
        self._start_offset = 0
        self._fd = -1
        self._dirty = False

    # -- loading ---------------------------------------------------------------------------------------------

    def directory_id(self) -> uuid.UUID:
        """This metadata directory's id (KIP-853's replica directory id), made once and kept in `directory.id`."""
        path = os.path.join(self.directory, "directory.id")
        if os.path.exists(path):
            with open(path) as f:
                return uuid.UUID(f.read().strip())
        new = uuid.uuid4()
        _replace_file(path, str(new).encode())
        return new

    def load(self) -> PersistedState:
        term, voted_for = self._load_term_vote()
        snapshot = self._load_latest_snapshot()
        self._start_offset = snapshot.end_offset if snapshot else 0
        entries = self._load_log()
        self._fd = os.open(self._log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self._ensure_reserve()
        return PersistedState(term, voted_for, entries, snapshot)

    def _ensure_reserve(self) -> None:
        path = os.path.join(self.directory, RESERVE_FILE)
        if os.path.exists(path) and os.path.getsize(path) == RESERVE_BYTES:
            return
        try:
            _replace_file(path, bytes(RESERVE_BYTES))
        except OSError as exc:
            log.warning("metadata log: no room for the %d-byte space reserve (%s)", RESERVE_BYTES, exc)
            with contextlib.suppress(OSError):
                os.unlink(path + ".tmp")

    def _release_reserve(self, exc: OSError) -> bool:
        """On ENOSPC, free the reserve so the write can be tried again; False if there is nothing to free."""
        path = os.path.join(self.directory, RESERVE_FILE)
        if exc.errno != errno.ENOSPC or not os.path.exists(path):
            return False
        log.error("metadata log: the disk is full; using the space reserve so metadata changes (such as "
                  "deleting a topic to free space) still work")
        os.unlink(path)
        return True

    def _load_term_vote(self) -> tuple[int, int | None]:
        path = os.path.join(self.directory, "quorum-state")
        if not os.path.exists(path):
            return 0, None
        with open(path) as f:
            state = json.load(f)
        return int(state["term"]), state.get("voted_for")

    def _load_latest_snapshot(self) -> Snapshot | None:
        names = sorted(n for n in os.listdir(self.directory) if _SNAPSHOT_NAME.match(n))
        for name in reversed(names):
            match = _SNAPSHOT_NAME.match(name)
            assert match is not None
            with open(os.path.join(self.directory, name), "rb") as f:
                data = f.read()
            if len(data) >= 4 and struct.unpack_from(">I", data)[0] == crc32c.crc32c(data[4:]):
                return snapshot_from_bytes(int(match[1]), int(match[2]), data[4:])
            log.warning("metadata snapshot %s is corrupt; trying an older one", name)
        return None

    def _load_log(self) -> list[Entry]:
        if not os.path.exists(self._log_path):
            return []
        with open(self._log_path, "rb") as f:
            data = f.read()
        read, end = read_entries(data)
        entries: list[Entry] = []
        for position, offset, entry in read:
            if offset < self._start_offset:
                continue  # covered by the snapshot
            if not entries and offset != self._start_offset:
                end = position  # a gap after the snapshot: nothing from here on can be trusted
                break
            entries.append(entry)
            self._positions.append(position)
        if end != len(data):
            log.warning("metadata log: dropping %d bytes of torn or corrupt tail", len(data) - end)
            with open(self._log_path, "r+b") as f:
                f.truncate(end)
                os.fsync(f.fileno())
        return entries

    # -- changes ---------------------------------------------------------------------------------------------

    def set_term_vote(self, term: int, voted_for: int | None) -> None:
        """Durable at return: a vote must never be forgotten (Raft §5.2)."""
        data = json.dumps({"term": term, "voted_for": voted_for}).encode()
        try:
            _replace_file(os.path.join(self.directory, "quorum-state"), data)
        except OSError as exc:
            if not self._release_reserve(exc):
                raise
            _replace_file(os.path.join(self.directory, "quorum-state"), data)

    def append(self, offset: int, entries: Sequence[Entry]) -> int:
        """Write `entries` (synced by `sync()`); returns the bytes written."""
        try:
            return self._append(offset, entries)
        except OSError as exc:
            if not self._release_reserve(exc):
                raise
            return self._append(offset, entries)

    def _append(self, offset: int, entries: Sequence[Entry]) -> int:
        assert offset == self._start_offset + len(self._positions), (offset, self._start_offset, len(self._positions))
        start = position = os.lseek(self._fd, 0, os.SEEK_END)
        parts = []
        positions = []
        for i, entry in enumerate(entries):
            parts.append(encode_entry(offset + i, entry))
            positions.append(position)
            position += len(parts[-1])
        try:
            _write_all(self._fd, b"".join(parts))
        except OSError:
            # Leave no torn entry behind (a full disk): the file ends where it did, and the caller starts over
            # from what is on disk.
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, start)
            raise
        self._positions.extend(positions)
        self._dirty = True
        return position - start

    def truncate(self, offset: int) -> None:
        """Remove entries at `offset` and after; durable at return (it is rare and must not reappear)."""
        index = offset - self._start_offset
        if index < len(self._positions):
            os.ftruncate(self._fd, self._positions[index])
            del self._positions[index:]
            os.fsync(self._fd)

    def sync(self) -> None:
        if self._dirty:
            os.fsync(self._fd)
            self._dirty = False

    def save_snapshot(self, snapshot: Snapshot, remaining: Sequence[Entry]) -> None:
        """Write the snapshot durably, then drop the log below it; `remaining` are the entries from its end on."""
        self._write_snapshot(snapshot)
        self._rewrite_log(snapshot.end_offset, remaining)

    def install_snapshot(self, snapshot: Snapshot) -> None:
        """A snapshot from the leader replaces the whole log."""
        self._write_snapshot(snapshot)
        self._rewrite_log(snapshot.end_offset, [])

    def _write_snapshot(self, snapshot: Snapshot) -> None:
        data = snapshot_bytes(snapshot)
        name = f"snapshot-{snapshot.end_offset:020d}-{snapshot.last_epoch:010d}.checkpoint"
        _replace_file(os.path.join(self.directory, name), struct.pack(">I", crc32c.crc32c(data)) + data)
        for other in os.listdir(self.directory):
            if _SNAPSHOT_NAME.match(other) and other != name:
                os.unlink(os.path.join(self.directory, other))

    def _rewrite_log(self, start_offset: int, entries: Sequence[Entry]) -> None:
        """Replace the log file with `entries` from `start_offset`, written and synced before the swap."""
        self.sync()
        encoded = [encode_entry(start_offset + i, e) for i, e in enumerate(entries)]
        tmp = self._log_path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(b"".join(encoded))
            f.flush()
            os.fsync(f.fileno())
        os.close(self._fd)
        os.replace(tmp, self._log_path)
        _fsync_dir(self.directory)
        self._fd = os.open(self._log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self._start_offset = start_offset
        self._positions = []
        position = 0
        for data in encoded:
            self._positions.append(position)
            position += len(data)

    def close(self) -> None:
        if self._fd >= 0:
            self.sync()
            os.close(self._fd)
            self._fd = -1


def encode_entry(offset: int, entry: Entry) -> bytes:
    """One entry in the framing shared by `raft.log` and the quorum's Fetch answers."""
    kind, payload = encode_entry_value(entry.value)
    body = struct.pack(">qib", offset, entry.epoch, kind) + payload
    return struct.pack(">II", len(body), crc32c.crc32c(body)) + body


def read_entries(data: bytes) -> tuple[list[tuple[int, int, Entry]], int]:
    """The well-formed entries at the start of `data`, as (position, offset, entry), and where they end.

    Stops at the first entry that is torn, fails its CRC, does not decode or breaks the sequence of offsets;
    the caller decides whether what follows is a tail to drop (the log file) or an error (a Fetch answer).
    """
    found: list[tuple[int, int, Entry]] = []
    pos = 0
    while pos + _HEADER.size <= len(data):
        length, crc, offset, epoch, kind = _HEADER.unpack_from(data, pos)
        end = pos + 8 + length
        if length < _AFTER_CRC or length > MAX_ENTRY_BYTES or end > len(data):
            break
        if crc32c.crc32c(data[pos + 8:end]) != crc or (found and offset != found[-1][1] + 1):
            break
        try:
            value = decode_entry_value(kind, data[pos + _HEADER.size:end])
        except RecordDecodeError:
            break
        found.append((pos, offset, Entry(epoch, value)))
        pos = end
    return found, pos


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _replace_file(path: str, data: bytes) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(os.path.dirname(path))


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
