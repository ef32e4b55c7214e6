"""``zerg inbound``: inject a reply as SES or two-way SMS would deliver it, through the same parsers
and the same pipeline (:func:`zerg.inbound.replies.receive`), and list the owner's replies.

``zerg inbound email FILE.eml`` and ``zerg inbound sms --from +15551234567 "text"`` print what
became of the message (status, reason, inbound id, run id); when it started a run, they wait for
it and print its answer as ``zerg schedules run-now`` does, then where the answer went back
(``answer: sms to +1555...: sent``). The owner is whoever the sender is a
verified contact of (never ``--owner``: the pipeline decides). Exit status: 0 a run that
succeeded, an acknowledgement or a keyword; 1 refused (the reason on stderr), or its run did not
succeed; 2 bad usage (a missing or unreadable file, an empty text); 130 Ctrl-C.

``zerg inbound list`` acts for the local owner, or ``--owner NAME``.
"""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Callable
from datetime import timezone
from pathlib import Path
from typing import Any

from zerg.cli.common import count_arg, fail, run_as_owner


def cmd_email(args: argparse.Namespace) -> int:
    from zerg.inbound.local_inbox import email_from_file

    path = Path(args.file)
    try:
        if not path.is_file():
            return fail(f"{args.file}: {'not a regular file' if path.exists() else 'no such file'}", 2)
        return _deliver(args, lambda rt: email_from_file(rt, path))
    except OSError as exc:
        return fail(f"{args.file}: {exc.strerror or exc}", 2)


def cmd_sms(args: argparse.Namespace) -> int:
    from zerg.inbound import sms

    text = " ".join(args.text).strip()
    if not text:
        return fail('give the text of the SMS, e.g. zerg inbound sms --from +15551234567 "ack"', 2)
    # A fresh id per command: the same text sent twice on purpose is two messages; --id replays one.
    message_id = args.id or uuid.uuid4().hex
    return _deliver(args, lambda rt: sms.from_local(args.sender, text, previous_provider_id=args.reply_to,
                                                      message_id=message_id))


def _deliver(args: argparse.Namespace, parse: Callable[[Any], Any]) -> int:
    from zerg import observability
    from zerg.inbound import messages, replies
    from zerg.local.run import prepare_local_run, wait_for_run
    from zerg.migrate import migrate
    from zerg.wiring import get_runtime

    if not args.verbose:  # the handlers' log lines are for operators, not this terminal
        observability.set_level("WARNING")
    rt = get_runtime()
    try:
        prepare_local_run(rt)  # a reply may start a run, executed in this process
        with rt.pool.connection() as conn:
            migrate(conn)
        inbound = parse(rt)
        outcome = replies.receive(rt, inbound)
        print(describe(inbound.channel, outcome), flush=True)
        if outcome.status not in messages.HANDLED:
            return fail(f"{outcome.status}: {outcome.reason or 'no reason recorded'}", 1)
        if outcome.status != "run" or outcome.run_id is None or outcome.duplicate:
            return 0  # a duplicate's run belongs to the first delivery
        status = wait_for_run(rt, outcome.owner_id, outcome.run_id)
        _print_answers(rt, outcome.owner_id, outcome.run_id)
        return status
    finally:
        rt.close()


def _print_answers(rt: Any, owner_id: int, run_id: int) -> None:
    """Where the run's answer went back (the reply's channel, the contact that wrote)."""
    from zerg.notify import notifications

    with rt.pool.connection() as conn:
        sent = [n for n in notifications.for_run(conn, owner_id, run_id) if n["purpose"] == "answer"]
    for n in sent:
        print(f"answer: {n['channel']} to {n['address'] or '-'}: {n['status']}"
              + (f" ({n['reason']})" if n["reason"] else ""))


def describe(channel: str, outcome: Any) -> str:
    """One line: 'inbound email 12: run 345' / 'inbound sms 13: rejected (unknown sender)'."""
    what = f"inbound {channel} {outcome.inbound_id if outcome.inbound_id is not None else '-'}: {outcome.status}"
    if outcome.run_id is not None:
        what += f" {outcome.run_id}"
    if outcome.reason:
        what += f" ({outcome.reason})"
    return what + (" [a duplicate: the first delivery's outcome]" if outcome.duplicate else "")


def cmd_list(args: argparse.Namespace) -> int:
    from zerg.inbound import messages
    from zerg.text import one_line

    def work(rt: Any, owner_id: int) -> int:
        with rt.pool.connection() as conn:
            rows = messages.list_for_owner(conn, owner_id, limit=args.limit)
        if not rows:
            print("no inbound messages (replies to Zerg's email and SMS appear here)")
            return 0
        for r in rows:
            when = r["received_at"].astimezone(timezone.utc).strftime("%Y-%m-%d %H:%MZ")
            run = f"run {r['run_id']}" if r["run_id"] else "-"
            text = (r["reason"] if r["status"] in ("rejected", "failed") else r["body_preview"]) or ""
            print(f"{r['id']}\t{r['channel']}\t{when}\t{r['status']}\t{run}\t{one_line(text, 80)}")
        return 0

    return run_as_owner(args, work)


def _message_id(text: str) -> str:
    if not 1 <= len(text) <= 200 or not text.isprintable() or text.strip() != text:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a message id (1-200 printable characters)")
    return text


def add_commands(groups: Any, add_owner_option: Callable[[argparse.ArgumentParser], None],
                 resolve_owner: Callable[[Any, str | None], int]) -> None:
    """The ``zerg inbound`` group under the top-level sub-parsers."""
    inbound = groups.add_parser("inbound", help="replies: inject an email or SMS as if it arrived, list them"
                                ).add_subparsers(dest="cmd", required=True)
    email_p = inbound.add_parser("email", help="deliver a reply email (a .eml file, as a mail client saves it)")
    email_p.add_argument("file", metavar="FILE.eml")
    sms_p = inbound.add_parser("sms", help="deliver a reply SMS from a number")
    sms_p.add_argument("--from", dest="sender", required=True, metavar="+15551234567",
                       help="the sender's number (E.164): one of an owner's verified SMS contacts")
    sms_p.add_argument("--id", type=_message_id, metavar="ID", help="the message's id (default: a fresh one); the same id again "
                                                  "is a redelivery of the same message")
    sms_p.add_argument("--reply-to", metavar="PROVIDER_MESSAGE_ID",
                       help="the provider message id of Zerg's SMS it answers (default: the latest sent to that number)")
    sms_p.add_argument("text", nargs="+", help="what the SMS says, e.g. ack")
    for parser, func in ((email_p, cmd_email), (sms_p, cmd_sms)):
        parser.add_argument("-v", "--verbose", action="store_true", help="show the handlers' log lines")
        parser.set_defaults(func=func)
    listing = inbound.add_parser("list", help="the owner's inbound messages, newest first, and what became of each")
    listing.add_argument("--limit", type=count_arg(200), default=50, metavar="N", help="how many (1-200, default 50)")
    add_owner_option(listing)
    listing.set_defaults(func=cmd_list, resolve_owner=resolve_owner)
