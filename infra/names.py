"""Physical names of the resources a function is told about, and their ARNs built from the names.

Invariants:
- The messaging stack references the workflow stack, never the other way round. A workflow
  function that must know a messaging resource (the schedule group, the scheduler role, the
  schedule DLQ, the alert topic) is given an ARN built here from the name the messaging stack
  creates the resource with: no CloudFormation reference, so no cross-stack cycle.
- A function's environment never references its own ``Arn`` attribute, nor a state machine whose
  definition names that function (both CloudFormation circular dependencies): the ingress ARN
  schedules target and the escalation state machine's ARN are built from names too.
- Every name is ``zerg-{stage}-...`` (:meth:`StageConfig.prefix`), so stages share an account.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack

from infra.config import StageConfig

# What zerg.schedules names an owner's Scheduler schedule: ``zerg-s{id}`` in the schedule group.
SCHEDULE_NAME_PREFIX = "zerg-s"


# Where objects live in the artifacts bucket: the functions' worker artifacts
# (zerg.artifacts.s3: ``workers/{worker_id}/...``), and the raw inbound mail the SES receipt rule
# stores (``inbound/email/{messageId}``, read by zerg.inbound.email). Grants name these prefixes.
ARTIFACTS_PREFIX = "workers/"
INBOUND_EMAIL_PREFIX = "inbound/email/"


# Name suffixes (after ``zerg-{stage}-``) of the resources both stacks must agree on.
SCHEDULE_GROUP = "schedules"
SCHEDULER_ROLE = "scheduler"
SCHEDULE_DLQ = "schedule-dlq"
ALERT_TOPIC = "alerts"
INBOUND_SMS_TOPIC = "inbound-sms"
ESCALATION_MACHINE = "escalation"
RUN_MACHINE = "run"
INGRESS = "events"
INBOUND_RULE_SET = "inbound"  # the SES receipt rule set (its rules store mail, then invoke ingress)


class Arns:
    """ARNs in ``stack``'s account and region (tokens CloudFormation resolves at deploy)."""

    def __init__(self, stack: Stack, config: StageConfig) -> None:
        self.stack, self.config = stack, config

    def function(self, name: str) -> str:
        return self._colon("lambda", "function", self.config.prefix(name))

    def escalation_machine(self) -> str:
        return self._colon("states", "stateMachine", self.config.prefix(ESCALATION_MACHINE))

    def run_machine(self) -> str:
        return self._colon("states", "stateMachine", self.config.prefix(RUN_MACHINE))

    def escalation_executions(self) -> str:
        return self._colon("states", "execution", f"{self.config.prefix(ESCALATION_MACHINE)}:*")

    def schedules(self) -> str:
        """Every schedule Zerg may create: ``zerg-s*`` in the group, nothing else in the account."""
        return self.stack.format_arn(service="scheduler", resource="schedule",
                                     resource_name=f"{self.config.prefix(SCHEDULE_GROUP)}/{SCHEDULE_NAME_PREFIX}*")

    def schedule_group(self) -> str:
        return self.stack.format_arn(service="scheduler", resource="schedule-group",
                                     resource_name=self.config.prefix(SCHEDULE_GROUP))

    def scheduler_role(self) -> str:
        return self.stack.format_arn(service="iam", region="", resource="role", resource_name=self.config.prefix(SCHEDULER_ROLE))

    def schedule_dlq(self) -> str:
        return self.stack.format_arn(service="sqs", resource=self.config.prefix(SCHEDULE_DLQ))

    def alert_topic(self) -> str:
        return self.stack.format_arn(service="sns", resource=self.config.prefix(ALERT_TOPIC))

    def inbound_sms_topic(self) -> str:
        return self.stack.format_arn(service="sns", resource=self.config.prefix(INBOUND_SMS_TOPIC))

    def inbound_receipt_rules(self) -> str:
        """Every rule of Zerg's SES receipt rule set (the only ones that may invoke ingress)."""
        return self.stack.format_arn(service="ses", resource="receipt-rule-set",
                                     resource_name=f"{self.config.prefix(INBOUND_RULE_SET)}:receipt-rule/*",
                                     arn_format=ArnFormat.SLASH_RESOURCE_NAME)

    def mail_identity(self) -> str:
        return self.stack.format_arn(service="ses", resource="identity", resource_name=self.config.domain)

    def _colon(self, service: str, resource: str, name: str) -> str:
        return self.stack.format_arn(service=service, resource=resource, resource_name=name,
                                     arn_format=ArnFormat.COLON_RESOURCE_NAME)
