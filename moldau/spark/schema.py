"""The row schema of the `moldau` source (the same as Spark's Kafka source) and its Arrow form."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))

# Spark's Kafka timestampType codes (Kafka's TimestampType ids), by confluent-kafka's timestamp kind.
NO_TIMESTAMP, CREATE_TIME, LOG_APPEND_TIME = -1, 0, 1


def source_schema(include_headers: bool) -> StructType:
    """key, value, topic, partition, offset, timestamp, timestampType (+ headers)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema Spark expects record batches of this source to have, exactly."""
    schema: pa.Schema = to_arrow_schema(source_schema(include_headers), timezone="UTC")
    return schema
