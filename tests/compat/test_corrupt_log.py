"""A log holding a batch whose records lie (as an older Moldau could store) never blocks its readers: the first
start with record validation scans every record once, cuts the log at the bad batch and sets the rest aside,
and consumers read everything before it, then new records."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c

from moldau.storage.log_manager import RECORDS_VALIDATED_MARKER
from tests.support.broker_process import BrokerProcess
from tests.support.clients import ck_consume, ck_produce, create_topic

TOPIC = "scarred"


def batch_positions(log_file: Path) -> list[int]:
    data, positions, pos = log_file.read_bytes(), [], 0
    while pos + 61 <= len(data):
        positions.append(pos)
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    return positions


def lie_about_record_count(log_file: Path, position: int) -> None:
    data = bytearray(log_file.read_bytes())
    for field in (23, 57):  # lastOffsetDelta and recordsCount: one more record than the batch holds
        struct.pack_into(">i", data, position + field, struct.unpack_from(">i", data, position + field)[0] + 1)
    end = position + 12 + struct.unpack_from(">i", data, position + 8)[0]
    struct.pack_into(">I", data, position + 17, crc32c.crc32c(bytes(data[position + 21 : end])))
    log_file.write_bytes(bytes(data))


def test_consumers_read_past_a_log_scarred_by_an_older_version(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, TOPIC)
    for round_ in range(3):  # three separate batches
        ck_produce(broker.bootstrap, TOPIC, [{"value": b"r%d-%d" % (round_, i)} for i in range(4)], **{"linger.ms": 0})
    broker.stop()
    log_dir = Path(broker.overrides["log.dirs"])
    log_file = log_dir / f"{TOPIC}-0" / f"{0:020d}.log"
    positions = batch_positions(log_file)
    assert len(positions) == 3
    lie_about_record_count(log_file, positions[1])
    (log_dir / RECORDS_VALIDATED_MARKER).unlink()  # as a data directory from before record validation

    broker.start()
    before = ck_consume(broker.bootstrap, TOPIC, 4, timeout_s=20)
    assert [r.value for r in before] == [b"r0-%d" % i for i in range(4)]
    ck_produce(broker.bootstrap, TOPIC, [{"value": b"new"}], **{"linger.ms": 0})
    after = ck_consume(broker.bootstrap, TOPIC, 5, timeout_s=20)
    assert [r.value for r in after][-1] == b"new" and after[-1].offset == 4
    assert (log_dir / RECORDS_VALIDATED_MARKER).exists()
    set_aside = list((log_dir / f"{TOPIC}-0").glob("*.corrupt-*"))
    assert len(set_aside) == 1
    assert "batch at offset 4" in broker.log_path.read_text()
