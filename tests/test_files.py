"""A private file appears whole or not at all (zerg.files), whoever writes it: a kept email, an
owner's export, a stored session."""

from __future__ import annotations

import stat

import pytest

from zerg.files import atomic_private_file


def test_the_file_appears_whole_and_private(tmp_path):
    dest, tmp = tmp_path / "kept.eml", tmp_path / ".kept.eml.tmp"
    with atomic_private_file(dest, tmp) as fh:
        fh.write(b"part one, ")
        assert not dest.exists()  # nothing under the final name while it is written
        fh.write(b"part two")
    assert dest.read_bytes() == b"part one, part two" and not tmp.exists()
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600


def test_an_error_while_writing_leaves_neither_file(tmp_path):
    dest, tmp = tmp_path / "archive.zip", tmp_path / ".archive.zip.partial"
    with pytest.raises(RuntimeError, match="disk gone"):
        with atomic_private_file(dest, tmp) as fh:
            fh.write(b"half")
            raise RuntimeError("disk gone")
    assert list(tmp_path.iterdir()) == []


def test_a_temporary_name_that_exists_or_links_elsewhere_is_never_written_through(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"keep me")
    tmp = tmp_path / ".session.tmp"
    tmp.symlink_to(elsewhere)
    with pytest.raises(ValueError, match="cannot write"):
        with atomic_private_file(tmp_path / "session", tmp, open_error=lambda e: ValueError(f"cannot write: {e}")):
            pass
    assert elsewhere.read_bytes() == b"keep me" and not (tmp_path / "session").exists()
