"""SMS through Amazon SNS ``Publish`` to a phone number (E.164), and the operators' alert topic.

Invariants:
- Each part of :func:`zerg.notify.channels.notifier.split_sms` is one Publish, marked ``Transactional``
  (alerts and codes, not marketing), from ZERG_SMS_ORIGINATION when it is set; one message id
  per part comes back, in order.
- Clients are built once, on first use, with short timeouts; every error of a send becomes
  :class:`NotifierError`. The operators' topic is best effort: :func:`publish_alert` never raises.
"""

from __future__ import annotations

from typing import Any

from zerg import observability
from zerg.aws_clients import LazyClient
from zerg.notify.channels.notifier import split_sms
from zerg.ports import NotifierError, Sms

TIMEOUT_S = 5.0


class SnsSms:
    def __init__(self, origination: str | None = None, client: Any = None) -> None:
        self.origination = origination
        self._client = LazyClient("sns", timeout_s=TIMEOUT_S, attempts=2, client=client)

    @property
    def client(self) -> Any:
        return self._client.get()

    def attributes(self) -> dict[str, dict[str, str]]:
        attrs = {"AWS.SNS.SMS.SMSType": {"DataType": "String", "StringValue": "Transactional"}}
        if self.origination:
            key = "AWS.MM.SMS.OriginationNumber" if self.origination.startswith("+") else "AWS.SNS.SMS.SenderID"
            attrs[key] = {"DataType": "String", "StringValue": self.origination}
        return attrs

    def send_sms(self, sms: Sms) -> list[str]:
        from botocore.exceptions import BotoCoreError, ClientError

        ids = []
        for part in split_sms(sms.text):
            try:
                ids.append(self.client.publish(PhoneNumber=sms.to, Message=part,
                                               MessageAttributes=self.attributes())["MessageId"])
            except ClientError as exc:
                err = exc.response.get("Error", {})
                sent = f" after {len(ids)} part(s) went out" if ids else ""
                raise NotifierError(f"SNS refused the SMS{sent}: {err.get('Code', '?')}: {err.get('Message', '')}"[:500]) from None
            except BotoCoreError as exc:
                raise NotifierError(f"SNS unreachable: {exc}"[:500]) from None
        return ids


_topic_client = LazyClient("sns", timeout_s=TIMEOUT_S, attempts=2)


def publish_alert(topic_arn: str, text: str) -> None:
    """One short line to the operators' topic (ZERG_ALERT_TOPIC_ARN); a failure is logged, never raised."""
    try:
        _topic_client.get().publish(TopicArn=topic_arn, Subject="Zerg: a notification failed", Message=text[:1000])
    except Exception as exc:  # best effort: the notifications row already says what failed
        observability.logger().warning("cannot publish to the alert topic", extra={
            "topic": topic_arn, "reason": f"{type(exc).__name__}: {exc}"[:300]})
