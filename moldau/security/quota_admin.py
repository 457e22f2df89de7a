"""Validating client quota changes (KIP-546's AlterClientQuotas) into metadata records.

A pure function of the metadata image, run by the active controller. An entry is refused as a whole with
INVALID_REQUEST for an unsupported or repeated entity type, an unknown quota, a bad value or a quota named twice;
the records of the accepted entries are committed together.
"""

from __future__ import annotations

from collections.abc import Sequence

from moldau.metadata.image import MetadataImage
from moldau.metadata.records import ClientQuotaRecord, MetadataRecord
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security import quotas

RawEntity = Sequence[tuple[str, str | None]]
Ops = Sequence[tuple[str, float | None]]  # (quota name, value), None removing it


def quota_changes(image: MetadataImage, entries: Sequence[tuple[RawEntity, Ops]]
                  ) -> tuple[list[MetadataRecord], list[KafkaError | None]]:
    """The records that carry out the accepted entries, and one error or None per entry."""
    results: list[KafkaError | None] = []
    records: list[MetadataRecord] = []
    for raw_entity, ops in entries:
        try:
            changes = _entry_changes(image, raw_entity, ops)
        except ValueError as exc:
            results.append(KafkaError(ErrorCode.invalid_request, str(exc)))
            continue
        records += changes
        results.append(None)
    return records, results


def _entry_changes(image: MetadataImage, raw_entity: RawEntity, ops: Ops) -> list[MetadataRecord]:
    """Raises ValueError for an entry to refuse."""
    entity = quotas.check_entity(raw_entity)
    keys = [key for key, _ in ops]
    if len(set(keys)) != len(keys):
        raise ValueError("a quota is named more than once")
    current = image.client_quotas.get(entity, {})
    changes: list[MetadataRecord] = []
    for key, value in ops:
        if value is None:
            if key not in quotas.quota_keys(entity):
                raise ValueError(f"unknown quota {key!r}")
            if key in current:
                changes.append(ClientQuotaRecord(entity, key, 0.0, remove=True))
        else:
            quotas.check_quota(key, value, entity)
            if current.get(key) != value:
                changes.append(ClientQuotaRecord(entity, key, float(value)))
    return changes
