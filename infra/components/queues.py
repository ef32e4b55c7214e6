"""Dead-letter queues: every Zerg DLQ is built the same way (14 days, SQS-managed encryption, TLS only)."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import StageConfig


def dead_letter_queue(scope: Construct, construct_id: str, config: StageConfig, name: str) -> sqs.Queue:
    """A DLQ named ``{prefix}-{name}`` for events a target could not take."""
    return sqs.Queue(
        scope, construct_id,
        queue_name=config.prefix(name),
        retention_period=Duration.days(14),
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
    )
