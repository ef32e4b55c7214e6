"""What follows a run's close is decided by its trigger, through the one registry the composition
root fills (zerg.runs.closing): the run lifecycle imports none of its consumers."""

from __future__ import annotations

import subprocess
import sys

import pytest

import zerg.wiring  # noqa: F401  registers the subscribers
from tests.test_layers import ZERG
from zerg.runs import closing

CALLS: list[tuple[str, int]] = []


def record(rt, run, assessment):
    CALLS.append(("record", run["id"]))
    return {"run_id": run["id"], "recorded": True}


def explode(rt, run, assessment):
    raise RuntimeError("the mail server is on fire")


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.setattr(closing, "_subscriptions", list(closing._subscriptions))
    CALLS.clear()
    return closing


def test_each_trigger_goes_to_its_own_subscriber_and_every_other_one_to_the_answer_mail():
    assert closing.subscribers("schedule") == ["zerg.alerts.background:on_close"]
    assert closing.subscribers("email") == closing.subscribers("sms") == ["zerg.inbound.replies:on_close"]
    assert closing.subscribers("api") == closing.subscribers(None) == ["zerg.alerts.completion_mail:on_close"]


def test_a_failing_subscriber_is_reported_and_the_others_still_run(registry, caplog):
    registry.subscribe(f"{__name__}:explode", triggers=("test",))
    registry.subscribe(f"{__name__}:record", triggers=("test",))
    report = registry.after_close(None, {"id": 7, "owner_id": 1, "trigger": "test"})
    assert CALLS == [("record", 7)]
    assert report == {"run_id": 7, "reports": [
        {"run_id": 7, "error": "RuntimeError: the mail server is on fire"}, {"run_id": 7, "recorded": True}]}
    assert "what follows its close failed" in caplog.text


def test_registering_twice_runs_once_and_a_bad_target_is_refused(registry):
    registry.subscribe(f"{__name__}:record", triggers=("test",))
    registry.subscribe(f"{__name__}:record", triggers=("test",))
    assert registry.after_close(None, {"id": 8, "trigger": "test"}) == {"run_id": 8, "recorded": True}
    assert CALLS == [("record", 8)]
    with pytest.raises(ValueError, match="package.module:function"):
        registry.subscribe("zerg.alerts.background.on_close", triggers=None)


def test_a_subscriber_that_cannot_be_imported_never_reaches_the_closer(registry):
    registry.subscribe("zerg.no_such_module:on_close", triggers=("test",))
    report = registry.after_close(None, {"id": 9, "trigger": "test"})
    assert report["run_id"] == 9 and report["error"].startswith("ModuleNotFoundError")


def test_wiring_imports_no_subscriber_until_a_run_closes():
    code = ("import sys, zerg.wiring; print(sorted(m for m in sys.modules if m.startswith("
            "('zerg.alerts', 'zerg.inbound', 'zerg.notify'))))")
    done = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(ZERG.parent)}, capture_output=True,
                          text=True, check=True, timeout=60)
    assert done.stdout.strip() == "[]"
