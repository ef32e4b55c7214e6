"""An owner Zerg can reach: verified contacts (as `zerg contacts verify` leaves them) and what the
local notifier wrote for them (``$ZERG_DATA_DIR/outbox``)."""

from __future__ import annotations

import email
import email.policy
import json
from pathlib import Path
from typing import Any

from tests.support.factories import unique_name
from zerg.notify import contacts
from zerg.timestamps import utcnow


def verified_contact(pool, owner_id: int, kind: str = "email", address: str | None = None) -> dict[str, Any]:
    """A verified contact of the owner (a unique address unless given)."""
    address = address or (f"{unique_name('owner')}@example.com" if kind == "email"
                          else "+1555" + unique_name("")[-7:].translate(str.maketrans("abcdef", "123456")))
    now = utcnow()
    with pool.connection() as conn:
        row = contacts.insert_pending(conn, owner_id, kind, address, "unused", now, now)
        return contacts.mark_verified(conn, owner_id, row["id"], now)


def outbox(data_dir: Path) -> dict[str, list[Any]]:
    """``{"email": [EmailMessage, ...], "sms": [{"to", "parts"}, ...]}``, oldest first."""
    box = Path(data_dir) / "outbox"
    files = sorted(box.iterdir()) if box.is_dir() else []
    return {
        "email": [email.message_from_bytes(p.read_bytes(), policy=email.policy.default) for p in files if p.suffix == ".eml"],
        "sms": [json.loads(p.read_text()) for p in files if p.suffix == ".json"],
    }


def parts(message: email.message.EmailMessage) -> tuple[str, str]:
    """(text, html) of an outbox email."""
    return (message.get_body(("plain",)).get_content(), message.get_body(("html",)).get_content())
