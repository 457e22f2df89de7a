"""Schema formats (Avro, JSON Schema, Protobuf): parsing, canonical forms, compatibility and payload checks.

Every format implements `SchemaFormat` from `base`; `FORMATS` maps Confluent's `schemaType` names to them.
"""
