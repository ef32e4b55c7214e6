"""The ``approvals`` table: what waits for the owner's decision (issue 27), of two kinds:

- ``call``: a worker's tool call, with the task token the run's execution waits on;
- ``directive``: a change only the owner may decide (issue 25's question, e.g. deleting a schedule),
  made when it is approved (:mod:`zerg.inbound.directives` says what; :mod:`zerg.approvals.wait`
  dispatches it). No job, no token: nothing waits on it; ``summary`` is Zerg's words for it,
  ``shown_at`` when Zerg appended the question to the asking run's answer, ``outcome`` what approving
  it did.

Invariants:
- Every read and every answer is scoped by owner: another owner's id is "not found", never a hint.
- A row is decided once: ``pending`` becomes ``approved``, ``denied``, ``expired`` or ``cancelled`` by a
  conditional UPDATE (``WHERE status = 'pending'``), never back; of two racing answers one wins.
- An answer after ``expires_at`` decides nothing (:func:`decide` returns the row unchanged, still
  ``pending``, so the caller says "expired"; the wait's timeout marks it ``expired``).
- Its decision is used once (:func:`take`: ``used_at``), so a retried or replayed resume never runs the
  approved call twice.
- Directives: the owner has at most one open question: the pending directives of one run (a run may
  ask several changes at once; they are one question). Asking supersedes every pending directive of
  the owner's other runs, and the same run's one for the same tool and arguments
  (:func:`ask_directive`; ``superseded``), so a "yes" confirms the latest question only. Every read
  and answer of calls (:func:`pending`, :func:`cancel_run`, :func:`take`) leaves directives alone.
- The token and the decision meet in the database, whichever comes first: :func:`record_token` returns
  the row as it is once the token is stored (already answered: the caller answers the token at once),
  :func:`decide` returns the token if it was stored (None: :func:`record_token` will answer it).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any, Literal

from psycopg import Connection
from psycopg.errors import UniqueViolation
from psycopg.types.json import Jsonb

Decision = Literal["approved", "denied", "expired", "cancelled"]
STATUSES = ("pending", "approved", "denied", "expired", "cancelled", "superseded")
KINDS = ("call", "directive")
DIRECTIVE_TOOLS = ("create_schedule", "delete_schedule", "set_preference", "update_schedule")
_COLUMNS = ("id, owner_id, run_id, job_id, kind, tool, arguments, tool_call_id, reason, status, task_token, "
            "created_at, waiting_since, expires_at, answered_at, used_at, code, notification_ids, summary, shown_at, "
            "outcome, asked_because")


def create(conn: Connection, owner_id: int, run_id: int, job_id: int, tool: str, arguments: dict[str, Any],
           tool_call_id: str, reason: str, asked_because: str | None = None) -> dict[str, Any]:
    """A pending approval of one call (the job's previous pending one, if any, is cancelled first: a
    worker waits on one call at a time): ``reason`` the model's own words with the call (data),
    ``asked_because`` why the owner's policy asks (Zerg's words)."""
    conn.execute("UPDATE approvals SET status = 'cancelled', answered_at = now() "
                 "WHERE job_id = %s AND owner_id = %s AND status = 'pending'", (job_id, owner_id))
    return _insert(conn, owner_id, {"run_id": run_id, "job_id": job_id, "tool": tool, "arguments": Jsonb(arguments),
                                    "tool_call_id": tool_call_id, "reason": reason[:2000],
                                    "asked_because": asked_because})


_CODE_ATTEMPTS = 5
_CODE = """(SELECT lpad(c::text, 4, '0') FROM generate_series(1000, 9999) AS c
             WHERE lpad(c::text, 4, '0') NOT IN (SELECT code FROM approvals WHERE owner_id = %(owner_id)s
                                                   AND status = 'pending' AND code IS NOT NULL)
             ORDER BY random() LIMIT 1)"""


def _insert(conn: Connection, owner_id: int, fields: dict[str, Any], ttl: timedelta | None = None) -> dict[str, Any]:
    """Insert a pending approval of these columns (expiring ``ttl`` from now; None: when its wait
    starts) with a short code (the SMS "Y 4821"): a random four
    digits free among the owner's pending approvals. The partial unique index approvals_pending_code is
    the guard: two approvals of one owner created at once may draw the same code, so the loser draws
    again (in a savepoint, the caller's work kept)."""
    names = ", ".join(fields)
    values = ", ".join(f"%({name})s" for name in fields)
    for attempt in range(_CODE_ATTEMPTS):
        try:
            with conn.transaction():
                return conn.execute(
                    f"""INSERT INTO approvals (owner_id, {names}, expires_at, code)
                        VALUES (%(owner_id)s, {values}, now() + %(ttl)s::interval, {_CODE}) RETURNING {_COLUMNS}""",
                    {"owner_id": owner_id, "ttl": ttl, **fields}).fetchone()
        except UniqueViolation as exc:
            if exc.diag.constraint_name != "approvals_pending_code" or attempt == _CODE_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def get(conn: Connection, owner_id: int, approval_id: int) -> dict[str, Any] | None:
    return conn.execute(f"SELECT {_COLUMNS} FROM approvals WHERE id = %s AND owner_id = %s",
                        (approval_id, owner_id)).fetchone()


def pending(conn: Connection, owner_id: int, run_id: int | None = None, *,
            kind: str | None = "call") -> list[dict[str, Any]]:
    """The owner's approvals still waiting for an answer (of one run; of one kind, the tool calls by
    default, or of any kind), oldest first."""
    return conn.execute(
        f"""SELECT {_COLUMNS} FROM approvals WHERE owner_id = %s AND status = 'pending'
              AND (%s::text IS NULL OR kind = %s) AND (%s::bigint IS NULL OR run_id = %s) ORDER BY id""",
        (owner_id, kind, kind, run_id, run_id),
    ).fetchall()


def of_run(conn: Connection, owner_id: int, run_id: int) -> list[dict[str, Any]]:
    """Every approval the owner's run asked for, oldest first (without the task tokens)."""
    columns = _COLUMNS.replace("task_token, ", "")
    return conn.execute(f"SELECT {columns} FROM approvals WHERE owner_id = %s AND run_id = %s ORDER BY id",
                        (owner_id, run_id)).fetchall()


def asked_in_run(conn: Connection, owner_id: int, run_id: int) -> int:
    """How many tool-call approvals the owner's run has asked for, whatever became of them."""
    return conn.execute("SELECT count(*) AS n FROM approvals WHERE owner_id = %s AND run_id = %s "
                        "AND kind = 'call'", (owner_id, run_id)).fetchone()["n"]


def by_code(conn: Connection, owner_id: int, code: str) -> dict[str, Any] | None:
    """The owner's pending approval with this short code (None: no such pending approval of this owner)."""
    return conn.execute(f"SELECT {_COLUMNS} FROM approvals WHERE owner_id = %s AND code = %s AND status = 'pending'",
                        (owner_id, code)).fetchone()


def claim_notice(conn: Connection, owner_id: int, approval_id: int) -> bool:
    """Whether this call is the one to tell the owner about the approval (once: a retried callback
    tells nobody twice)."""
    return conn.execute("UPDATE approvals SET notification_ids = '{}' WHERE id = %s AND owner_id = %s "
                        "AND notification_ids IS NULL RETURNING id", (approval_id, owner_id)).fetchone() is not None


def set_notices(conn: Connection, owner_id: int, approval_id: int, notification_ids: list[int]) -> None:
    conn.execute("UPDATE approvals SET notification_ids = %s WHERE id = %s AND owner_id = %s",
                 (notification_ids, approval_id, owner_id))


def by_notification(conn: Connection, owner_id: int, notification_id: int) -> dict[str, Any] | None:
    """The owner's approval that notification told them about (whatever its status now)."""
    return conn.execute(f"SELECT {_COLUMNS} FROM approvals WHERE owner_id = %s AND notification_ids @> ARRAY[%s]::bigint[]",
                        (owner_id, notification_id)).fetchone()


def recent(conn: Connection, owner_id: int, *, limit: int = 50) -> list[dict[str, Any]]:
    """The owner's approvals for the owner's list: every pending one (oldest first), then the most
    recently created answered ones, up to ``limit`` in all (without the task tokens)."""
    columns = _COLUMNS.replace("task_token, ", "")
    return conn.execute(
        f"""(SELECT {columns} FROM approvals WHERE owner_id = %s AND status = 'pending' ORDER BY id)
            UNION ALL
            (SELECT {columns} FROM approvals WHERE owner_id = %s AND status <> 'pending' ORDER BY id DESC LIMIT %s)
            LIMIT %s""",
        (owner_id, owner_id, limit, limit),
    ).fetchall()


def record_token(conn: Connection, owner_id: int, approval_id: int, token: str,
                 timeout_s: int) -> dict[str, Any] | None:
    """Store the task token the execution now waits on; the wait expires ``timeout_s`` from now.
    The row as it is afterwards (None: no such approval of this owner)."""
    return conn.execute(
        f"""UPDATE approvals SET task_token = %s, waiting_since = now(),
                   expires_at = now() + make_interval(secs => %s)
            WHERE id = %s AND owner_id = %s RETURNING {_COLUMNS}""",
        (token, timeout_s, approval_id, owner_id),
    ).fetchone()


def decide(conn: Connection, owner_id: int, approval_id: int,
           decision: Decision) -> tuple[dict[str, Any] | None, bool]:
    """Answer a pending approval, once: (the row after the attempt, whether this call decided it).
    Not decided: the row as another answer, the timeout or a cancel left it (an owner's answer after
    ``expires_at`` leaves it pending). (None, False): not the owner's."""
    expiry = "" if decision in ("expired", "cancelled") else "AND (expires_at IS NULL OR expires_at > now())"
    row = conn.execute(
        f"""UPDATE approvals SET status = %s, answered_at = now()
            WHERE id = %s AND owner_id = %s AND status = 'pending' {expiry} RETURNING {_COLUMNS}""",
        (decision, approval_id, owner_id),
    ).fetchone()
    return (row, True) if row is not None else (get(conn, owner_id, approval_id), False)


def cancel_run(conn: Connection, owner_id: int, run_id: int) -> list[dict[str, Any]]:
    """Cancel every pending tool call of a run (it was cancelled or closed): the rows cancelled now.
    Its directive questions stay: they wait for the owner, not for the run."""
    return conn.execute(
        f"""UPDATE approvals SET status = 'cancelled', answered_at = now()
            WHERE owner_id = %s AND run_id = %s AND status = 'pending' AND kind = 'call' RETURNING {_COLUMNS}""",
        (owner_id, run_id),
    ).fetchall()


def take(conn: Connection, owner_id: int, approval_id: int, job_id: int) -> dict[str, Any] | None:
    """Use a decided approval of this job, once: the row when this call took it, else None (still
    pending, or used already: a replay)."""
    return conn.execute(
        f"""UPDATE approvals SET used_at = now()
            WHERE id = %s AND owner_id = %s AND job_id = %s AND status <> 'pending' AND used_at IS NULL
            RETURNING {_COLUMNS}""",
        (approval_id, owner_id, job_id),
    ).fetchone()


# --- directives: what only the owner decides, made when approved -----------------------------------

def ask_directive(conn: Connection, owner_id: int, run_id: int, tool: str, arguments: dict[str, Any], summary: str,
                  ttl: timedelta) -> dict[str, Any]:
    """Record the directive question (superseding the owner's pending directives of other runs, and
    this run's for the same tool and arguments) and return the new row."""
    conn.execute(
        """UPDATE approvals SET status = 'superseded', answered_at = now()
           WHERE owner_id = %s AND kind = 'directive' AND status = 'pending'
             AND (run_id <> %s OR (tool = %s AND arguments = %s))""",
        (owner_id, run_id, tool, Jsonb(arguments)))
    return _insert(conn, owner_id, {"run_id": run_id, "kind": "directive", "tool": tool, "arguments": Jsonb(arguments),
                                    "summary": summary}, ttl)


def expire_directives(conn: Connection, owner_id: int) -> list[dict[str, Any]]:
    """Mark the owner's pending directives past their time ``expired``; returns them."""
    return conn.execute(
        f"""UPDATE approvals SET status = 'expired', answered_at = now()
            WHERE owner_id = %s AND kind = 'directive' AND status = 'pending' AND expires_at <= now()
            RETURNING {_COLUMNS}""", (owner_id,)).fetchall()


def directives_asked_by(conn: Connection, owner_id: int, run_id: int) -> list[dict[str, Any]]:
    """The pending directives the run ``run_id`` asked, oldest first: its question."""
    return conn.execute(
        f"""SELECT {_COLUMNS} FROM approvals
            WHERE owner_id = %s AND run_id = %s AND kind = 'directive' AND status = 'pending' ORDER BY id""",
        (owner_id, run_id)).fetchall()


def mark_directives_shown(conn: Connection, owner_id: int, run_id: int) -> int:
    """The run's pending directives were shown to the owner (appended to its answer); how many."""
    return conn.execute(
        """UPDATE approvals SET shown_at = now()
           WHERE owner_id = %s AND run_id = %s AND kind = 'directive' AND status = 'pending' AND shown_at IS NULL""",
        (owner_id, run_id)).rowcount


def open_directive_question(conn: Connection, owner_id: int) -> list[dict[str, Any]]:
    """The owner's open question: the shown, pending directives of the newest asking run, oldest
    first, locked until the transaction ends; [] when there is none (or the newest was never shown)."""
    newest = conn.execute(
        """SELECT run_id FROM approvals WHERE owner_id = %s AND kind = 'directive' AND status = 'pending'
           ORDER BY id DESC LIMIT 1""", (owner_id,)).fetchone()
    if newest is None:
        return []
    return conn.execute(
        f"""SELECT {_COLUMNS} FROM approvals
            WHERE owner_id = %s AND run_id = %s AND kind = 'directive' AND status = 'pending' AND shown_at IS NOT NULL
            ORDER BY id FOR UPDATE""", (owner_id, newest["run_id"])).fetchall()


def has_open_directive_question(conn: Connection, owner_id: int) -> bool:
    """Whether a shown, pending, unexpired directive waits for the owner's yes (intent routing)."""
    return conn.execute(
        """SELECT EXISTS (SELECT 1 FROM approvals WHERE owner_id = %s AND kind = 'directive' AND status = 'pending'
                          AND shown_at IS NOT NULL AND expires_at > now()) AS open""", (owner_id,)).fetchone()["open"]


def record_outcome(conn: Connection, owner_id: int, approval_id: int, outcome: str) -> dict[str, Any] | None:
    """What the approved directive did, once (``used_at``): the row, or None when it was recorded
    already (never twice: the claim was the decision, this only keeps its result)."""
    return conn.execute(
        f"""UPDATE approvals SET outcome = %s, used_at = now()
            WHERE id = %s AND owner_id = %s AND kind = 'directive' AND status = 'approved' AND used_at IS NULL
            RETURNING {_COLUMNS}""", (outcome[:20000], approval_id, owner_id)).fetchone()


def directives_of_run(conn: Connection, owner_id: int, run_id: int) -> list[dict[str, Any]]:
    """Every directive question the run ``run_id`` asked (whatever its status), oldest first."""
    return conn.execute(
        f"SELECT {_COLUMNS} FROM approvals WHERE owner_id = %s AND run_id = %s AND kind = 'directive' ORDER BY id",
        (owner_id, run_id)).fetchall()


def export_approvals(conn: Connection, owner_id: int) -> Iterator[dict[str, Any]]:
    """The owner's approvals for their data export (without the task tokens: they are Step Functions')."""
    columns = _COLUMNS.replace("task_token, ", "")
    yield from conn.execute(f"SELECT {columns} FROM approvals WHERE owner_id = %s ORDER BY id", (owner_id,))
