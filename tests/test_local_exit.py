"""How a local command ends while the run's Remember step (an asynchronous invocation) is still
running: `zerg run` says why it waits, waits at most its bound, Ctrl-C skips the wait, nothing
waits twice, and `zerg serve`'s shutdown never holds the starter's lock while it drains.
Driven with events (a handler that hangs until released), not timings."""

from __future__ import annotations

import _thread
import json
import threading

from zerg.config import load_settings
from zerg.local.engine import WAIT_NOTICE, LocalEngine, LocalStarter


def _starter_with_hung_remember(tmp_path):
    """A starter whose engine runs one Event invocation that hangs until ``release`` is set."""
    release, started = threading.Event(), threading.Event()

    def supervisor(event, context):
        started.set()
        release.wait(60)
        return {"episode": "written"}

    starter = LocalStarter(load_settings({"ZERG_DATA_DIR": str(tmp_path), "HOME": str(tmp_path)}))
    starter._engine = LocalEngine(handlers={"supervisor": supervisor})  # dispatch only: no executions here
    starter._engine._dispatch_event("supervisor", json.dumps({"action": "remember"}))
    assert started.wait(60)
    return starter, release


def test_a_hung_remember_keeps_zerg_run_no_longer_than_its_bound_and_it_says_why_once(tmp_path, monkeypatch):
    starter, release = _starter_with_hung_remember(tmp_path)
    drains = _spy_drains(monkeypatch)
    said: list[str] = []
    try:
        assert starter.finish_background(said.append, timeout=0.05) is False  # the bound is a parameter
        assert said == [WAIT_NOTICE]
        starter.close()
        assert drains[-1] == 0.0  # close does not wait a second time
    finally:
        release.set()


def test_ctrl_c_during_the_wait_skips_it_and_the_command_goes_on_to_exit(tmp_path, monkeypatch):
    starter, release = _starter_with_hung_remember(tmp_path)
    _spy_drains(monkeypatch)

    def say(line):  # the user presses Ctrl-C once the notice is on the screen
        threading.Thread(target=_thread.interrupt_main).start()

    try:
        assert starter.finish_background(say, timeout=3_600) is False  # returned: no KeyboardInterrupt
        starter.close()
    finally:
        release.set()


def test_nothing_to_wait_for_says_nothing(tmp_path):
    starter = LocalStarter(load_settings({"ZERG_DATA_DIR": str(tmp_path), "HOME": str(tmp_path)}))
    said: list[str] = []
    assert starter.finish_background(said.append) is True and said == []


def test_serve_shutdown_drains_without_holding_the_starter_lock(tmp_path, monkeypatch):
    starter, release = _starter_with_hung_remember(tmp_path)
    draining = threading.Event()
    real_drain = LocalEngine.drain

    def drain(self, timeout=None, on_wait=None):
        draining.set()
        return real_drain(self, timeout, on_wait)

    monkeypatch.setattr(LocalEngine, "drain", drain)
    closing = threading.Thread(target=starter.close)
    closing.start()
    try:
        assert draining.wait(60)
        assert starter.execution_of(1) is None  # takes the lock: free while close drains
        assert closing.is_alive()  # still draining (the default bound, not a skip)
    finally:
        release.set()
        closing.join(30)
    assert not closing.is_alive()


def _spy_drains(monkeypatch) -> list:
    drains: list = []
    real_drain = LocalEngine.drain

    def drain(self, timeout=None, on_wait=None):
        drains.append(timeout)
        return real_drain(self, timeout, on_wait)

    monkeypatch.setattr(LocalEngine, "drain", drain)
    return drains
