"""The embedded server's first start in a new checkout or data dir: two starters at once (two test
workers, two commands) both get through the start lock, one after the other."""

from __future__ import annotations

import stat
import threading

from zerg import db


def test_two_first_starts_at_once_both_get_the_lock_one_at_a_time(tmp_path):
    data_dir = tmp_path / "checkout" / ".zerg" / "test-pg18"  # none of it exists yet
    barrier, inside, errors = threading.Barrier(8), [], []

    def start() -> None:
        barrier.wait()
        try:
            with db.embedded_start_lock(data_dir):
                inside.append(1)
                assert len(inside) == 1  # alone in here
                inside.pop()
        except Exception as exc:  # FileExistsError, FileNotFoundError: the race this guards against
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == [] and stat.S_IMODE(data_dir.stat().st_mode) == 0o700


def test_a_data_dir_another_starter_made_after_the_look_is_fine(tmp_path, monkeypatch):
    data_dir = tmp_path / "pgdata-parent"
    data_dir.mkdir(mode=0o700)
    monkeypatch.setattr(type(data_dir), "exists", lambda self: False)  # "missing" when looked at
    with db.embedded_start_lock(data_dir):
        pass
