"""Decoding what clients push (KIP-714): an OTLP `MetricsData` protobuf, possibly compressed.

The `opentelemetry-proto` package supplies the message classes (the OTLP schema is OpenTelemetry's, so we do not
keep our own copy). Only what the broker shows is kept: each data point's metric name, kind, attributes, value
and time; histograms and summaries are kept as their count and sum.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.record_validation import RecordErrors, decompress_payload


@dataclass(frozen=True, slots=True)
class MetricPoint:
    name: str
    kind: str  # gauge, sum, histogram, exponential_histogram or summary
    value: float  # the gauge's or sum's value; a histogram's or summary's sum
    count: int | None  # a histogram's or summary's count
    attributes: tuple[tuple[str, str], ...]
    time_unix_nano: int


def decode(payload: bytes, compression_type: int, limit: int) -> list[MetricPoint]:
    """The data points of a push. Raises KafkaError: INVALID_RECORD for anything that does not decode, as
    Kafka answers; UNSUPPORTED_COMPRESSION_TYPE for an unknown codec."""
    try:
        data = decompress_payload(compression_type, payload, limit)
    except KeyError:
        raise KafkaError(ErrorCode.unsupported_compression_type,
                         f"unknown compression type {compression_type}") from None
    except RecordErrors as exc:
        raise KafkaError(ErrorCode.invalid_record, exc.message) from exc
    message = MetricsData()
    try:
        message.ParseFromString(data)
    except DecodeError as exc:
        raise KafkaError(ErrorCode.invalid_record, f"metrics are not an OTLP MetricsData message: {exc}") from exc
    return [point for rm in message.resource_metrics for sm in rm.scope_metrics for metric in sm.metrics
            for point in _points(metric)]


def _points(metric: Any) -> list[MetricPoint]:
    kind = metric.WhichOneof("data")
    if kind in ("gauge", "sum"):
        return [MetricPoint(metric.name, kind, _number(p), None, _attributes(p), p.time_unix_nano)
                for p in getattr(metric, kind).data_points]
    if kind in ("histogram", "exponential_histogram", "summary"):
        return [MetricPoint(metric.name, kind, float(p.sum), int(p.count), _attributes(p), p.time_unix_nano)
                for p in getattr(metric, kind).data_points]
    return []


def _number(point: Any) -> float:
    return float(point.as_double if point.WhichOneof("value") == "as_double" else point.as_int)


def _attributes(point: Any) -> tuple[tuple[str, str], ...]:
    out = []
    for attribute in point.attributes:
        value = attribute.value
        which = value.WhichOneof("value")
        out.append((attribute.key, "" if which is None else str(getattr(value, which))))
    return tuple(out)
