"""``zerg contacts`` and ``zerg policy``: the owner's contacts and notification policy from the
command line, through the same services as the API (:mod:`zerg.notify.verification`,
:func:`zerg.notify.policy.set_policy`).

Every command acts for the local owner, or ``--owner NAME``. Exit status: 0 done, 1 refused or
not found (one line on stderr), 2 bad input.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import UTC
from typing import Any

from zerg.cli.common import run_as_owner


def _run(args: argparse.Namespace, work: Callable[[Any, int], int]) -> int:
    """``work(runtime, owner_id)`` with the services' refusals as exit statuses."""
    from zerg.notify.policy import PolicyError
    from zerg.notify.verification import ContactError

    return run_as_owner(args, work, ((ContactError, lambda exc: 2 if exc.status == 422 else 1), (PolicyError, 2)))


def cmd_contacts_add(args: argparse.Namespace) -> int:
    from zerg.notify import verification as service

    def work(rt: Any, owner_id: int) -> int:
        added = service.add(rt, owner_id, args.kind, args.address)
        contact = added.contact
        if not added.code_sent:
            print(f"{contact['kind']} {contact['address']} is verified already (contact {contact['id']})")
            return 0
        print(f"a 6-digit code was sent to {contact['address']}; it expires at {contact['code_expires_at']:%H:%M} UTC")
        if rt.settings.notifier == "local":
            print(f"(the local notifier wrote it to {rt.settings.data_dir / 'outbox'})")
        print(f"verify with: zerg contacts verify {contact['kind']} {contact['address']} CODE")
        return 0
    return _run(args, work)


def cmd_contacts_verify(args: argparse.Namespace) -> int:
    from zerg.notify import verification as service

    def work(rt: Any, owner_id: int) -> int:
        contact = service.verify(rt, owner_id, args.kind, args.address, args.code)
        print(f"verified: {contact['kind']} {contact['address']} (contact {contact['id']})")
        return 0
    return _run(args, work)


def cmd_contacts_list(args: argparse.Namespace) -> int:
    from zerg.notify import verification as service

    def work(rt: Any, owner_id: int) -> int:
        rows = service.list_contacts(rt, owner_id)
        if not rows:
            print("no contacts (zerg contacts add email ADDRESS, or add sms +NUMBER)")
        for c in rows:
            opted = f"\topted out (STOP) {c['opted_out_at'].astimezone(UTC):%Y-%m-%d %H:%M} UTC" if c.get("opted_out_at") else ""
            print(f"{c['id']}\t{c['kind']}\t{c['address']}\t{'verified' if c['verified'] else 'unverified'}{opted}")
        return 0
    return _run(args, work)


def cmd_contacts_rm(args: argparse.Namespace) -> int:
    from zerg.notify import verification as service

    def work(rt: Any, owner_id: int) -> int:
        service.remove(rt, owner_id, args.id)
        print(f"removed contact {args.id}")
        return 0
    return _run(args, work)


def _show(policy: Any) -> None:
    data = policy.as_dict()
    print(f"time zone:        {data['timezone']}")
    print(f"quiet hours:      {data['quiet_hours'] or 'none'} (hold warning SMS until they end)")
    for severity, channels in data["channels"].items():
        print(f"{severity + ':':<18}{', '.join(channels) or 'inbox only'}")
    print(f"daily limits:     {data['daily_email_limit']} email, {data['daily_sms_limit']} SMS")
    cap = data["daily_usd_cap"]
    print(f"daily USD cap:    {'none' if cap is None else f'{cap:.2f}'}")
    run_usd, run_tokens = data["run_usd_budget"], data["run_token_budget"]
    print(f"run budget:       {'none' if run_usd is None else f'{run_usd:.2f} USD'}, "
          f"{'no token limit' if run_tokens is None else f'{run_tokens} tokens'}")
    for model, (price_in, price_out) in sorted(data["model_prices"].items()):
        print(f"model price:      {model}: {price_in} in, {price_out} out (USD per million tokens)")
    print(f"escalation:       {data['escalation_repeats']} repeats, every {data['escalation_every_s']} s")


def cmd_policy_show(args: argparse.Namespace) -> int:
    from zerg.notify.policy import get_policy

    def work(rt: Any, owner_id: int) -> int:
        with rt.pool.connection() as conn:
            _show(get_policy(conn, owner_id))
        return 0
    return _run(args, work)


def policy_values(args: argparse.Namespace) -> dict[str, Any]:
    """The ``zerg policy set`` options as :class:`~zerg.notify.policy.PolicyChange` fields."""
    from zerg.notify.policy import PolicyError

    values: dict[str, Any] = {}
    if args.timezone is not None:
        values["timezone"] = args.timezone
    if args.quiet_hours is not None:
        values["quiet_hours"] = args.quiet_hours
    for name in ("daily_email_limit", "daily_sms_limit", "escalation_repeats", "escalation_every_s"):
        if getattr(args, name) is not None:
            values[name] = getattr(args, name)
    if args.daily_usd_cap is not None:
        values["daily_usd_cap"] = None if args.daily_usd_cap.strip().lower() in ("none", "off") else args.daily_usd_cap
    for name in ("run_usd_budget", "run_token_budget"):
        value = getattr(args, name, None)
        if value is not None:
            values[name] = None if value.strip().lower() in ("none", "off") else value.strip()
    if values.get("run_token_budget") is not None:
        if not values["run_token_budget"].isdigit():
            raise PolicyError(f"--run-token-budget {values['run_token_budget']!r}: give a whole number of tokens, or none")
        values["run_token_budget"] = int(values["run_token_budget"])
    for item in args.channels or []:
        severity, eq, channels = item.partition("=")
        if not eq:
            raise PolicyError(f"--channels {item!r}: give SEVERITY=CHANNELS, e.g. warning=email,sms or info=none")
        chosen = [] if channels.strip().lower() in ("", "none") else [c.strip() for c in channels.split(",")]
        values.setdefault("channels", {})[severity.strip()] = chosen
    return values


def model_prices(current: dict[str, list[float]], items: list[str]) -> dict[str, list[float]]:
    """``--model-price MODEL=IN,OUT`` (USD per million tokens) over the owner's ``current`` prices;
    ``MODEL=none`` removes one."""
    from zerg.notify.policy import PolicyError

    prices = dict(current)
    for item in items:
        model, eq, text = item.partition("=")
        model = model.strip()
        if not eq or not model:
            raise PolicyError(f"--model-price {item!r}: give MODEL=IN,OUT (USD per million tokens), e.g. my-model=0.5,1.5")
        if text.strip().lower() in ("none", "off"):
            prices.pop(model, None)
            continue
        try:
            price_in, price_out = (float(p) for p in text.split(","))
        except ValueError:
            raise PolicyError(f"--model-price {item!r}: give two amounts, IN,OUT (USD per million tokens)") from None
        prices[model] = [price_in, price_out]
    return prices


def cmd_policy_set(args: argparse.Namespace) -> int:
    from zerg.notify.policy import change_from, get_policy, set_policy

    def work(rt: Any, owner_id: int) -> int:
        values = policy_values(args)
        with rt.pool.connection() as conn:
            if getattr(args, "model_price", None):  # merged into the owner's prices: one option per model
                values["model_prices"] = model_prices(get_policy(conn, owner_id).model_prices, args.model_price)
            _show(set_policy(conn, owner_id, change_from(values)))
        return 0
    return _run(args, work)


def _contact_id(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) < 2**62:
        raise argparse.ArgumentTypeError(f"{text!r} is not a contact id (a positive number, as zerg contacts list shows it)")
    return int(text)


def add_commands(groups: Any, add_owner_option: Callable[[argparse.ArgumentParser], None],
                 resolve_owner: Callable[[Any, str | None], int]) -> None:
    """The ``zerg contacts`` and ``zerg policy`` groups under the top-level sub-parsers.
    ``resolve_owner(conn, name)`` is the CLI's own (``--owner`` or the local owner)."""
    from zerg.notify.policy import CHANNELS

    contacts = groups.add_parser("contacts", help="where Zerg may email or text the owner (verified contacts)"
                                 ).add_subparsers(dest="cmd", required=True)
    add = contacts.add_parser("add", help="add an email address or phone number and send it a 6-digit code")
    add.add_argument("kind", choices=CHANNELS)
    add.add_argument("address", help="owner@example.com, or +15551234567 (E.164)")
    verify = contacts.add_parser("verify", help="verify a contact with the code it received")
    verify.add_argument("kind", choices=CHANNELS)
    verify.add_argument("address")
    verify.add_argument("code", help="the 6 digits")
    list_p = contacts.add_parser("list", help="the owner's contacts, each verified or unverified")
    rm = contacts.add_parser("rm", help="remove a contact")
    rm.add_argument("id", type=_contact_id, help="the contact's id (zerg contacts list shows it)")

    policy = groups.add_parser("policy", help="the owner's notification policy").add_subparsers(dest="cmd", required=True)
    show = policy.add_parser("show", help="channels per severity, quiet hours, limits, escalation")
    set_p = policy.add_parser("set", help="change the options given; the others stay")
    set_p.add_argument("--timezone", metavar="ZONE", help="IANA time zone of the quiet hours, e.g. Europe/Berlin")
    set_p.add_argument("--quiet-hours", metavar="HH:MM-HH:MM", help="e.g. 22:00-07:00 (may wrap midnight), or off")
    set_p.add_argument("--channels", action="append", metavar="SEVERITY=CHANNELS",
                       help="e.g. warning=email,sms or info=none (repeat for several severities)")
    set_p.add_argument("--daily-email-limit", type=int, metavar="N", help="emails per UTC day (0-10000)")
    set_p.add_argument("--daily-sms-limit", type=int, metavar="N", help="SMS per UTC day (0-10000)")
    set_p.add_argument("--daily-usd-cap", metavar="USD", help="model spending per day in the policy's time zone, e.g. 2.50, or none")
    set_p.add_argument("--run-usd-budget", metavar="USD",
                       help="a run's model spending limit unless its request sets one, e.g. 0.50, or none")
    set_p.add_argument("--run-token-budget", metavar="N", help="a run's token limit (in + out) unless its request sets one, or none")
    set_p.add_argument("--model-price", action="append", metavar="MODEL=IN,OUT",
                       help="USD per million input and output tokens of a model Zerg has no price for (repeatable; "
                            "MODEL=none removes it); a budgeted run refuses a model without a price")
    set_p.add_argument("--escalation-repeats", type=int, metavar="N", help="repeats of a critical alert (0-20)")
    set_p.add_argument("--escalation-every", dest="escalation_every_s", type=int, metavar="SECONDS",
                       help="seconds between repeats (1-86400)")
    for parser, func in ((add, cmd_contacts_add), (verify, cmd_contacts_verify), (list_p, cmd_contacts_list),
                         (rm, cmd_contacts_rm), (show, cmd_policy_show), (set_p, cmd_policy_set)):
        add_owner_option(parser)
        parser.set_defaults(func=func, resolve_owner=resolve_owner)
