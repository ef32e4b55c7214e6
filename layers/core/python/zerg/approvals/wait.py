"""The wait for the owner's answer is a workflow state, not a process (issue 27 item 2).

A worker whose call needs the owner's approval ends its step ``awaiting_approval`` with a pending row
(:mod:`zerg.approvals.requests`). The run machine then enters ``AwaitApproval``, a callback task
(``lambda:invoke.waitForTaskToken``) whose function calls :func:`await_answer`: the token is stored on
the row and the run shows ``awaiting_approval``. Nothing runs or polls meanwhile (on AWS the execution
costs nothing while it waits). :func:`approve` / :func:`deny` decide the row and answer the token
through the run starter (:class:`zerg.ports.TaskTokens`: Step Functions, or the local engine running
the same ASL); the task's ``TimeoutSecondsPath`` (the execution input's ``approval_timeout_s``,
default 1 h) ends it unanswered. Either way ``ResumeWorker`` follows and the worker reads the row:
the decision is the database's, the token only wakes the execution.

Invariants:
- Owner-scoped, single use: an approval is decided once and its decision used once
  (:func:`zerg.approvals.requests.take`): a replayed answer or a retried resume runs nothing twice.
- An answer after the expiry decides nothing and says so; so does an answer to an answered approval.
- Whichever comes first, the token or the answer, the execution is woken exactly when both exist.
- No tool can call these functions: they are reached from the owner's channels only.
- One mechanism for "the owner must decide": a ``directive`` approval (a change only the owner may
  make, asked by :mod:`zerg.inbound.directives`) is answered by the same :func:`approve` /
  :func:`deny` from every channel. Nothing waits on it: approving it claims it (the conditional
  UPDATE) and then makes the change once, through the applier registered for its kind
  (:mod:`zerg.approvals.appliers`), recording what was done; denied, expired or superseded it is
  never made.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from zerg.approvals import appliers, requests
from zerg.ports import TaskTokenGone
from zerg.runs import events
from zerg.runs import store as runs
from zerg.runtime import Runtime

DEFAULT_TIMEOUT_S = 3600  # how long a run waits for an answer (the ASL's default; the input may set it)
DENIED_ERROR = "Zerg.Denied"  # what a denied wait's task fails with (a custom error: never "States.*")
CANCELLED_ERROR = "Zerg.Cancelled"
POLICY_ASKS = "the owner's policy asks"  # why a call waits, when the row does not say (rows before asked_because)
log = logging.getLogger(__name__)


class ApprovalNotFound(LookupError):
    """No such approval for this owner."""


@dataclass(frozen=True)
class Answer:
    """What answering an approval did: ``decided`` when this answer decided it, else ``status`` says
    why not (``approved``/``denied``: answered already; ``expired``; ``cancelled``: its run ended)."""

    approval_id: int
    status: str
    decided: bool
    message: str
    kind: str = "call"
    done: str | None = None  # an approved directive: what was done (or why not), in Zerg's words


def await_answer(rt: Runtime, owner_id: int, approval_id: int, token: str, timeout_s: int) -> dict[str, Any]:
    """The callback task's function: keep the token the execution waits on; the run now waits.
    An approval answered before the token arrived (or one that does not exist) answers it at once."""
    with rt.pool.connection() as conn, conn.transaction():
        row = requests.record_token(conn, owner_id, approval_id, token, timeout_s)
        if row is not None and row["status"] == "pending":
            runs.mark_awaiting_approval(conn, owner_id, row["run_id"])
            events.emit(conn, row["run_id"], owner_id, "approval_requested", {
                "job_id": row["job_id"], "approval_id": row["id"], "tool": row["tool"], "arguments": row["arguments"],
                "reason": row["reason"], "expires_at": row["expires_at"].isoformat()})
    if row is None:
        _send_failure(rt, token, CANCELLED_ERROR, f"approval {approval_id} does not exist")
        return {"approval_id": approval_id, "status": "missing"}
    if row["status"] != "pending":
        _wake(rt, row)
    else:
        _tell_owner(rt, owner_id, row)
    return {"approval_id": approval_id, "status": row["status"]}


def _tell_owner(rt: Runtime, owner_id: int, row: dict[str, Any]) -> None:
    """Tell the owner an approval waits, once, on their verified email and SMS contacts and their
    browsers' push subscriptions: the exact call, the model's reason as quoted data, and how to answer
    (reply approve/deny to the email; Y/N and the code by SMS; the push's Approve/Deny actions). Best
    effort: the approval stands, listed in the API, the web client and the CLI, if nothing is sent."""
    from zerg.notify.deliver import deliver
    from zerg.text import one_line

    with rt.pool.connection() as conn:
        if not requests.claim_notice(conn, owner_id, row["id"]):
            return
        run = runs.get_run(conn, owner_id, row["run_id"])
    call = call_summary(row["tool"], row["arguments"])
    what = one_line(call["command"] or call["url"] or row["tool"], 300)
    where = f" on {call['host']}" if call["host"] else ""
    method = f" ({call['method']})" if call["method"] else ""
    started = {"schedule": "a schedule", "email": "an email reply", "sms": "an SMS reply"}.get(
        run["trigger"] if run else "", "you")
    expires = row["expires_at"].strftime("%Y-%m-%d %H:%M UTC") if row["expires_at"] else "in 1 h"
    body = (f"A run started by {started} wants to run {row['tool']}{method}: {what}{where}.\n"
            f"Run {row['run_id']}: {one_line(run['task'] if run else '', 200)}\n"
            f"Asked because {row['asked_because'] or POLICY_ASKS}.\n"
            f"The model's stated reason (its words, data, not an instruction):\n> {one_line(row['reason'], 500)}\n"
            f"Expires {expires}. Reply \"approve\" or \"deny\" to this email, or answer by SMS "
            f"Y {row['code']} / N {row['code']}, or: zerg approvals approve|deny {row['id']}.")
    text = f"Zerg asks: {row['tool']} {one_line(what, 100)}{where}? Reply Y {row['code']} or N {row['code']}."
    sent: list[int] = []
    for channel, message in (("email", body), ("sms", text)):
        try:
            rows = deliver(rt, owner_id, channel=channel, purpose="approval", severity="warning",
                           subject=f"[Zerg] Approve {row['tool']}{where}? (approval {row['id']})", body=message,
                           run_id=row["run_id"])
            sent += [r["id"] for r in rows if r["status"] != "suppressed"]
        except Exception as exc:
            log.warning("approval %s: could not tell the owner by %s (%s: %s)", row["id"], channel,
                        type(exc).__name__, exc)
    sent += _push(rt, owner_id, row, text)
    with rt.pool.connection() as conn:
        requests.set_notices(conn, owner_id, row["id"], sent)


def _push(rt: Runtime, owner_id: int, row: dict[str, Any], text: str) -> list[int]:
    """The approval to the owner's browsers (no subscription: nothing): Approve / Deny actions answer it
    through the API with the browser's session, the body opens the run. The notification ids pushed.
    The owner's notification policy with ``push: []`` (push turned off) pushes nothing."""
    from zerg.notify.policy import get_policy
    from zerg.notify.push import PushMessage, notify

    with rt.pool.connection() as conn:
        if not get_policy(conn, owner_id).push:
            return []
    message = PushMessage(title=f"Approve {row['tool']}? (approval {row['id']})", body=text,
                          url=f"/#/dashboard/runs/{row['run_id']}", severity="warning", run_id=row["run_id"],
                          tag=f"zerg-approval-{row['id']}", approval_id=row["id"])
    try:
        rows = notify(rt, owner_id, message, purpose="approval")
    except Exception as exc:
        log.warning("approval %s: could not push to the owner (%s: %s)", row["id"], type(exc).__name__, exc)
        return []
    return [r["id"] for r in rows if r["status"] != "suppressed"]


def approve(rt: Runtime, owner_id: int, approval_id: int) -> Answer:
    return _answer(rt, owner_id, approval_id, "approved")


def deny(rt: Runtime, owner_id: int, approval_id: int) -> Answer:
    return _answer(rt, owner_id, approval_id, "denied")


def _answer(rt: Runtime, owner_id: int, approval_id: int, decision: str) -> Answer:
    apply: appliers.Applier | None = None
    with rt.pool.connection() as conn:
        row = requests.get(conn, owner_id, approval_id)
        if row is None:
            raise ApprovalNotFound(f"approval {approval_id} not found")
        if row["kind"] == "directive":
            # the applier first: an approval whose change nothing could make is never claimed
            apply = appliers.applier("directive") if decision == "approved" else None
            requests.expire_directives(conn, owner_id)
        row, decided = requests.decide(conn, owner_id, approval_id, decision)  # type: ignore[arg-type]
    if row is None:
        raise ApprovalNotFound(f"approval {approval_id} not found")
    if not decided:
        return Answer(approval_id, _shown_status(row), False, _why_not(row), kind=row["kind"])
    if row["kind"] == "directive":
        done = _apply(rt, owner_id, row, apply) if apply is not None else None
        told = f"done: {done}" if done is not None else "not done"
        return Answer(approval_id, decision, True, f"approval {approval_id} {decision}: {row['summary']}: {told}",
                      kind="directive", done=done)
    if row["task_token"]:  # else the callback task has not stored it yet: await_answer answers it
        _wake(rt, row)
    return Answer(approval_id, decision, True, f"approval {approval_id} {decision}")


def _apply(rt: Runtime, owner_id: int, row: dict[str, Any], apply: appliers.Applier) -> str:
    """Make the change of a directive this call claimed (approved), once, and keep what was done."""
    try:
        done = apply(rt, owner_id, row)
    except Exception as exc:  # an applier says what failed; this is the last guard: said, never a trace
        log.warning("approval %s: the approved directive failed", row["id"], exc_info=True)
        done = f"not done: {type(exc).__name__}; ask again"
    with rt.pool.connection() as conn:
        requests.record_outcome(conn, owner_id, row["id"], done)
    return done


def _shown_status(row: dict[str, Any]) -> str:
    if row["status"] == "pending":  # not decided: past its expiry (the timeout marks it soon)
        return "expired"
    return row["status"]


def _why_not(row: dict[str, Any]) -> str:
    status = _shown_status(row)
    undone = "nothing was done" if row["kind"] == "directive" else "the call did not run"
    if status == "expired":
        return f"approval {row['id']} expired: it was not answered in time, and {undone}"
    if status == "superseded":
        return (f"approval {row['id']} is no longer open: a newer question replaced it (a yes confirms the latest "
                f"question only), and {undone}")
    if status == "cancelled":
        return f"approval {row['id']} is no longer open: its run was cancelled or ended"
    return f"approval {row['id']} was already answered ({status})"


def _wake(rt: Runtime, row: dict[str, Any]) -> None:
    """Answer the token of a decided row: approved resumes the execution, anything else fails the
    wait (the worker reads why from the row). Best effort: the decision is the row's, so a token
    that could not be answered (the service throttled, a grant missing) costs time, not the answer:
    the wait then ends at its timeout and the resume reads the decision."""
    token = row["task_token"]
    if not token:
        return
    if row["status"] == "approved":
        _send(rt, lambda: rt.starter.send_task_success(token, {"approval_id": row["id"], "decision": "approved"}),
              f"approval {row['id']} approved")
    else:
        error = DENIED_ERROR if row["status"] == "denied" else CANCELLED_ERROR
        _send(rt, lambda: rt.starter.send_task_failure(token, error, row["status"]),
              f"approval {row['id']} {row['status']}")


def _send_failure(rt: Runtime, token: str, error: str, cause: str) -> None:
    _send(rt, lambda: rt.starter.send_task_failure(token, error, cause), cause)


def _send(rt: Runtime, send: Any, what: str) -> None:
    try:
        send()
    except TaskTokenGone:  # timed out or stopped meanwhile: the resume reads the row, or the run ended
        log.info("%s: its wait had already ended", what)
    except Exception as exc:
        log.warning("%s: could not answer its wait (%s: %s); it ends at its timeout", what, type(exc).__name__, exc)


def cancel_run_waits(rt: Runtime, owner_id: int, run_id: int) -> list[dict[str, Any]]:
    """The run was cancelled or closed: its pending approvals are cancelled and their waits answered
    (an execution already stopped has none left: that is fine). The rows cancelled now."""
    with rt.pool.connection() as conn:
        rows = requests.cancel_run(conn, owner_id, run_id)
    for row in rows:
        _wake(rt, row)
    return rows


def outcome_text(row: dict[str, Any]) -> str:
    """What the model reads as the held call's result when it did not run (never the owner's channel
    text: a fixed sentence per status)."""
    status = row["status"]
    if status == "denied":
        return "DENIED: denied by the owner. The call did not run; carry on without it and say so in your answer."
    if status == "expired":
        return ("NO ANSWER: the owner did not answer within the approval time (no answer within "
                f"{_duration(row)}). The call did not run; carry on without it and say so in your answer.")
    return "CANCELLED: the run was cancelled while the call waited for the owner's approval. The call did not run."


def _duration(row: dict[str, Any]) -> str:
    if row.get("waiting_since") and row.get("expires_at"):
        seconds = int((row["expires_at"] - row["waiting_since"]).total_seconds())
        return "1 h" if seconds == 3600 else f"{seconds} s"
    return "the time allowed"


# The owner's list of approvals (issue 27 item 3): what each asks, of which run, started by whom.
REASON_NOTE = "the model's own words about why it wants the call: data to judge, never an instruction"


def call_summary(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The exact call as the owner reads it: the tool with its host and command, its URL and method,
    or its recipient (``send_email``/``send_sms`` reach the owner only), and every argument as given
    (a key that does not apply is None)."""
    shown: dict[str, Any] = {"tool": tool, "arguments": arguments, "host": None, "command": None, "url": None,
                             "method": None, "recipient": None}
    for key in ("host", "command", "url"):
        if isinstance(arguments.get(key), str):
            shown[key] = arguments[key]
    if tool == "http_request":
        shown["method"] = arguments.get("method", "GET")
    if tool in ("send_email", "send_sms"):
        shown["recipient"] = "the owner (" + ("email" if tool == "send_email" else "SMS") + ")"
    return shown


def listing(rt: Runtime, owner_id: int, *, limit: int = 50) -> list[dict[str, Any]]:
    """The owner's pending approvals (oldest first) then the recent answered ones, each with its call,
    its run (task, trigger) and the model's reason fenced as data."""
    with rt.pool.connection() as conn:
        requests.expire_directives(conn, owner_id)  # a question past its time is listed as expired
        return _views(conn, owner_id, requests.recent(conn, owner_id, limit=limit))


def run_views(conn: Any, owner_id: int, run: dict[str, Any]) -> list[dict[str, Any]]:
    """The approvals the owner's ``run`` asked for, oldest first (the run's details show them)."""
    return [approval_view(row, run) for row in requests.of_run(conn, owner_id, run["id"])]


def pending_views(conn: Any, owner_id: int) -> list[dict[str, Any]]:
    """The owner's approvals of every kind waiting for an answer, oldest first (the inbox shows them
    above its items)."""
    return _views(conn, owner_id, requests.pending(conn, owner_id, kind=None))


def _views(conn: Any, owner_id: int, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` as views, each with its run (read once per run, the owner's only)."""
    run_rows = {rid: runs.get_run(conn, owner_id, rid) for rid in {r["run_id"] for r in rows}}
    return [approval_view(row, run_rows.get(row["run_id"])) for row in rows]


def approval_view(row: dict[str, Any], run: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "id": row["id"],
        "kind": row["kind"],
        "code": row["code"] if row["status"] == "pending" else None,
        "status": row["status"],
        "summary": row["summary"],
        "outcome": row["outcome"],
        "call": call_summary(row["tool"], row["arguments"]),
        "run": {"id": row["run_id"], "job_id": row["job_id"], "task": run["task"] if run else None,
                "trigger": run["trigger"] if run else None},
        "reason": {"untrusted": True, "note": REASON_NOTE, "text": row["reason"]},
        "asked_because": row["asked_because"],
        "created_at": row["created_at"],
        "expires_at": row["expires_at"],
        "answered_at": row["answered_at"],
    }
