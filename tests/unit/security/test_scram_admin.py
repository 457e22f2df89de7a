import scramp

from moldau.metadata.image import MetadataImage
from moldau.protocol.errors import ErrorCode
from moldau.security.sasl.scram import credential_of, salted_password
from moldau.security.sasl.scram_admin import Deletion, Upsertion, scram_changes


def _upsert(name: str, mechanism: int = 1, iterations: int = 4096, password: str = "pw") -> Upsertion:
    mech = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}.get(mechanism, "SCRAM-SHA-256")
    salt = b"0123456789abcdef"
    return Upsertion(name, mechanism, iterations, salt, salted_password(mech, password, salt, iterations))


def test_upsert_matches_scramp_and_replays() -> None:
    records, results = scram_changes(MetadataImage(), [], [_upsert("alice"), _upsert("alice", 2)])
    assert [(r.user, r.error_code) for r in results] == [("alice", ErrorCode.none)]
    image = MetadataImage().apply(records, 0)
    credential = credential_of(image.scram_credentials[("alice", 1)])
    expected = scramp.ScramMechanism("SCRAM-SHA-256").make_auth_info("pw", 4096, b"0123456789abcdef")
    assert (credential.salt, credential.stored_key, credential.server_key, credential.iterations) == expected
    assert MetadataImage().apply(image.to_records(), 0).scram_credentials == image.scram_credentials
    records, results = scram_changes(image, [Deletion("alice", 1)], [])
    assert results[0].error_code == ErrorCode.none
    assert set(image.apply(records, 1).scram_credentials) == {("alice", 2)}


def test_errors_per_user() -> None:
    _, results = scram_changes(MetadataImage(), [Deletion("ghost", 1)], [
        _upsert("ok"), _upsert("low", iterations=1000), _upsert("dup"), _upsert("dup"), _upsert("mech", 9),
        _upsert(""),
    ])
    codes = {r.user: r.error_code for r in results}
    assert codes == {"ghost": ErrorCode.resource_not_found, "ok": ErrorCode.none,
                     "low": ErrorCode.unacceptable_credential, "dup": ErrorCode.duplicate_resource,
                     "mech": ErrorCode.unsupported_sasl_mechanism, "": ErrorCode.unacceptable_credential}
