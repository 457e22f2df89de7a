"""The registry's errors as Confluent Schema Registry reports them: an HTTP status and a five-digit error code.

Clients branch on `error_code` (confluent-kafka raises SchemaRegistryError with it), so every refusal carries
Confluent's code; the messages say what went wrong in the registry's own words.
"""

from __future__ import annotations

__all__ = ["RegistryError"]


class RegistryError(Exception):
    """A refused request: answered as `{"error_code": code, "message": message}` with `status`."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def body(self) -> dict[str, object]:
        return {"error_code": self.code, "message": self.message}

    # -- 404 ----------------------------------------------------------------------------------------------------

    @classmethod
    def subject_not_found(cls, subject: str) -> RegistryError:
        return cls(404, 40401, f"Subject '{subject}' not found.")

    @classmethod
    def version_not_found(cls, version: int | str) -> RegistryError:
        return cls(404, 40402, f"Version {version} not found.")

    @classmethod
    def schema_not_found(cls, schema_id: int | None = None) -> RegistryError:
        return cls(404, 40403, "Schema not found" if schema_id is None else f"Schema {schema_id} not found")

    @classmethod
    def subject_soft_deleted(cls, subject: str) -> RegistryError:
        return cls(404, 40404, f"Subject '{subject}' is already soft deleted; delete it with permanent=true")

    @classmethod
    def subject_not_soft_deleted(cls, subject: str) -> RegistryError:
        return cls(404, 40405, f"Subject '{subject}' must be soft deleted before it is deleted permanently")

    @classmethod
    def version_soft_deleted(cls, subject: str, version: int) -> RegistryError:
        return cls(404, 40406, f"Subject '{subject}' version {version} is already soft deleted; "
                               "delete it with permanent=true")

    @classmethod
    def version_not_soft_deleted(cls, subject: str, version: int) -> RegistryError:
        return cls(404, 40407, f"Subject '{subject}' version {version} must be soft deleted before it is "
                               "deleted permanently")

    @classmethod
    def compatibility_not_configured(cls, subject: str) -> RegistryError:
        return cls(404, 40408, f"Subject '{subject}' has no subject-level compatibility level")

    @classmethod
    def mode_not_configured(cls, subject: str) -> RegistryError:
        return cls(404, 40409, f"Subject '{subject}' has no subject-level mode")

    # -- 409 ----------------------------------------------------------------------------------------------------

    @classmethod
    def incompatible(cls, subject: str, details: list[str]) -> RegistryError:
        return cls(409, 40901, f"Schema being registered is incompatible with an earlier schema for subject "
                               f"\"{subject}\", details: {details}")

    # -- 422 ----------------------------------------------------------------------------------------------------

    @classmethod
    def invalid_schema(cls, detail: str) -> RegistryError:
        return cls(422, 42201, f"Invalid schema: {detail}")

    @classmethod
    def invalid_version(cls, version: str) -> RegistryError:
        return cls(422, 42202, f"The specified version '{version}' is not a valid version id. Allowed values are "
                               "between [1, 2^31-1] and the string \"latest\"")

    @classmethod
    def invalid_compatibility(cls, level: object) -> RegistryError:
        return cls(422, 42203, f"Invalid compatibility level {level!r}. Valid values are none, backward, forward, "
                               "full, backward_transitive, forward_transitive, and full_transitive")

    @classmethod
    def invalid_mode(cls, mode: object) -> RegistryError:
        return cls(422, 42204, f"Invalid mode {mode!r}. Valid values are READWRITE, READONLY, READONLY_OVERRIDE "
                               "and IMPORT")

    @classmethod
    def not_permitted(cls, message: str) -> RegistryError:
        return cls(422, 42205, message)

    @classmethod
    def reference_exists(cls, message: str) -> RegistryError:
        return cls(422, 42206, message)

    @classmethod
    def id_does_not_match(cls, message: str) -> RegistryError:
        return cls(422, 42207, message)

    @classmethod
    def invalid_subject(cls, subject: str) -> RegistryError:
        return cls(422, 42208, f"The specified subject '{subject}' is not valid")

    @classmethod
    def bad_json(cls, detail: str) -> RegistryError:
        """A request body that does not parse as JSON (Confluent's REST layer answers 400 with code 50005)."""
        return cls(400, 50005, f"The request body is not valid JSON: {detail}")

    @classmethod
    def unprocessable(cls, message: str) -> RegistryError:
        """A request body that is not the JSON object the endpoint takes (Confluent answers 422 with the status
        as the code)."""
        return cls(422, 422, message)

    # -- 500 ----------------------------------------------------------------------------------------------------

    @classmethod
    def store_error(cls, message: str) -> RegistryError:
        return cls(500, 50001, f"Error in the backend data store: {message}")

    @classmethod
    def timeout(cls, message: str) -> RegistryError:
        return cls(500, 50002, f"Operation timed out: {message}")

    @classmethod
    def forwarding_failed(cls, message: str) -> RegistryError:
        return cls(500, 50003, f"Error while forwarding the request to the primary: {message}")
