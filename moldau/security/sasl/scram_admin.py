"""Validating SCRAM credential changes (KIP-554's AlterUserScramCredentials) into metadata records.

Pure functions of the metadata image, run by the active controller. Each user named in the request gets one
result; all of a user's changes succeed or fail together, and all successful ones are committed as one entry:

- an unknown mechanism: UNSUPPORTED_SASL_MECHANISM;
- an empty user name, iterations outside Kafka's 4096..16384, or a salt / salted password of the wrong shape:
  UNACCEPTABLE_CREDENTIAL;
- the same user and mechanism named twice (in deletions, upsertions or both): DUPLICATE_RESOURCE;
- deleting a credential that does not exist: RESOURCE_NOT_FOUND.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from moldau.metadata.image import MetadataImage
from moldau.metadata.records import MetadataRecord, RemoveUserScramCredentialRecord
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.sasl.scram import (
    MAX_ITERATIONS,
    MECHANISM_NAMES,
    MIN_ITERATIONS,
    credential_from_salted_password,
    digest_size,
    record_of,
)


@dataclass(frozen=True, slots=True)
class Deletion:
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class Upsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True, slots=True)
class UserResult:
    user: str
    error_code: ErrorCode
    error_message: str | None


def scram_changes(image: MetadataImage, deletions: Sequence[Deletion],
                  upsertions: Sequence[Upsertion]) -> tuple[list[MetadataRecord], list[UserResult]]:
    changes: list[Deletion | Upsertion] = [*deletions, *upsertions]
    counts = Counter((c.name, c.mechanism) for c in changes)
    users = list(dict.fromkeys(c.name for c in changes))
    records: dict[str, list[MetadataRecord]] = {user: [] for user in users}
    errors: dict[str, KafkaError] = {}
    for change in changes:
        if change.name in errors:
            continue
        try:
            if counts[(change.name, change.mechanism)] > 1:
                raise KafkaError(ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the "
                                 "same request")
            records[change.name].append(_record(image, change))
        except KafkaError as exc:
            errors[change.name] = exc
    out: list[MetadataRecord] = []
    results = []
    for user in users:
        if user in errors:
            results.append(UserResult(user, errors[user].code, errors[user].message))
        else:
            out += records[user]
            results.append(UserResult(user, ErrorCode.none, None))
    return out, results


def _record(image: MetadataImage, change: Deletion | Upsertion) -> MetadataRecord:
    if not change.name:
        raise KafkaError(ErrorCode.unacceptable_credential, "Username must not be empty")
    mechanism = MECHANISM_NAMES.get(change.mechanism)
    if mechanism is None:
        raise KafkaError(ErrorCode.unsupported_sasl_mechanism, f"Unknown SCRAM mechanism {change.mechanism}")
    if isinstance(change, Deletion):
        if (change.name, change.mechanism) not in image.scram_credentials:
            raise KafkaError(ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist")
        return RemoveUserScramCredentialRecord(change.name, change.mechanism)
    if not MIN_ITERATIONS <= change.iterations <= MAX_ITERATIONS:
        raise KafkaError(ErrorCode.unacceptable_credential,
                         f"Iterations {change.iterations} not in [{MIN_ITERATIONS}, {MAX_ITERATIONS}]")
    if not change.salt:
        raise KafkaError(ErrorCode.unacceptable_credential, "Salt must not be empty")
    if len(change.salted_password) != digest_size(mechanism):
        raise KafkaError(ErrorCode.unacceptable_credential, f"Salted password has the wrong length for {mechanism}")
    credential = credential_from_salted_password(mechanism, change.salt, change.salted_password, change.iterations)
    return record_of(change.name, mechanism, credential)
