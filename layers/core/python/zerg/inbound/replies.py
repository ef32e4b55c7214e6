"""Replies: the one path from an inbound email or SMS to its outcome (:func:`receive`, for SES, SNS,
``zerg inbound`` and the watched inbox alike), and the answer of a reply's run back on the same
channel (:func:`answer_reply_run`).

What a message becomes, in this order (each decision is the row's ``status`` and ``reason``):

1. ``rejected``: the parser refused it (its reason), the sender is no verified contact ("unknown
   sender"), the body is empty, the owner received this email before under another provider id
   (its Message-ID: "already received (Message-ID <...>, inbound #N)"; a replay or an MTA's
   resend), or it answers nothing of its owner's: an email's reply token or Message-ID names no
   notification of the owner ("unknown reply token", "not a reply to a message from Zerg"), or one
   older than ``ZERG_REPLY_TOKEN_DAYS`` ("reply token expired ..."); an SMS with no SMS of Zerg to
   that number in that time ("no message from Zerg to answer").
2. ``keyword`` (SMS): STOP opts the number out (no confirmation: the carrier sends its own), START
   opts it in again and confirms, HELP answers :data:`zerg.inbound.sms.HELP_TEXT`. No linked
   notification needed.
   ``approval`` (SMS, issue 27): the whole message answers an approval by its short code (``Y 4821``
   / ``N 4821``, :func:`zerg.inbound.sms.approval_answer`): the owner's pending approval of that code
   is approved or denied once (:mod:`zerg.approvals.wait`) and the outcome told back; no pending
   approval of that code: told so. Never a run; no linked notification needed (the verified number
   and the owner's own code are the proof). By email, ``approve``/``deny`` (the whole reply) to an
   approval's notification answers that approval, and to the mail that carried a run's answer with
   Zerg's question (what only the owner decides) answers that run's directive approvals: the reply
   token names the notification, the notification its run.
3. ``acknowledged``: the whole message is an acknowledgement (:func:`zerg.inbound.words.is_acknowledgement`:
   "ok", "ack", "got it", 👍; "thanks" alone is none) and the run it answers has an inbox item: the
   item is acknowledged (a critical alert's repeats stop) and a one-line confirmation goes back; an
   item acknowledged before: "Already acknowledged: ..." goes back. A run with no item (an answer,
   a question, a reminder): the words are a reply like any other (4.), never swallowed.
4. ``run``: a run on the owner's thread (trigger ``email``/``sms``) whose task is the reply text,
   the owner's own words; what it answers reaches the model as the fenced ``[REPLY CONTEXT]``
   layer (:mod:`zerg.inbound.reply_context`). Its answer comes back by :func:`answer_reply_run`.

Invariants:
- Row first: the row is committed (``received``) before anything acts on it, idempotent by
  ``(channel, provider_id)``. The delivery that inserted it processes it; a duplicate delivery does
  nothing new and reports the first one's outcome (``duplicate``), except completing what a crash
  left (below). The same email under a new provider id is refused by its owner's Message-ID,
  decided under a lock on (owner, Message-ID): of copies decided at once, one runs.
- Processing happens under the row's lock and only while it is ``received``, so two deliveries or
  a delivery and the sweep never both act. A run is phase 1 (the run row and the inbound row's
  ``run``, one transaction) then phase 2 (the execution, under the row's lock again, only while the
  run has neither executor nor execution; starting is idempotent per run anyway).
- A crash leaves a row ``received``, or ``run`` with a run never started: after
  :data:`RECEIVED_GRACE_S` a duplicate delivery or :func:`recover_pending` completes it, with the
  same run. An acknowledgement made before such a crash is simply found made. A reply run closed
  (not cancelled) whose answer its closer never sent gets it from :func:`recover_pending`, within
  :data:`ANSWER_WINDOW_S`.
- The owner is decided once, by :func:`zerg.notify.contacts.sender_contact` (a verified contact); every
  read after that is scoped by that owner: another owner's token, Message-ID or SMS is not found.
  A parser's refusal gets the sender's owner only when it is about the message itself
  (:data:`OWNER_SEES`: its size, MIME, no text, an automatic reply), so the owner's listing says
  why their reply did nothing; a verdict or forgery refusal never has an owner.
- Never raises for bad input (every field is stored cleaned and bounded, a precise reason
  recorded); an unexpected error while deciding is recorded ``failed`` with its type; a database
  outage raises (the caller's retry is safe).
- Confirmations and answers go through :func:`zerg.notify.deliver.deliver` (purpose ``answer``) to
  the one contact that wrote, on the channel it wrote on; an email threaded to it. One answer per
  run: a second closer or a retry finds it sent (:func:`zerg.notify.notifications.lock_and_find_answer`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import psycopg

from zerg import observability
from zerg.inbound import messages
from zerg.inbound.messages import Inbound
from zerg.inbound.words import is_acknowledgement
from zerg.notify import contacts, notifications
from zerg.notify.answers import Send, send_answer
from zerg.runs import store as runs
from zerg.statuses import REPLY_TRIGGERS, RUN_FINAL
from zerg.timestamps import utcnow

if TYPE_CHECKING:
    from psycopg import Connection

    from zerg.runtime import Runtime

RECEIVED_GRACE_S = 120.0  # a row unchanged this long lost its process (processing takes well under a second)
ANSWER_WINDOW_S = 24 * 3600.0  # a reply run closed this recently without an answer gets it from the sweep
# A parser's refusals about the message itself, not about who sent it (see _owner_told): these
# the sender's owner sees. An allow-list: a refusal not named here stays without an owner.
OWNER_SEES = ("message of ",  # "message of N bytes exceeds the M-byte limit"
              "malformed MIME", "no text or HTML part", "empty reply",  # checked after the verdicts passed
              "automatic reply",  # Auto-Submitted, Precedence, multipart/report
              "the SMS has ")  # no text, or too long
OWNERLESS_KEEP_DAYS = 30  # rows of no owner (unknown senders, forgeries) are kept this long for the operators
SMS_ANSWER_CHARS = 600  # an answer by SMS: about four segments; longer ones end with the run's link
EMAIL_ANSWER_CHARS = 20_000


@dataclass(frozen=True)
class Outcome:
    status: str  # received | rejected | acknowledged | run | keyword | approval | failed
    reason: str | None
    inbound_id: int | None
    run_id: int | None = None
    owner_id: int | None = None
    duplicate: bool = False  # an earlier delivery of the same message made this row


@dataclass(frozen=True)
class _Decision:
    status: str
    reason: str | None = None
    owner_id: int | None = None
    contact_id: int | None = None
    notification_id: int | None = None
    answers_run_id: int | None = None
    run_id: int | None = None
    send: str | None = None  # a confirmation to send back once the decision is committed


def receive(rt: "Runtime", inbound: Inbound) -> Outcome:
    """The one path for every inbound message (see the module): its outcome. Never raises for bad
    input: every field is stored cleaned and bounded (:func:`zerg.inbound.messages.clean`) and a
    refusal recorded with its reason. Raises ``ValueError`` for a channel or source that is not an
    inbound one (the caller's bug), and psycopg's errors while the database is out (the caller's
    retry is safe: the row is idempotent by provider id)."""
    if inbound.channel not in REPLY_TRIGGERS or inbound.source not in ("ses", "sns", "local"):
        raise ValueError(f"not an inbound channel and source: {inbound.channel!r}, {inbound.source!r}")
    provider_id = _provider_key(inbound)
    with rt.pool.connection() as conn:
        if inbound.rejection:  # final at its insert: nothing of it is trusted, nor processed later
            row = messages.insert(conn, inbound, provider_id, status="rejected", reason=inbound.rejection,
                                  owner_id=_owner_told(conn, inbound))
        else:
            row = messages.insert(conn, inbound, provider_id)
    if row is None:
        return _logged(_duplicate(rt, inbound.channel, provider_id), inbound)
    if row["status"] != "received":
        return _logged(_outcome(row), inbound)
    return _logged(_process(rt, row["id"], wait=True), inbound)


def recover_pending(rt: "Runtime", *, should_stop: Callable[[], bool] | None = None,
                    older_than_s: float | None = None) -> dict[str, int]:
    """The inbound sweep (``zerg serve``'s inbound task and the AWS housekeeping task ``inbound``):
    complete what crashes left (see the module) - rows still ``received``, ``run`` rows whose run
    never started, reply runs closed within :data:`ANSWER_WINDOW_S` without an answer - once
    unchanged for ``older_than_s`` (default :data:`RECEIVED_GRACE_S`); then delete rows without an
    owner older than :data:`OWNERLESS_KEEP_DAYS`. Counts of what it did."""
    age = RECEIVED_GRACE_S if older_than_s is None else older_than_s
    stop = should_stop or (lambda: False)
    counts = {"processed": 0, "started": 0, "answered": 0, "deleted": 0, "errors": 0}
    _complete_stale(rt, age, stop, counts)
    _answer_missed(rt, age, stop, counts)
    if not stop():
        with rt.pool.connection() as conn:
            counts["deleted"] = messages.delete_ownerless(conn, OWNERLESS_KEEP_DAYS)
    return counts


def _complete_stale(rt: "Runtime", age: float, stop: Callable[[], bool], counts: dict[str, int]) -> None:
    with rt.pool.connection() as conn:
        stale = messages.stale(conn, age, runs.never_started(conn, REPLY_TRIGGERS))
    for row in stale:
        if stop():
            return
        try:
            if row["status"] == "received":
                outcome = _process(rt, row["id"], wait=False)
                done = outcome.status != "received"
                counts["processed"] += done
            else:
                done = _start(rt, row["id"], wait=False)
                counts["started"] += done
        except Exception as exc:  # one row's trouble never stops the sweep; the next one tries again
            counts["errors"] += 1
            observability.logger().warning("inbound recovery failed", exc_info=True, extra={
                "inbound_id": row["id"], "reason": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        if done:
            observability.logger().warning("recovered an inbound message its process left unfinished", extra={
                "inbound_id": row["id"], "was": row["status"],
                "now": outcome.status if row["status"] == "received" else "run started"})


def _answer_missed(rt: "Runtime", age: float, stop: Callable[[], bool], counts: dict[str, int]) -> None:
    """Reply runs whose closer closed them but never sent the answer (a crash, a timeout or an
    outage in between) get it now; :func:`answer_reply_run` sends at most one per run anyway."""
    after = 0
    while not stop():
        with rt.pool.connection() as conn:
            closed = runs.recently_closed(conn, REPLY_TRIGGERS, ANSWER_WINDOW_S, age, after_id=after)
            answered = notifications.runs_answered(conn, [r["id"] for r in closed]) if closed else set()
        for run in closed:
            if run["id"] in answered or stop():
                continue
            result = answer_reply_run(rt, run["owner_id"], run["id"])
            if "answer" in result:
                counts["answered"] += 1
                observability.logger().warning("sent the answer a reply run's closer never sent", extra={
                    "run_id": run["id"], "owner_id": run["owner_id"], "answer": result["answer"]})
            counts["errors"] += "error" in result
        if len(closed) < runs.RECENTLY_CLOSED_BATCH:
            return
        after = closed[-1]["id"]


# --- processing ---------------------------------------------------------------------------------

def _owner_told(conn: "Connection", inbound: Inbound) -> int | None:
    """The owner a parser's refusal is listed for: the one whose verified contact the sender is,
    when the refusal is about the message itself (:data:`OWNER_SEES`: its size, MIME, no text, an
    automatic reply), so the owner learns why their reply did nothing. A verdict or forgery refusal
    (SPF, DKIM, DMARC, spam, virus, the From) has no owner: its From proves nothing."""
    if not inbound.rejection.startswith(OWNER_SEES):
        return None
    contact = contacts.sender_contact(conn, inbound.channel, messages.clean(inbound.sender, 400) or "")
    return contact["owner_id"] if contact else None


def _provider_key(inbound: Inbound) -> str:
    """The provider id as the row's key: as given when it fits, else a digest of it (or, for none at
    all, of the message), so the insert never fails and a duplicate still matches."""
    pid = messages.clean(inbound.provider_id) or ""
    if 1 <= len(pid) <= 300 and pid.strip():
        return pid
    basis = pid or f"{inbound.sender}\n{inbound.message_id}\n{inbound.body}"
    return "sha256-" + hashlib.sha256(basis.encode("utf-8", "replace")).hexdigest()


def _duplicate(rt: "Runtime", channel: str, provider_id: str) -> Outcome:
    """An earlier delivery made the row: its outcome, after completing what a crash left, if it did."""
    with rt.pool.connection() as conn:
        row = messages.get_by_provider(conn, channel, provider_id)
    if row is None:  # made, then deleted with its owner in between
        return Outcome("rejected", "delivered before; its row has since been deleted", None, duplicate=True)
    if row["idle_s"] > RECEIVED_GRACE_S:
        if row["status"] == "received":
            return replace(_process(rt, row["id"], wait=False), duplicate=True)
        if row["status"] == "run":
            _start(rt, row["id"], wait=False)
    return replace(_outcome(row), duplicate=True)


def _process(rt: "Runtime", inbound_id: int, *, wait: bool) -> Outcome:
    """Decide on a ``received`` row under its lock (phase 1), then act on the decision."""
    try:
        with rt.pool.connection() as conn, conn.transaction():
            row = messages.lock(conn, inbound_id, wait=wait)
            if row is None or row["status"] != "received":  # another delivery holds it or decided already
                return _outcome(row) if row else Outcome("received", "being processed by another delivery", inbound_id)
            decision = _decide(rt, conn, row)
            row = messages.finish(conn, inbound_id, decision.status, decision.reason, owner_id=decision.owner_id,
                                  notification_id=decision.notification_id, answers_run_id=decision.answers_run_id,
                                  run_id=decision.run_id)
    except psycopg.Error:
        raise  # the database: the caller's retry delivers again
    except Exception as exc:  # a bug or an unexpected answer: recorded, never a stack trace for the sender
        observability.logger().exception("inbound message could not be processed", extra={"inbound_id": inbound_id})
        with rt.pool.connection() as conn:
            row = messages.finish(conn, inbound_id, "failed", f"could not be processed: {type(exc).__name__}")
        return _outcome(row)
    if decision.run_id is not None:
        _start(rt, inbound_id, wait=True)
    elif decision.send:
        try:  # best effort: the decision stands whatever happens to its confirmation
            # an approval's confirmation is no answer of the waiting run (that run's own answer still goes)
            answers = decision.answers_run_id if decision.status != "approval" else None
            _send_back(rt, row, decision.contact_id, decision.send, run_id=answers)
        except Exception:
            observability.logger().warning("inbound message: the confirmation could not be sent", exc_info=True,
                                           extra={"inbound_id": inbound_id})
    return _outcome(row)


def _decide(rt: "Runtime", conn: "Connection", row: dict[str, Any]) -> _Decision:
    inbound = messages.inbound_of(row)
    contact = contacts.sender_contact(conn, inbound.channel, inbound.sender)
    if contact is None:
        return _Decision("rejected", "unknown sender")
    owner_id, contact_id = contact["owner_id"], contact["id"]
    body = inbound.body.strip()
    if not body:
        return _Decision("rejected", "empty message", owner_id)
    if inbound.channel == "sms":
        from zerg.inbound import sms

        word = sms.keyword(body)
        if word is not None:
            return _keyword_decision(conn, owner_id, contact_id, row["id"], word)
        answer = sms.approval_answer(body)
        if answer is not None:  # "Y 4821": the owner's verified number answers an approval; never a run
            return _approval_decision(rt, conn, owner_id, contact_id, *answer)
    if inbound.channel == "email" and inbound.message_id:
        from zerg.text import one_line

        earlier = messages.lock_and_find_message_id(conn, owner_id, inbound.message_id, row["id"])
        if earlier is not None:  # a new provider id, the same mail: a replay, or an MTA resending it
            return _Decision("rejected", f"already received (Message-ID {one_line(inbound.message_id, 300)}, "
                                         f"inbound #{earlier['id']})", owner_id)
    answered, reason = _answered(rt, conn, owner_id, inbound)
    if answered is None:
        return _Decision("rejected", reason, owner_id)
    linked = {"owner_id": owner_id, "contact_id": contact_id, "notification_id": answered["id"],
              "answers_run_id": answered["run_id"]}
    if answered["purpose"] == "approval" and inbound.channel == "email":
        decision = _email_approval_decision(rt, conn, owner_id, answered, body, linked)
        if decision is not None:
            return decision
    if inbound.channel == "email" and answered["run_id"]:
        decision = _email_directive_decision(rt, conn, owner_id, answered, body, linked)
        if decision is not None:
            return decision
    if is_acknowledgement(body):
        decision = _acknowledge(rt, conn, owner_id, answered, linked)
        if decision is not None:
            return decision
    from zerg.agents.settings import check_models
    from zerg.llm.providers import ModelConfigError

    try:  # a model its provider cannot serve as configured: no run row; the message is kept, with why
        check_models(conn, rt.settings, owner_id)
    except ModelConfigError as exc:
        return _Decision("rejected", str(exc), owner_id)
    run_id = runs.start_run(conn, owner_id, body, trigger=inbound.channel).run_id
    return _Decision("run", None, run_id=run_id, **linked)


def _answered(rt: "Runtime", conn: "Connection", owner_id: int,
              inbound: Inbound) -> tuple[dict[str, Any] | None, str]:
    """The owner's notification the message answers, or None and why (owner-scoped lookups only)."""
    days = rt.settings.reply_token_days
    since = utcnow() - timedelta(days=days)
    if inbound.channel == "sms":
        found = None
        if inbound.previous_provider_id:
            found = notifications.by_provider_message_id(conn, owner_id, inbound.previous_provider_id, inbound.sender,
                                                         since)
        found = found or notifications.latest_sms_to(conn, owner_id, inbound.sender, since)
        return found, f"no message from Zerg to answer (none to this number in the last {days} days)"
    if inbound.tokens:
        found = notifications.by_reply_token(conn, owner_id, list(inbound.tokens))
        reason = "unknown reply token"
    else:
        ids = [i for i in (inbound.in_reply_to, *reversed(inbound.references)) if i]
        found = notifications.by_message_id(conn, owner_id, ids) if ids else None
        reason = "not a reply to a message from Zerg"
    if found is not None and found["sent_on"] < since:
        return None, (f"reply token expired (sent {found['sent_on']:%Y-%m-%d}; replies are accepted for "
                      f"{days} days)")
    return found, reason


def _acknowledge(rt: "Runtime", conn: "Connection", owner_id: int, answered: dict[str, Any],
                 linked: dict[str, Any]) -> _Decision | None:
    """An acknowledgement of the inbox item of the run ``answered`` came from, told back; "already
    acknowledged" told back for an item acknowledged before; None when that run has no item (an
    answer, a question, a reminder): the words are then a reply like any other, for a run."""
    from zerg.alerts import inbox
    from zerg.alerts.background import acknowledge
    from zerg.text import one_line

    item = inbox.get(conn, owner_id, answered["run_id"]) if answered["run_id"] else None
    if item is None:
        return None
    alert = f"the {item['severity']} alert of run {answered['run_id']}"
    if item["acknowledged_at"] is not None:
        return _Decision("acknowledged", f"already acknowledged: {alert}",
                         send=f"Already acknowledged: {one_line(item['headline'], 200)}.", **linked)
    acknowledge(rt, owner_id, answered["run_id"])  # the one path: the item and its escalation together
    repeats = " No more repeats." if item["severity"] == "critical" else ""
    return _Decision("acknowledged", f"acknowledged {alert}",
                     send=f"Acknowledged: {one_line(item['headline'], 200)}.{repeats}", **linked)


def _keyword_decision(conn: "Connection", owner_id: int, contact_id: int, inbound_id: int, word: str) -> _Decision:
    from zerg.inbound import sms

    linked = {"owner_id": owner_id, "contact_id": contact_id}
    if word == "stop":  # no confirmation: the carrier sends its own, and Zerg may no longer text the number
        contacts.opt_out(conn, owner_id, contact_id, inbound_id)
        return _Decision("keyword", "STOP: no more SMS to this number until START", **linked)
    if word == "start":
        contacts.opt_in(conn, owner_id, contact_id)
        return _Decision("keyword", "START: SMS to this number resumed", send=START_TEXT, **linked)
    return _Decision("keyword", "HELP: answered", send=sms.HELP_TEXT, **linked)


def _approval_decision(rt: "Runtime", conn: "Connection", owner_id: int, contact_id: int, decision: str,
                       code: str) -> _Decision:
    """An SMS answer to the owner's pending approval of ``code`` (owner-scoped: another owner's code is
    "no pending approval"), decided once through :mod:`zerg.approvals.wait`, and told back."""
    from zerg.approvals import requests as approval_requests
    from zerg.approvals import wait
    from zerg.text import one_line

    linked = {"owner_id": owner_id, "contact_id": contact_id}
    pending = approval_requests.by_code(conn, owner_id, code)
    if pending is None:
        return _Decision("approval", f"no pending approval with code {code}",
                         send=f"Zerg: no pending approval has code {code} (answered, expired or never asked).",
                         **linked)
    answer = (wait.approve if decision == "approve" else wait.deny)(rt, owner_id, pending["id"])
    call = wait.call_summary(pending["tool"], pending["arguments"])
    what = call["command"] or call["url"] or pending["tool"]
    where = f" on {call['host']}" if call["host"] else ""
    if answer.decided and answer.kind == "directive":  # a change Zerg made (or not) just now: say which
        told = "Approved" if answer.status == "approved" else "Denied"
        effect = one_line(answer.done, 300) if answer.done is not None else "not done"
        send = f"Zerg: {told} {code}: {one_line(pending['summary'], 200)}: {effect}"
    elif answer.decided:
        told = "Approved" if answer.status == "approved" else "Denied"
        effect = "it runs now" if answer.status == "approved" else "it will not run"
        send = f"Zerg: {told} {code}: {one_line(what, 120)}{where}; {effect}."
    else:
        send = f"Zerg: {code} not changed: {answer.message}."
    return _Decision("approval", f"code {code}: {answer.message}", answers_run_id=pending["run_id"], send=send,
                     **linked)


_APPROVE_WORDS = {"approve": "approve", "approved": "approve", "yes": "approve", "y": "approve",
                  "deny": "deny", "denied": "deny", "no": "deny", "n": "deny"}


def _email_approval_decision(rt: "Runtime", conn: "Connection", owner_id: int, answered: dict[str, Any], body: str,
                             linked: dict[str, Any]) -> _Decision | None:
    """An email reply "approve" / "deny" (the whole reply) to the notification that told the owner about
    an approval answers exactly that approval (the reply token names the notification; the approval
    keeps its notifications), once. Other words: None, a reply like any other."""
    from zerg.approvals import requests as approval_requests
    from zerg.approvals import wait

    word = " ".join(body.strip().rstrip(" \t\n.!?,;:").split()).lower()
    decision = _APPROVE_WORDS.get(word)
    if decision is None:
        return None
    approval = approval_requests.by_notification(conn, owner_id, answered["id"])
    if approval is None:
        return None
    answer = (wait.approve if decision == "approve" else wait.deny)(rt, owner_id, approval["id"])
    told = answer.message[0].upper() + answer.message[1:]
    runs_now = answer.decided and answer.status == "approved" and answer.kind == "call"
    send = f"{told}." + (" The call runs now." if runs_now else "")
    return _Decision("approval", f"email: {answer.message}", send=send, **linked)


_DIRECTIVE_WORDS = {"approve": "approve", "approved": "approve", "deny": "deny", "denied": "deny"}


def _email_directive_decision(rt: "Runtime", conn: "Connection", owner_id: int, answered: dict[str, Any], body: str,
                              linked: dict[str, Any]) -> _Decision | None:
    """An email reply "approve" / "deny" (the whole reply) to the mail that carried a run's answer with
    Zerg's question (what only the owner decides) answers that run's directive approvals, through the
    same answer as every channel (:mod:`zerg.approvals.wait`), once; a question answered, expired or
    superseded since says so. "yes" stays the owner's next message (the yes path); other words, or a
    run that asked nothing: None, a reply like any other."""
    from zerg.approvals import requests as approval_requests
    from zerg.approvals import wait
    from zerg.text import one_line

    decision = _DIRECTIVE_WORDS.get(" ".join(body.strip().rstrip(" \t\n.!?,;:").split()).lower())
    if decision is None:
        return None
    asked = [r for r in approval_requests.directives_of_run(conn, owner_id, answered["run_id"])
             if r["shown_at"] is not None]
    if not asked:
        return None
    lines = []
    for row in asked:
        answer = (wait.approve if decision == "approve" else wait.deny)(rt, owner_id, row["id"])
        told = (answer.message if not answer.decided
                else f"{'Approved' if answer.status == 'approved' else 'Denied'}: {one_line(row['summary'], 300)}: "
                     f"{answer.done if answer.done is not None else 'not done'}")
        lines.append(f"- {told}")
    return _Decision("approval", f"email: {decision} the question of run {answered['run_id']}",
                     send="Zerg:\n" + "\n".join(lines), **linked)


START_TEXT = "Zerg: alerts by SMS to this number are on again. Reply STOP to stop them, HELP for help."


def _start(rt: "Runtime", inbound_id: int, *, wait: bool) -> bool:
    """Phase 2: start the execution of the row's run unless it was started or closed meanwhile;
    whether this call started it. A failed start is recorded by launch (the run ``failed``, its
    answer says so); the row stays ``run``."""
    from zerg.runs.launch import LaunchError, start_execution

    with rt.pool.connection() as conn, conn.transaction():
        row = messages.lock(conn, inbound_id, wait=wait)
        if row is None or row["status"] != "run" or row["run_id"] is None:
            return False
        run = runs.get_run(conn, row["owner_id"], row["run_id"])
        if run is None or run["status"] != "running" or run["execution_arn"] or run["executor"]:
            return False
        try:
            start_execution(rt, run)
        except LaunchError:
            return False
    return True


def _outcome(row: dict[str, Any]) -> Outcome:
    return Outcome(row["status"], row["reason"], row["id"], row["run_id"], row["owner_id"])


def _logged(outcome: Outcome, inbound: Inbound) -> Outcome:
    """The outcome's log line, with what the parser saw (why a refusal, for an operator)."""
    log = observability.logger()
    (log.warning if outcome.status == "failed" else log.info)(f"inbound {inbound.channel}: {outcome.status}", extra={
        "inbound_id": outcome.inbound_id, "channel": inbound.channel, "source": inbound.source,
        "status": outcome.status, "reason": outcome.reason, "owner_id": outcome.owner_id, "run_id": outcome.run_id,
        "duplicate": outcome.duplicate, "parsed": _parser_notes(inbound.extra)})
    return outcome


_LOGGED_EXTRA = ("bytes", "part", "charset", "attachments", "defects", "keyword", "sns_message_id")


def _parser_notes(extra: dict[str, Any]) -> dict[str, Any]:
    """The parser's notes (:attr:`Inbound.extra`) an operator needs, bounded: they come from the message."""
    notes: dict[str, Any] = {}
    for key in _LOGGED_EXTRA:
        value = extra.get(key)
        if isinstance(value, (list, tuple)):
            notes[key] = [str(v)[:80] for v in value[:20]]
        elif isinstance(value, (bool, int, float)):
            notes[key] = value
        elif value is not None:
            notes[key] = str(value)[:100]
    return notes


# --- answers ------------------------------------------------------------------------------------

def answer_reply_run(rt: "Runtime", owner_id: int, run_id: int) -> dict[str, Any]:
    """Send the closed reply run's answer (or why it could not finish) to the contact that wrote,
    on the channel it wrote on, once (see the module). Never raises: called after a run closed."""
    return send_answer(rt, owner_id, run_id, lambda conn, run: _prepare_answer(rt, conn, run), what="reply run")


def on_close(rt: "Runtime", run: dict[str, Any], assessment: Any = None) -> dict[str, Any]:
    """The run-close subscriber for a reply's run (registered by :mod:`zerg.wiring`)."""
    return answer_reply_run(rt, run["owner_id"], run["id"])


def _prepare_answer(rt: "Runtime", conn: "Connection", run: dict[str, Any]) -> "Send | str":
    if run["trigger"] not in REPLY_TRIGGERS:
        return "not a reply's run"
    if run["status"] not in RUN_FINAL or run["status"] == "cancelled":
        return f"the run is {run['status']}"  # a cancel: the owner stopped it
    row = messages.for_run(conn, run["owner_id"], run["id"])
    if row is None:
        return "no inbound message started it"
    contact = contacts.sender_contact(conn, row["channel"], row["sender"] or "")
    if contact is None or contact["owner_id"] != run["owner_id"]:
        return "the sender is no longer a verified contact"
    text = answer_text(rt.settings, run, row["channel"])
    return lambda: _send_back(rt, row, contact["id"], text, run_id=run["id"])


def answer_text(settings: Any, run: dict[str, Any], channel: str) -> str:
    """A closed reply run's answer as sent back: the answer (a failed run: why, briefly) and the
    run's link; for SMS cut to :data:`SMS_ANSWER_CHARS` before the link. A question Zerg appended
    (:func:`zerg.approvals.question.split_question`) is kept whole: the model's text gives way first."""
    from zerg.alerts.messages import base_url, run_link
    from zerg.approvals.question import split_question
    from zerg.text import one_line

    link = run_link(base_url(settings), run["id"])
    answered = run["status"] in ("success", "timeout") and bool((run["result"] or "").strip())
    if answered:
        text, question = split_question(run["result"].strip())
    else:
        text, question = f"I could not finish: {one_line(run['error'] or run['status'], 300)}", None
    limit = EMAIL_ANSWER_CHARS if channel == "email" else SMS_ANSWER_CHARS
    asked = f"\n\n{question}" if question else ""
    if channel == "email":
        return f"{_shortened(text, limit - len(asked), '…')}{asked}\n\n--\nRun: {link}"
    if len(text) + len(asked) + len(link) + 1 <= limit:
        return f"{text}{asked}" if answered else f"{text} {link}"
    if question and len(asked) + len(link) + 40 > limit:  # the question alone does not fit: its start and the link
        tail = f"… Full question: {link}"
        return (f"{_shortened(text, 60, '…')}{asked}")[: limit - len(tail)].rstrip() + tail
    tail = f"… Full answer: {link}"
    return _shortened(text, limit - len(asked), tail) + asked


def _shortened(text: str, room: int, tail: str) -> str:
    """``text`` whole when it fits in ``room`` characters, else cut to end with ``tail`` there."""
    if len(text) <= room:
        return text
    return text[: max(0, room - len(tail))].rstrip() + tail


def reply_subject(subject: str | None) -> str:
    """"Re: <subject>", never "Re: Re:" (nor "Re: AW:")."""
    from zerg.notify.channels.notifier import header_text

    flat = header_text(subject or "")
    if re.match(r"(?i)^(re|aw|sv|antw|vs|rif)\s*:", flat):
        return flat
    return f"Re: {flat}" if flat else "Re: your message to Zerg"


def _send_back(rt: "Runtime", row: dict[str, Any], contact_id: int | None, text: str, *,
               run_id: int | None = None) -> list[dict[str, Any]]:
    """``text`` to the contact that wrote ``row``, on its channel; an email threaded to it. Best
    effort for a confirmation (a failure is the notifications row's and a log line)."""
    from zerg.notify.deliver import deliver

    if contact_id is None:
        return []
    references = tuple((row["references_ids"] or "").split()) + ((row["message_id"],) if row["message_id"] else ())
    return deliver(rt, row["owner_id"], channel=row["channel"], purpose="answer", subject=reply_subject(row["subject"]),
                   body=text, run_id=run_id, contact_id=contact_id, in_reply_to=row["message_id"],
                   references=references)
