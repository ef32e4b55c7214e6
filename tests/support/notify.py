"""Contacts and the local outbox, as tests need them: verified contacts made directly (the
verification flow has its own tests), and what the outbox holds, parsed."""

from __future__ import annotations

import email
import email.policy
import json
import re
import secrets
from email.message import EmailMessage
from pathlib import Path


def unique_email(prefix: str = "owner") -> str:
    return f"{prefix}-{secrets.token_hex(4)}@example.com"


def unique_number() -> str:
    return f"+1555{secrets.randbelow(10**7):07d}"


def verified_contact(pool, owner_id: int, kind: str, address: str | None = None) -> dict:
    """A verified contact of the owner (what ``zerg contacts verify`` leaves)."""
    address = address or (unique_email() if kind == "email" else unique_number())
    with pool.connection() as conn:
        return conn.execute("INSERT INTO owner_contacts (owner_id, kind, address, verified_at) VALUES (%s, %s, %s, now()) "
                            "RETURNING id, kind, address, verified_at", (owner_id, kind, address)).fetchone()


def outbox(data_dir: Path) -> Path:
    return Path(data_dir) / "outbox"


def emails(data_dir: Path) -> list[EmailMessage]:
    """Every .eml of the outbox, oldest first, parsed as a mail client would."""
    return [email.message_from_bytes(p.read_bytes(), policy=email.policy.default)
            for p in sorted(outbox(data_dir).glob("*.eml"))]


def texts(data_dir: Path) -> list[dict]:
    """Every SMS .json of the outbox, oldest first."""
    return [json.loads(p.read_text()) for p in sorted(outbox(data_dir).glob("*.json"))]


def body_of(msg: EmailMessage, subtype: str = "plain") -> str:
    return msg.get_body(preferencelist=(subtype,)).get_content()


def code_in(text: str) -> str:
    (code,) = re.findall(r"\b(\d{6})\b", text)
    return code
