"""`moldau quorum add-controller --command-config`: where the controller's metadata directory id is read from."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from moldau.cli.common import CliError
from moldau.cli.quorum import METADATA_DIR, _directory_id


def written_id(parent: Path) -> uuid.UUID:
    directory_id = uuid.uuid4()
    (parent / METADATA_DIR).mkdir(parents=True)
    (parent / METADATA_DIR / "directory.id").write_text(f"{directory_id}\n")
    return directory_id


def test_the_id_is_read_under_metadata_log_dir_when_set_else_the_first_log_dir(tmp_path: Path) -> None:
    in_first, in_meta = written_id(tmp_path / "a"), written_id(tmp_path / "meta")
    log_dirs = f"{tmp_path / 'a'},{tmp_path / 'b'}"
    assert _directory_id({"log.dirs": log_dirs}) == in_first
    assert _directory_id({"log.dir": str(tmp_path / "a")}) == in_first
    assert _directory_id({"log.dirs": log_dirs, "metadata.log.dir": str(tmp_path / "meta")}) == in_meta


def test_without_a_directory_the_error_names_the_configs(tmp_path: Path) -> None:
    with pytest.raises(CliError, match=r"metadata\.log\.dir or log\.dirs"):
        _directory_id({})
    with pytest.raises(CliError, match="cannot read the controller's directory id"):
        _directory_id({"metadata.log.dir": str(tmp_path / "nowhere")})
