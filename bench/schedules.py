"""Schedules on the local runtime: the ticker's overhead with 10,000 ``schedules`` rows, and the
time from a due fire to its run.

- 100 owners x 100 hourly checks, their next fires spread evenly over the coming hour: a tick every
  15 s (ZERG_TICK_S) then finds ~0.4 % of them due (10,000 x 15 / 3,600 = ~42). Measured: the due
  read itself (``store.due``, the partial index ``schedules_due``), and a whole tick when nothing
  is due (the due read plus the sweep of fires left pending), which is what most ticks are.
- Due fire -> run: one schedule due, one tick (the fire: claim, run row, ``supervisor_started``,
  the execution started on the local engine), then the run's first model request and its end, with
  a zero-latency scripted model over loopback that answers at once (no worker). The first fire
  starts the engine and is shown apart; p50 over the next ones.

Smoke (main(smoke=True)): 1,000 rows, 5 reads, one fire.

Run: .venv/bin/python -m bench.schedules
"""

from __future__ import annotations

import contextlib
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta

from bench._common import bench_database, environ, fmt, measure, script

PER_OWNER = 100  # the service's limit per owner


def _fill(rt, rows: int, base: datetime) -> None:
    """``rows`` hourly checks of ``rows / 100`` owners, next fires spread over the hour after ``base``."""
    from zerg.owners import create_owner
    from zerg.schedules import store

    rng = random.Random(14)
    with rt.pool.connection() as conn:
        for o in range(rows // PER_OWNER):
            owner = create_owner(conn, f"bench-{o}").owner_id
            for i in range(PER_OWNER):
                store.create(conn, owner, kind="check", name=f"check-{i}", task=f"check service {i}", cron=None,
                             rate="1 hour", at=None, expression="rate(1 hour)", timezone="UTC", enabled=True,
                             channels=None, next_fire_at=base + timedelta(seconds=rng.uniform(0, 3600)),
                             limit=PER_OWNER)
            conn.commit()


def _due_read(rt, rows: int, base: datetime, repeat: int) -> None:
    from zerg.schedules import store
    from zerg.schedules.ticker import DUE_LIMIT, tick

    at = base + timedelta(seconds=15)
    with rt.pool.connection() as conn:
        due = len(store.due(conn, at, DUE_LIMIT))
        stats = measure(lambda: store.due(conn, at, DUE_LIMIT), repeat)
    print("== the ticker's due read ==")
    print(fmt(f"find the due ones ({due} of {rows:,} due)", stats))
    print(fmt("a whole tick, nothing due", measure(lambda: tick(rt, base - timedelta(minutes=1)), repeat)))


def _fire_to_run(rt, llm, fires: int) -> None:
    from zerg.owners import create_owner
    from zerg.runs import store as runs
    from zerg.schedules import service
    from zerg.schedules.spec import ScheduleSpec
    from zerg.schedules.ticker import tick

    first_request: list[float] = []

    def answer(request):
        first_request.append(time.perf_counter())
        return {"content": "All services answer."}

    llm.respond_with(answer)
    with rt.pool.connection() as conn:
        owner = create_owner(conn, "bench-fires").owner_id
    # Ticks at a moment before every filler row's next fire: only the schedule made due here fires.
    tick_at = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(minutes=1)
    samples = []
    for i in range(fires):
        schedule = service.create(rt, owner, ScheduleSpec(name=f"fire-{i}", task="check the services", rate="1 hour"),
                                  now=tick_at - timedelta(hours=1))
        first_request.clear()
        start = time.perf_counter()
        counts = tick(rt, tick_at)
        fired = time.perf_counter()
        assert counts.get("started") == 1, counts
        run_id = service.get(rt, owner, schedule["id"])["last_run_id"]
        while True:
            with rt.pool.connection() as conn:
                status = runs.run_status(conn, owner, run_id)
            if status not in ("queued", "running"):
                break
            time.sleep(0.002)
        ended = time.perf_counter()
        assert status == "success", status
        while rt.starter.ended_execution(run_id) is None:  # its steps after the answer, before the next fire
            time.sleep(0.01)
        samples.append(((fired - start) * 1000, (first_request[0] - start) * 1000, (ended - start) * 1000))
    rt.starter.finish_background(lambda line: None)
    print("== due fire -> run (local engine, zero-latency model) ==")
    labels = ("tick fired it (supervisor_started written, execution started)", "-> the run's first model request",
              "-> the run ended (success)")
    print(f"{'first fire (starts the engine)':<62} " + "   ".join(f"{v:8.1f} ms" for v in samples[0]))
    later = samples[1:] or samples
    for k, label in enumerate(labels):
        print(f"{label:<62} p50 {statistics.median(s[k] for s in later):8.1f} ms   (n={len(later)})")


def main(smoke: bool = False) -> None:
    from tests.support.llm_server import ScriptedLLM
    from zerg.wiring import get_runtime

    rows, repeat, fires = (1_000, 5, 1) if smoke else (10_000, 50, 6)
    with (
        contextlib.closing(ScriptedLLM()) as llm,
        tempfile.TemporaryDirectory() as tmp,
        bench_database() as url,
        environ(DATABASE_URL=url, OPENAI_BASE_URL=llm.base_url, ZERG_ARTIFACT_DIR=tmp, ZERG_DATA_DIR=tmp,
                ZERG_MEMORY_EXTRACT="off", ZERG_EMBEDDINGS="off"),
    ):
        rt = get_runtime()
        base = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) + timedelta(hours=2)
        started = time.perf_counter()
        _fill(rt, rows, base)
        print(f"setup: {rows:,} schedules rows ({rows // PER_OWNER} owners) in {time.perf_counter() - started:.1f} s")
        with rt.pool.connection() as conn:
            conn.execute("ANALYZE schedules")
        _due_read(rt, rows, base, repeat)
        _fire_to_run(rt, llm, fires)


if __name__ == "__main__":
    script(main)
