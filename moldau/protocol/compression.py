"""A topic's compression settings and Kafka's codec ids: plain data, importable without the codec libraries.

The configuration (and every command of the CLI, which reads it) needs these names; only the broker's
recompression (`moldau.protocol.recompression`) needs the codecs themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CODECS", "PRODUCER", "Compression"]

# Kafka's codec ids (the low three bits of a batch's attributes) and compression.type names.
CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
PRODUCER = "producer"


@dataclass(frozen=True, slots=True)
class Compression:
    """A topic's target codec and levels, resolved from its configs."""

    type: str = PRODUCER
    gzip_level: int = -1
    lz4_level: int = 9
    zstd_level: int = 3
