"""bench/rawlimit.py: the raw limit in the driver's shape moves every byte from every sender and cleans up."""

from __future__ import annotations

import os
from pathlib import Path

from bench.rawlimit import MIB, measure_shaped


def test_the_shaped_limit_receives_from_every_connection_and_deletes_its_file(tmp_path: Path) -> None:
    sink = tmp_path / "sink"
    # 2 processes x 3 connections, 16 MiB in 1 MiB writes: 2 MiB per connection (rounded down to whole writes).
    mb_s = measure_shaped(16 * MIB, 2, 3, str(sink))
    assert mb_s > 0
    assert not sink.exists()
    assert os.listdir(tmp_path) == []
