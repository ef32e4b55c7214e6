"""The local notifier: every email and SMS becomes a file under ``$ZERG_DATA_DIR/outbox/``.

Invariants:
- One RFC 5322 ``.eml`` per email (exactly :func:`zerg.notify.channels.notifier.mime_message`: any mail
  client opens it) and one ``.json`` per SMS (``{"to", "parts", "created"}``), plus one log line each.
- A file appears whole or not at all (written to a temporary name, then renamed), is 0600 in a
  0700 directory (an outbox holds verification codes), and is never overwritten (names are unique).
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
from pathlib import Path

from zerg import observability
from zerg.notify.channels.notifier import mime_message, split_sms
from zerg.ports import Email, NotifierError, SentEmail, Sms
from zerg.timestamps import iso, utcnow


class OutboxNotifier:
    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def send_email(self, email: Email) -> SentEmail:
        from email.utils import make_msgid

        name = self._name()
        message_id = email.message_id or make_msgid(idstring=name, domain=email.sender.rpartition("@")[2] or "zerg.localhost")
        msg = mime_message(Email(**{**email.__dict__, "message_id": message_id}))
        path = self._write(f"{name}.eml", msg.as_bytes())
        observability.logger().info("email written to the outbox", extra={
            "notifier": "local", "file": str(path), "to": email.to, "subject": msg["Subject"]})
        return SentEmail(provider_message_id=f"outbox-{name}", message_id=message_id)

    def send_sms(self, sms: Sms) -> list[str]:
        name = self._name()
        parts = split_sms(sms.text)
        body = json.dumps({"to": sms.to, "parts": parts, "created": iso(utcnow())}, ensure_ascii=False, indent=2)
        path = self._write(f"{name}.json", body.encode() + b"\n")
        observability.logger().info("sms written to the outbox", extra={
            "notifier": "local", "file": str(path), "to": sms.to, "parts": len(parts)})
        return [f"outbox-{name}-{i}" for i in range(1, len(parts) + 1)]

    def _name(self) -> str:
        """Sortable by time, unique by its random tail."""
        return f"{utcnow():%Y%m%dT%H%M%S%fZ}-{secrets.token_hex(4)}"

    def _write(self, name: str, data: bytes) -> Path:
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(self.directory, 0o700)
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".", suffix=".tmp")  # 0600 by mkstemp
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
                final = self.directory / name
                os.link(tmp, final)  # fails rather than replace an existing file
            finally:
                os.unlink(tmp)
        except OSError as exc:
            raise NotifierError(f"cannot write the outbox {self.directory}: {exc.strerror or exc}") from None
        return final
