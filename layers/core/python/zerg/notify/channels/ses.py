"""Email through Amazon SES v2 (``SendEmail`` with ``Content.Raw``): the message is exactly
:func:`zerg.notify.channels.notifier.mime_message`, so Reply-To, In-Reply-To and References are ours.

Invariants:
- The envelope recipient is ``Destination.ToAddresses = [email.to]``: SES takes recipients from
  there, never from a header.
- SES replaces the Message-ID header with ``<{MessageId}@{region}.amazonses.com>`` (``email.`` in
  us-east-1); that value is what the recipient sees and what a reply's In-Reply-To carries, so it
  is the one returned (and recorded).
- The client is built once, on first use, with short timeouts; every error becomes
  :class:`NotifierError`.
"""

from __future__ import annotations

from typing import Any

from zerg.aws_clients import LazyClient
from zerg.notify.channels.notifier import mime_message
from zerg.ports import Email, NotifierError, SentEmail

TIMEOUT_S = 5.0


def ses_message_id(message_id: str, region: str) -> str:
    """The Message-ID header SES gives a message it accepted with ``MessageId``."""
    host = "email.amazonses.com" if region == "us-east-1" else f"{region}.amazonses.com"
    return f"<{message_id}@{host}>"


class SesEmail:
    def __init__(self, client: Any = None) -> None:
        self._client = LazyClient("sesv2", timeout_s=TIMEOUT_S, attempts=2, client=client)

    @property
    def client(self) -> Any:
        return self._client.get()

    def send_email(self, email: Email) -> SentEmail:
        from email.policy import SMTP

        from botocore.exceptions import BotoCoreError, ClientError

        raw = mime_message(email).as_bytes(policy=SMTP)  # CRLF line ends, as on the wire
        try:
            answer = self.client.send_email(
                FromEmailAddress=email.sender,
                Destination={"ToAddresses": [email.to]},
                Content={"Raw": {"Data": raw}},
            )
        except ClientError as exc:
            err = exc.response.get("Error", {})
            raise NotifierError(f"SES refused the email: {err.get('Code', '?')}: {err.get('Message', '')}"[:500]) from None
        except BotoCoreError as exc:
            raise NotifierError(f"SES unreachable: {exc}"[:500]) from None
        return SentEmail(provider_message_id=answer["MessageId"],
                         message_id=ses_message_id(answer["MessageId"], self.client.meta.region_name))
