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
- The same check (:func:`before_call`, one seam) holds a run to its own budget (USD and tokens,
  :class:`RunBudget`): the request's ``preferences.budget_usd`` / ``budget_tokens`` (a schedule's
  fire writes its per-fire budget there, lowered to what its day has left), else the owner's
  ``run_usd_budget`` / ``run_token_budget`` (the notification policy), else the deployment's agent
  default (``ZERG_RUN_USD_BUDGET`` / ``ZERG_RUN_TOKEN_BUDGET``). Past it :class:`RunBudgetReached`
  (a :class:`SpendingCapReached`: nothing retries it) and the supervisor ends the run with a partial
  answer from the workers that finished. The run's spend is the ledger's rows of the run.
- A budgeted run refuses a model of unknown price (:class:`ModelPriceUnknown`, naming the setting):
  it would count $0 and no budget could stop it. The owner's ``model_prices`` gives it one, and the
  ledger then records its calls at that price.
- The owner is told once per (owner) day, whichever run or fire noticed first:
  :func:`tell_owner` checks and sends under one per-owner lock, so two runs stopping together
  send one email.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, time, timedelta, timezone
from decimal import ROUND_UP, Decimal
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from psycopg import Connection

from zerg import observability, timezones
from zerg.llm import CallTag, pricing
from zerg.llm.ledger import run_spend, schedule_spend_since, spent_since
from zerg.notify import notifications
from zerg.notify.policy import Policy, get_policy
from zerg.timestamps import utcnow

if TYPE_CHECKING:
    from zerg.config import Settings
    from zerg.runtime import Runtime

RAISE_HINT = "Raise it with `zerg policy set --daily-usd-cap` or PATCH /api/jarvis/policy."
PRICE_HINT = ("Set its price (USD per million input and output tokens) with `zerg policy set --model-price {model}=IN,OUT` "
              "or PATCH /api/jarvis/policy {{\"model_prices\": {{\"{model}\": [IN, OUT]}}}}.")
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


class RunBudgetReached(SpendingCapReached):
    """The run's own budget is spent: the model call was not made. The supervisor ends the run
    with a partial answer from the workers that finished."""

    def __init__(self, state: RunBudget) -> None:
        RuntimeError.__init__(self, state.message())
        self.state = state  # type: ignore[assignment]


class ModelPriceUnknown(SpendingCapReached):
    """A budgeted run asked for a model of unknown price: refused before the call."""

    def __init__(self, model: str, state: RunBudget) -> None:
        RuntimeError.__init__(self, (f"Model {model!r} has no known price, so the run's budget ({state.describe()}, "
                                     f"{state.source}) could not limit it: the call was refused. "
                                     + PRICE_HINT.format(model=model)))
        self.state = state  # type: ignore[assignment]
        self.model = model


@dataclass(frozen=True)
class RunBudget:
    """A run's budget (USD and/or tokens; where it came from) and what the run spent so far."""

    usd: Decimal | None
    tokens: int | None
    source: str  # "the request", "the schedule", "the owner's default", "the agent default"
    spent_usd: Decimal = Decimal(0)
    spent_tokens: int = 0

    @property
    def reached(self) -> bool:
        return ((self.usd is not None and self.spent_usd >= self.usd)
                or (self.tokens is not None and self.spent_tokens >= self.tokens))

    def describe(self) -> str:
        parts = ([usd(self.usd)] if self.usd is not None else []) + (
            [f"{self.tokens:,} tokens"] if self.tokens is not None else [])
        return " and ".join(parts)

    def message(self) -> str:
        return (f"Run budget of {self.describe()} ({self.source}) reached: {usd(self.spent_usd, up=True)} and "
                f"{self.spent_tokens:,} tokens spent. The run stopped; its answer is what the finished workers found.")


def run_budget(conn: Connection, settings: Settings, run: dict[str, Any], policy: Policy | None = None
               ) -> RunBudget | None:
    """The run's budget and spend, or None when it has none. The first source with a limit wins,
    whole: the request (or the schedule's fire), the owner's default, the agent default. ``policy``:
    the owner's, when the caller read it already."""
    prefs = run.get("preferences") or {}
    if prefs.get("budget_usd") is not None or prefs.get("budget_tokens") is not None:
        source = "the schedule" if run.get("trigger") == "schedule" else "the request"
        limit_usd, limit_tokens = prefs.get("budget_usd"), prefs.get("budget_tokens")
    else:
        policy = policy or get_policy(conn, run["owner_id"])
        if policy.run_usd_budget is not None or policy.run_token_budget is not None:
            source, limit_usd, limit_tokens = "the owner's default", policy.run_usd_budget, policy.run_token_budget
        elif settings.run_usd_budget is not None or settings.run_token_budget is not None:
            source, limit_usd, limit_tokens = "the agent default", settings.run_usd_budget, settings.run_token_budget
        else:
            return None
    spent_usd, spent_tokens = run_spend(conn, run["owner_id"], run["id"])
    return RunBudget(None if limit_usd is None else Decimal(str(limit_usd)),
                     None if limit_tokens is None else int(limit_tokens), source, spent_usd, spent_tokens)


@dataclass(frozen=True)
class CallState:
    """Everything checked before one model call: the owner's day, the run's budget, the model's price.
    ``price``: the owner's price of the model, when they set one (the ledger records calls at it)."""

    day: Budget
    run: RunBudget | None = None
    model: str = ""
    price: tuple[float, float] | None = None

    def check(self) -> None:
        self.day.check()
        if self.run is None:
            return
        if self.price is None and pricing.price_for(self.model) is None:
            raise ModelPriceUnknown(self.model, self.run)
        if self.run.reached:
            raise RunBudgetReached(self.run)


def before_call(settings: Settings) -> Callable[[Connection, CallTag, str], CallState]:
    """The check the metered model port makes before each tagged call (:mod:`zerg.wiring` hands it in)."""

    def check(conn: Connection, tag: CallTag, model: str) -> CallState:
        from zerg.runs import store as runs

        policy = get_policy(conn, tag.owner_id)  # read once: the cap, the prices, the owner's run budget
        day = today(conn, tag.owner_id, policy=policy)
        run = runs.budget_row(conn, tag.owner_id, tag.run_id) if tag.run_id is not None else None
        limits = run_budget(conn, settings, run, policy) if run is not None else None
        return CallState(day, limits, model, owner_price(policy, model))

    return check


def owner_price(policy: Policy, model: str) -> tuple[float, float] | None:
    """The owner's price of ``model`` (USD per million tokens in, out), exact id or longest prefix; a
    ``provider:model`` id (issue 28) is looked up as written, then without its provider."""
    prices = policy.model_prices or {}
    if model not in prices and pricing.bare(model) != model:
        model = pricing.bare(model)
    if model in prices:
        return tuple(prices[model])  # type: ignore[return-value]
    names = [name for name in prices if model.startswith(name + "-")]
    return tuple(prices[max(names, key=len)]) if names else None  # type: ignore[return-value]


def today(conn: Connection, owner_id: int, now: datetime | None = None, *, policy: Policy | None = None) -> Budget:
    """The owner's cap and what they spent since their midnight (no ledger read without a cap);
    ``policy``: the owner's, when the caller read it already."""
    policy = policy or get_policy(conn, owner_id)
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


@dataclass(frozen=True)
class FireBudget:
    """A scheduled check's budgets at one fire: why it is skipped (its day's budget is spent), else
    its run's budget (the per-fire one, lowered to what the day has left), as run preferences."""

    skip: str | None = None
    preferences: dict[str, Any] | None = None


def fire_budget(conn: Connection, schedule: dict[str, Any], now: datetime | None = None) -> FireBudget:
    """The schedule's per-fire and per-day budgets (its day: midnight to midnight in its time zone)."""
    fire_usd, fire_tokens = schedule.get("fire_usd_budget"), schedule.get("fire_token_budget")
    day_usd, day_tokens = schedule.get("day_usd_budget"), schedule.get("day_token_budget")
    if day_usd is None and day_tokens is None:
        limits = (fire_usd, fire_tokens)
    else:
        since = day_start(now or utcnow(), schedule["timezone"])
        spent_usd, spent_tokens = schedule_spend_since(conn, schedule["owner_id"], schedule["id"], since)
        if (day_usd is not None and spent_usd >= day_usd) or (day_tokens is not None and spent_tokens >= day_tokens):
            limit = " and ".join(([usd(Decimal(day_usd))] if day_usd is not None else [])
                                 + ([f"{day_tokens:,} tokens"] if day_tokens is not None else []))
            return FireBudget(skip=(f"the schedule's daily budget of {limit} is spent ({usd(spent_usd, up=True)} and "
                                    f"{spent_tokens:,} tokens today, {schedule['timezone']} time)"))
        limits = (_least(fire_usd, None if day_usd is None else Decimal(day_usd) - spent_usd),
                  _least(fire_tokens, None if day_tokens is None else day_tokens - spent_tokens))
    prefs = {k: v for k, v in (("budget_usd", None if limits[0] is None else float(limits[0])),
                               ("budget_tokens", None if limits[1] is None else int(limits[1]))) if v is not None}
    return FireBudget(preferences=prefs or None)


def _least(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else min(Decimal(str(a)), Decimal(str(b)))
