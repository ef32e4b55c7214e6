"""Escalations of critical alerts: the ``escalations`` rows (one per run, owner-scoped, repeats
claimed once and never early) and the repeats on the escalation state machine, end to end on the
local engine with the local outbox."""

from __future__ import annotations

import time

import pytest

from tests.support.factories import make_run, unique_name
from tests.support.waiting import wait_for
from zerg.alerts import escalations
from zerg.notify import notifications
from zerg.notify.policy import PolicyChange, set_policy


def _age(pool, escalation_id: int, seconds: float) -> None:
    """Move an escalation's start into the past (rather than wait for its repeats to fall due)."""
    with pool.connection() as conn:
        conn.execute("UPDATE escalations SET started_at = started_at - make_interval(secs => %s) WHERE id = %s",
                     (seconds, escalation_id))


def test_one_escalation_per_run_and_only_for_the_owners_run(pool, owner, other_owner):
    run_id, _ = make_run(pool, owner)
    with pool.connection() as conn:
        assert escalations.create(conn, other_owner, run_id, max_repeats=3, interval_s=60) is None
        first = escalations.create(conn, owner, run_id, max_repeats=3, interval_s=60)
        assert first["status"] == "running" and first["repeats_sent"] == 0 and first["owner_id"] == owner
        assert escalations.create(conn, owner, run_id, max_repeats=5, interval_s=1) is None
        assert escalations.get(conn, other_owner, first["id"]) is None
        assert escalations.get_for_run(conn, other_owner, run_id) is None
        assert escalations.get_for_run(conn, owner, run_id)["id"] == first["id"]


def test_a_repeat_is_claimed_once_never_before_it_is_due_and_never_past_the_maximum(pool, owner):
    run_id, _ = make_run(pool, owner)
    with pool.connection() as conn:
        esc = escalations.create(conn, owner, run_id, max_repeats=2, interval_s=600)
        assert escalations.claim_repeat(conn, owner, esc["id"]) is None  # repeat 1 is due in 10 minutes
    _age(pool, esc["id"], 600 - 30)  # within a tenth of an interval (clock skew): due
    with pool.connection() as conn:
        assert escalations.claim_repeat(conn, owner, esc["id"])["repeats_sent"] == 1
        assert escalations.claim_repeat(conn, owner, esc["id"]) is None  # a duplicate step: repeat 2 is not due
    _age(pool, esc["id"], 3600)
    with pool.connection() as conn:
        assert escalations.claim_repeat(conn, owner, esc["id"])["repeats_sent"] == 2
        assert escalations.claim_repeat(conn, owner, esc["id"]) is None  # the maximum
        assert escalations.get(conn, owner, esc["id"])["repeats_sent"] == 2


def test_a_final_status_never_changes_and_another_owner_cannot_end_an_escalation(pool, owner, other_owner):
    run_id, _ = make_run(pool, owner)
    with pool.connection() as conn:
        esc = escalations.create(conn, owner, run_id, max_repeats=3, interval_s=60)
        assert escalations.acknowledge_run(conn, other_owner, run_id) is None
        assert escalations.finish(conn, other_owner, esc["id"], "failed") is None
        assert escalations.get(conn, owner, esc["id"])["status"] == "running"
        ended = escalations.acknowledge_run(conn, owner, run_id)
        assert ended["status"] == "acknowledged" and ended["ended_at"] is not None
        assert escalations.finish(conn, owner, esc["id"], "exhausted") is None
        assert escalations.acknowledge_run(conn, owner, run_id) is None
        _age(pool, esc["id"], 3600)
        assert escalations.claim_repeat(conn, owner, esc["id"]) is None
        with pytest.raises(ValueError, match="final status"):
            escalations.finish(conn, owner, esc["id"], "running")


def test_an_escalation_is_orphaned_only_once_its_next_repeat_is_well_overdue(pool, owner):
    run_id, _ = make_run(pool, owner)
    with pool.connection() as conn:
        esc = escalations.create(conn, owner, run_id, max_repeats=3, interval_s=900)
        assert esc["id"] not in {e["id"] for e in escalations.orphaned(conn, grace_s=60)}
    _age(pool, esc["id"], 900 + 30)  # due, not yet a minute late
    with pool.connection() as conn:
        assert esc["id"] not in {e["id"] for e in escalations.orphaned(conn, grace_s=60)}
    _age(pool, esc["id"], 60)
    with pool.connection() as conn:
        (found,) = [e for e in escalations.orphaned(conn, grace_s=60) if e["id"] == esc["id"]]
        assert found == {"id": esc["id"], "owner_id": owner, "run_id": run_id, "interval_s": 900}
        escalations.acknowledge_run(conn, owner, run_id)
        assert esc["id"] not in {e["id"] for e in escalations.orphaned(conn, grace_s=60)}


# --- the repeats, end to end on the local engine ------------------------------------------------


def _critical_alert(pool, owner_id: int, *, repeats: int, every_s: int, sms: bool = False) -> tuple[int, str]:
    """An owner with a verified email (and SMS) contact and a policy of ``repeats`` every ``every_s``,
    and a background run with a critical inbox item: (run id, the email address)."""
    address = f"{unique_name('owner')}@example.com"
    with pool.connection() as conn:
        conn.execute("INSERT INTO owner_contacts (owner_id, kind, address, verified_at) VALUES (%s, 'email', %s, now())",
                     (owner_id, address))
        if sms:
            conn.execute("INSERT INTO owner_contacts (owner_id, kind, address, verified_at) VALUES (%s, 'sms', %s, now())",
                         (owner_id, f"+1555{owner_id:07d}"))
        set_policy(conn, owner_id, PolicyChange(escalation_repeats=repeats, escalation_every_s=every_s,
                                                channels={"critical": ["email", "sms"] if sms else ["email"]}))
    run_id, _ = make_run(pool, owner_id, task="check the disks")
    with pool.connection() as conn:
        conn.execute("""INSERT INTO inbox_items (owner_id, run_id, severity, headline, details, assessed_by)
                        VALUES (%s, %s, 'critical', 'Disk /var is 99%% full', 'df: /var 99%% used', 'model')""",
                     (owner_id, run_id))
    return run_id, address


def _repeats(pool, owner_id: int, run_id: int) -> list[dict]:
    """The run's escalation notifications, once recorded as sent or failed (not while in flight)."""
    with pool.connection() as conn:
        return [n for n in notifications.for_run(conn, owner_id, run_id)
                if n["purpose"] == "escalation" and n["reason"] != notifications.IN_FLIGHT]


def _escalation(pool, owner_id: int, run_id: int) -> dict:
    with pool.connection() as conn:
        return escalations.get_for_run(conn, owner_id, run_id)


def test_a_critical_alert_repeats_on_the_escalation_state_machine_and_stops_after_acknowledgement(
        runtime_env, pool, owner, tmp_path):
    from zerg.alerts.background import acknowledge
    from zerg.alerts.repeats import start_escalation

    rt = runtime_env()
    run_id, address = _critical_alert(pool, owner, repeats=10, every_s=1)
    escalation_id = start_escalation(rt, owner, run_id)
    assert escalation_id is not None
    arn = _escalation(pool, owner, run_id)["execution_arn"]
    assert arn.endswith(f":esc-{escalation_id}")

    sent = wait_for(lambda: (r := _repeats(pool, owner, run_id)) and len(r) >= 2 and r, "two repeats", limit_s=60)
    assert [(n["attempt"], n["status"], n["channel"], n["severity"], n["address"]) for n in sent[:2]] == [
        (1, "sent", "email", "critical", address), (2, "sent", "email", "critical", address)]
    assert sent[1]["subject"].endswith("(repeat 2)") and f"zerg inbox ack {run_id}" in sent[1]["body"]
    outbox = sorted((tmp_path / "zerg-data" / "outbox").glob("*.eml"))
    assert len(outbox) >= 2 and b"Disk /var is 99% full" in outbox[0].read_bytes()

    assert acknowledge(rt, owner, run_id) is not None  # what the API, the CLI and a reply call
    esc = _escalation(pool, owner, run_id)
    assert esc["status"] == "acknowledged" and esc["ended_at"] is not None
    engine = rt.starter.engine()
    assert wait_for(lambda: engine.describe(arn)["status"] != "RUNNING", "the execution to end")
    assert engine.describe(arn)["status"] == "ABORTED"
    count = _escalation(pool, owner, run_id)["repeats_sent"]  # a repeat in flight at the acknowledgement counts
    wait_for(lambda: len(_repeats(pool, owner, run_id)) == count, "a repeat in flight to be recorded")
    time.sleep(3)  # three intervals: no repeat may arrive after the acknowledgement
    assert len(_repeats(pool, owner, run_id)) == count
    assert _escalation(pool, owner, run_id)["repeats_sent"] == count


def test_the_item_and_its_escalation_are_acknowledged_together_so_a_racing_step_sees_both_or_neither(
        runtime_env, pool, owner, monkeypatch):
    from zerg.alerts import inbox
    from zerg.alerts.background import acknowledge

    rt = runtime_env()
    run_id, _ = _critical_alert(pool, owner, repeats=3, every_s=3600)
    with pool.connection() as conn:
        esc = escalations.create(conn, owner, run_id, max_repeats=3, interval_s=3600)
        escalations.set_execution(conn, owner, esc["id"], "arn:local:escalation:esc-test")
    seen, stopped = [], []
    real = escalations.acknowledge_run

    def observed(conn, owner_id, run):  # what a repeat step on another connection sees at this moment
        with pool.connection() as other:
            seen.append((inbox.get(other, owner, run_id)["acknowledged_at"] is not None,
                         escalations.get_for_run(other, owner, run_id)["status"]))
        return real(conn, owner_id, run)

    monkeypatch.setattr(escalations, "acknowledge_run", observed)
    monkeypatch.setattr(rt.escalation_starter, "stop", lambda arn, cause: stopped.append((arn, cause)))

    assert acknowledge(rt, owner, run_id)["acknowledged_at"] is not None

    assert seen == [(False, "running")]  # never an acknowledged item with a running escalation
    assert _escalation(pool, owner, run_id)["status"] == "acknowledged"
    assert stopped == [("arn:local:escalation:esc-test", "acknowledged")]


def test_an_acknowledgement_stands_when_the_execution_cannot_be_stopped(runtime_env, pool, owner, monkeypatch):
    from zerg.alerts.background import acknowledge
    from zerg.alerts.repeats import repeat

    rt = runtime_env()
    run_id, _ = _critical_alert(pool, owner, repeats=3, every_s=3600)
    with pool.connection() as conn:
        esc = escalations.create(conn, owner, run_id, max_repeats=3, interval_s=3600)
        escalations.set_execution(conn, owner, esc["id"], "arn:local:escalation:esc-gone")

    def unreachable(arn, cause):
        raise ConnectionError("step functions unreachable")

    monkeypatch.setattr(rt.escalation_starter, "stop", unreachable)
    assert acknowledge(rt, owner, run_id)["acknowledged_at"] is not None
    assert _escalation(pool, owner, run_id)["status"] == "acknowledged"
    _age(pool, esc["id"], 3600)
    assert repeat(rt, owner, run_id, esc["id"]) == {"done": True}  # the next step ends it, sending nothing
    assert _repeats(pool, owner, run_id) == []


def test_repeats_stop_at_the_maximum_on_every_critical_channel(runtime_env, pool, owner):
    from zerg.alerts.repeats import start_escalation

    rt = runtime_env()
    run_id, _ = _critical_alert(pool, owner, repeats=2, every_s=1, sms=True)
    start_escalation(rt, owner, run_id)
    esc = wait_for(lambda: (e := _escalation(pool, owner, run_id))["status"] != "running" and e, "the escalation to end",
                   limit_s=60)
    assert (esc["status"], esc["repeats_sent"], esc["max_repeats"], esc["interval_s"]) == ("exhausted", 2, 2, 1)
    assert wait_for(lambda: rt.starter.engine().describe(esc["execution_arn"])["status"] != "RUNNING", "the execution")
    assert rt.starter.engine().describe(esc["execution_arn"])["status"] == "SUCCEEDED"
    sent = sorted((n["attempt"], n["channel"], n["status"]) for n in _repeats(pool, owner, run_id))
    assert sent == [(1, "email", "sent"), (1, "sms", "sent"), (2, "email", "sent"), (2, "sms", "sent")]


def test_repeats_follow_the_schedules_critical_channel_override(runtime_env, pool, owner):
    from psycopg.types.json import Jsonb

    from zerg.alerts.repeats import repeat, start_escalation

    rt = runtime_env()
    run_id, _ = _critical_alert(pool, owner, repeats=2, every_s=3600, sms=True)  # the policy: email and SMS
    with pool.connection() as conn:
        schedule_id = conn.execute(
            """INSERT INTO schedules (owner_id, name, task, cron, expression, channels)
               VALUES (%s, 'disks', 'check the disks', '0 6 * * *', 'cron(0 6 * * ? *)', %s) RETURNING id""",
            (owner, Jsonb({"critical": ["sms"]}))).fetchone()["id"]
        conn.execute("""INSERT INTO schedule_fires (schedule_id, owner_id, scheduled_time, source, outcome, run_id)
                        VALUES (%s, %s, now(), 'ticker', 'started', %s)""", (schedule_id, owner, run_id))
    escalation_id = start_escalation(rt, owner, run_id)
    _age(pool, escalation_id, 3600)
    assert repeat(rt, owner, run_id, escalation_id) == {"done": False}
    (sms,) = _repeats(pool, owner, run_id)
    assert (sms["channel"], sms["attempt"], sms["status"]) == ("sms", 1, "sent")
    assert "CRITICAL (repeat 1)" in sms["body"] and len(sms["body"]) <= 400


def test_a_second_start_for_the_same_run_starts_nothing_and_zero_repeats_start_none(runtime_env, pool, owner, other_owner):
    from zerg.alerts.repeats import start_escalation

    rt = runtime_env()
    run_id, _ = _critical_alert(pool, owner, repeats=3, every_s=3600)
    first = start_escalation(rt, owner, run_id)
    assert first is not None
    assert start_escalation(rt, owner, run_id) is None
    assert start_escalation(rt, other_owner, run_id) is None  # not its run
    assert rt.escalation_starter.running() == {first}

    quiet_run, _ = _critical_alert(pool, other_owner, repeats=0, every_s=60)
    assert start_escalation(rt, other_owner, quiet_run) is None
    assert _escalation(pool, other_owner, quiet_run) is None


def test_another_owner_can_neither_stop_nor_drive_an_escalation(runtime_env, pool, owner, other_owner):
    from zerg.alerts.repeats import repeat, start_escalation, stop_escalation

    rt = runtime_env()
    run_id, _ = _critical_alert(pool, owner, repeats=3, every_s=3600)
    escalation_id = start_escalation(rt, owner, run_id)
    assert stop_escalation(rt, other_owner, run_id) is False
    assert repeat(rt, other_owner, run_id, escalation_id) == {"done": True}  # a forged event: nothing found
    esc = _escalation(pool, owner, run_id)
    assert esc["status"] == "running" and esc["repeats_sent"] == 0
    assert escalation_id in rt.escalation_starter.running()
    assert _repeats(pool, owner, run_id) == []
    assert stop_escalation(rt, owner, run_id) is True
    assert stop_escalation(rt, owner, run_id) is False  # once


def test_a_repeat_step_that_is_not_due_sends_nothing_and_keeps_waiting(runtime_env, pool, owner):
    from zerg.alerts.repeats import repeat, start_escalation, stop_escalation

    rt = runtime_env()
    run_id, _ = _critical_alert(pool, owner, repeats=3, every_s=3600)
    escalation_id = start_escalation(rt, owner, run_id)
    assert repeat(rt, owner, run_id, escalation_id) == {"done": False}  # a duplicate execution's step, an hour early
    assert _repeats(pool, owner, run_id) == []
    _age(pool, escalation_id, 3600)
    assert repeat(rt, owner, run_id, escalation_id) == {"done": False}
    assert repeat(rt, owner, run_id, escalation_id) == {"done": False}  # a retry of the same step: no second send
    assert [n["attempt"] for n in _repeats(pool, owner, run_id)] == [1]
    assert stop_escalation(rt, owner, run_id)  # not left overdue for another test's sweep


def test_zerg_serve_resumes_an_escalation_whose_process_stopped(runtime_env, pool, owner):
    from zerg.alerts.repeats import resume_orphaned, start_escalation
    from zerg.local.housekeeping import default_tasks

    rt = runtime_env()
    assert "escalations" in {t.name for t in default_tasks(rt)}
    run_id, _ = _critical_alert(pool, owner, repeats=2, every_s=1)
    escalation_id = start_escalation(rt, owner, run_id)
    rt = runtime_env()  # the process stopped (its engine and execution with it) and zerg serve started again
    assert _escalation(pool, owner, run_id)["status"] == "running"
    _age(pool, escalation_id, 120)  # its next repeat is long overdue
    report = resume_orphaned(rt)
    assert report["resumed"] >= 1
    assert escalation_id in rt.escalation_starter.running()
    assert resume_orphaned(rt)["resumed"] == 0  # this process repeats it now (and the other tests' it resumed)
    esc = wait_for(lambda: (e := _escalation(pool, owner, run_id))["status"] == "exhausted" and e, "the resumed repeats",
                   limit_s=60)
    assert f":esc-{escalation_id}-resumed-" in esc["execution_arn"]
    assert [n["attempt"] for n in _repeats(pool, owner, run_id)] == [1, 2]


def test_the_supervisor_function_takes_the_escalation_actions_without_a_thread():
    from functions.supervisor.handler import handler
    from zerg.handler_input import InvalidEvent

    with pytest.raises(InvalidEvent, match="escalation_id: Field required for escalate"):
        handler({"action": "escalate", "run_id": 1, "owner_id": 1})
    with pytest.raises(InvalidEvent, match="escalation_id"):
        handler({"action": "escalation_failed", "run_id": 1, "owner_id": 1, "escalation_id": 0})
