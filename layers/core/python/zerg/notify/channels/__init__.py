"""The channels email and SMS leave by: SES v2 and SNS on AWS, the outbox file locally (the port:
:class:`zerg.ports.Notifier`)."""
