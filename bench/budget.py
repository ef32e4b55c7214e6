"""What the daily spending cap adds to each model call: the check the metered model port makes
before a tagged call (a pooled checkout, the policy read and, with a cap, the sum of the owner's
spend since their midnight over llm_calls_owner_created), with no cap and with a cap and a day's
worth of ledger rows.

Run: .venv/bin/python -m bench.budget
"""

from __future__ import annotations

import os
import tempfile
from decimal import Decimal

from bench._common import bench_database, fmt, measure, script


class _Instant:
    """A model that answers at once: what is left is the port's own work."""

    def complete(self, messages, *, model, tag=None, **kwargs):
        from zerg.llm import ChatResult, Usage

        return ChatResult(model=model, content="ok", usage=Usage(10, 2, 0.0))


def main(smoke: bool = False) -> None:
    from zerg import config
    from zerg.alerts import budget
    from zerg.llm import CallTag, ChatResult, Usage
    from zerg.llm.ledger import MeteredChatModel, record_call
    from zerg.notify.policy import PolicyChange, set_policy
    from zerg.owners import create_owner
    from zerg.wiring import get_runtime

    repeat = 30 if smoke else 2000
    days_calls = (10, 100) if smoke else (100, 1000, 10_000)
    with tempfile.TemporaryDirectory() as tmp, bench_database() as url:
        os.environ.update(DATABASE_URL=url, ZERG_DATA_DIR=tmp)
        config.get_settings.cache_clear()
        rt = get_runtime()
        with rt.pool.connection() as conn:
            uncapped = create_owner(conn, "bench-uncapped").owner_id

        def check(owner_id: int) -> None:
            with rt.pool.connection() as conn:
                budget.today(conn, owner_id).check()

        measure(lambda: check(uncapped), repeat // 10 or 1)  # warm the pool
        print("== the spending cap check before each tagged model call ==")
        print(fmt("no cap (policy read only)", measure(lambda: check(uncapped), repeat)))
        for n in days_calls:
            with rt.pool.connection() as conn:
                owner_id = create_owner(conn, f"bench-capped-{n}").owner_id
                set_policy(conn, owner_id, PolicyChange(daily_usd_cap=Decimal("1000000")))
                call = ChatResult("gpt-4o-mini", "", usage=Usage(100, 10, 0.0001))
                with conn.transaction():
                    for _ in range(n):
                        record_call(conn, CallTag("worker", owner_id), call, 5.0)
            print(fmt(f"cap set, {n:,} calls today", measure(lambda owner_id=owner_id: check(owner_id), repeat)))

        print("== one metered call to an instant model ==")
        port = MeteredChatModel(_Instant(), lambda: rt.pool)
        messages = [{"role": "user", "content": "hi"}]
        print(fmt("tagged, no cap (check + ledger row)",
                  measure(lambda: port.complete(messages, model="m", tag=CallTag("worker", uncapped)), repeat)))
        print(fmt(f"tagged, cap set, {days_calls[-1]:,}+ calls today",
                  measure(lambda: port.complete(messages, model="m", tag=CallTag("worker", owner_id)), repeat)))


if __name__ == "__main__":
    script(main)
