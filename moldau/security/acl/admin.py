"""Validating ACL changes (CreateAcls, DeleteAcls) into metadata records.

Pure functions of the metadata image, run by the active controller; the records of all accepted bindings or
filters are committed as one entry. An ACL that exists already is not stored twice.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

from moldau.metadata.image import MetadataImage, acl_record
from moldau.metadata.records import MetadataRecord, RemoveAccessControlEntryRecord
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import AclBinding, AclBindingFilter, InvalidAcl


def acl_creations(image: MetadataImage, acls: Sequence[AclBinding], new_id: Callable[[], uuid.UUID]
                  ) -> tuple[list[MetadataRecord], list[KafkaError | None]]:
    """The records storing the new valid ACLs, and per ACL None or the error that refused it."""
    existing = set(image.acls.values())
    results: list[KafkaError | None] = []
    records: list[MetadataRecord] = []
    for acl in acls:
        try:
            acl.validate()
        except InvalidAcl as exc:
            results.append(KafkaError(ErrorCode.invalid_request, str(exc)))
            continue
        results.append(None)
        if acl not in existing:
            existing.add(acl)
            records.append(acl_record(new_id(), acl))
    return records, results


def acl_deletions(image: MetadataImage, filters: Sequence[AclBindingFilter]
                  ) -> tuple[list[MetadataRecord], list[list[AclBinding] | KafkaError]]:
    """The records removing what the filters match, and per filter the ACLs it removes or the error refusing it."""
    results: list[list[AclBinding] | KafkaError] = []
    removed: set[uuid.UUID] = set()
    for acl_filter in filters:
        try:
            acl_filter.validate()
        except InvalidAcl as exc:
            results.append(KafkaError(ErrorCode.invalid_request, str(exc)))
            continue
        matched = [(i, a) for i, a in image.acls.items() if acl_filter.matches(a)]
        removed.update(i for i, _ in matched)
        results.append([a for _, a in matched])
    return [RemoveAccessControlEntryRecord(i) for i in sorted(removed)], results
