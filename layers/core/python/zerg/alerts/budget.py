"""The per-owner daily spending cap: the owner's model calls of one day, from the usage ledger,
against ``daily_usd_cap`` of their notification policy.

Invariants:
- Unset cap = no cap. A cap of 0 stops every model call.
- "A day" is the owner's day: midnight to midnight in the policy's time zone (UTC by default),
  so a cap resets at the owner's midnight, not the server's.
- Checked before each model call of any run, by the metered model port
  (:meth:`zerg.llm.ledger.MeteredChatModel.complete`): past the cap the call is not made and
  :class:`SpendingCapReached` is raised. It is not a model failure: nothing retries it; a
  supervisor ends its run ``failed`` with the message, a worker fails with it.
- A scheduled check is skipped (and the skip recorded) while the cap is spent.
- The owner is told once per (owner) day, whichever run or fire noticed first:
  :func:`tell_owner` checks and sends under one per-owner lock, so two runs stopping together
  send one email.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta, timezone
from decimal import ROUND_UP, Decimal
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from psycopg import Connection

from zerg import observability, timezones
from zerg.llm.ledger import spent_since
from zerg.notify import notifications
from zerg.notify.policy import get_policy
from zerg.timestamps import utcnow

if TYPE_CHECKING:
    from zerg.runtime import Runtime

RAISE_HINT = "Raise it with `zerg policy set --daily-usd-cap` or PATCH /api/jarvis/policy."
SKIP_REASON = "daily spending cap reached"


def usd(amount: Decimal, *, up: bool = False) -> str:
    """``$2.50``; sub-cent caps keep their digits (``$0.005``); ``up`` rounds a spend up to the cent
    (so a spend just past a cap never reads as equal to it)."""
    cents = amount.quantize(Decimal("0.01"), rounding=ROUND_UP if up else None)
    return f"${cents}" if up or cents == amount else f"${amount.normalize()}"


def day_start(now: datetime, tz_name: str) -> datetime:
    """The owner's midnight before ``now`` (aware, in the owner's zone)."""
    tz = _zone(tz_name)
    local = now.astimezone(tz)
    return datetime.combine(local.date(), time(0), tzinfo=tz)


def _zone(name: str) -> ZoneInfo | timezone:
    try:
        return timezones.check_timezone(name)
    except ValueError:  # the policy validates its zone: this is a safety net (e.g. a row older than the check)
        return timezone.utc


class SpendingCapReached(RuntimeError):
    """The owner's daily spending cap is spent: the model call was not made. The message is what
    the owner reads (the run's error, the worker's error)."""

    def __init__(self, state: "Budget") -> None:
        super().__init__(state.message("the run stopped"))
        self.state = state


@dataclass(frozen=True)
class Budget:
    """The owner's spend of their current day against their cap."""

    cap: Decimal | None
    spent: Decimal
    timezone: str
    since: datetime  # the owner's midnight

    @property
    def reached(self) -> bool:
        return self.cap is not None and self.spent >= self.cap

    def message(self, consequence: str) -> str:
        return (f"Daily spending cap of {usd(self.cap or Decimal(0))} reached ({usd(self.spent, up=True)} spent "
                f"today, {self.timezone} time): {consequence}. {RAISE_HINT}")

    def skip_detail(self) -> str:
        """Why a background check was skipped, as its fire records it."""
        return (f"{SKIP_REASON} ({usd(self.spent, up=True)} of {usd(self.cap or Decimal(0))} spent today, "
                f"{self.timezone} time)")

    def check(self) -> None:
        if self.reached:
            raise SpendingCapReached(self)


def today(conn: Connection, owner_id: int, now: datetime | None = None) -> Budget:
    """The owner's cap and what they spent since their midnight (no ledger read without a cap)."""
    policy = get_policy(conn, owner_id)
    cap = None if policy.daily_usd_cap is None else Decimal(policy.daily_usd_cap)
    since = day_start(now or utcnow(), policy.timezone)
    spent = Decimal(0) if cap is None else spent_since(conn, owner_id, since)
    return Budget(cap, spent, policy.timezone, since)


def tell_owner(rt: "Runtime", owner_id: int, state: Budget, *, run_id: int | None = None,
               schedule_id: int | None = None) -> bool:
    """Email the owner that their cap is spent, unless they were told since their midnight.
    True when this call sent (or recorded the suppression of) today's one notice.

    Best effort: a failure is logged, never raised (the run's own failure is already recorded)."""
    from zerg.notify.deliver import deliver

    try:
        with rt.pool.connection() as conn, conn.transaction():
            # Held until the notice's row is written (deliver commits it on its own connection).
            if notifications.lock_and_count_since(conn, owner_id, "budget", state.since) > 0:
                return False
            deliver(rt, owner_id, channel="email", purpose="budget", run_id=run_id, schedule_id=schedule_id,
                    subject=f"Zerg: daily spending cap of {usd(state.cap or Decimal(0))} reached",
                    body=_notice(state))
        return True
    except Exception:
        observability.logger().warning("spending cap notice not sent", exc_info=True, extra={"owner_id": owner_id})
        return False


def _notice(state: Budget) -> str:
    resets = (state.since + timedelta(days=1)).astimezone(_zone(state.timezone))
    return (f"Your model calls cost {usd(state.spent, up=True)} today ({state.timezone} time), past your daily "
            f"cap of {usd(state.cap or Decimal(0))}.\n\n"
            "Until the cap resets at {:%Y-%m-%d %H:%M} {}, every run stops at its next model call and "
            "scheduled checks are skipped (digests and reminders still go out).\n\n{}\n"
            ).format(resets, state.timezone, RAISE_HINT)


def fire_skip(conn: Connection, owner_id: int) -> Budget | None:
    """The owner's budget when a background check must be skipped for it, else None."""
    state = today(conn, owner_id)
    return state if state.reached else None
