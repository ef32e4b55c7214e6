"""What the functions need for background runs: owners' schedules, notifications, escalations.

Invariants (the workflow stack's, kept here for the background settings):
- A function gets a setting exactly when its role has the permission that setting is for, and
  both are added together by one grant below: ``ZERG_SCHEDULE_*`` with managing ``zerg-s*``
  schedules in the group and passing the scheduler role to Scheduler; ``ZERG_NOTIFIER=aws``
  (with the sender, the mail domain and the optional SMS origination) with SES sending as the
  sender address only and SNS SMS; ``ZERG_ALERT_TOPIC_ARN`` with publishing to that topic;
  ``ZERG_ESCALATION_STATE_MACHINE_ARN`` with starting (supervisor, ingress) or stopping (ingress)
  its executions.
- Every ARN is built from a deterministic name (:mod:`infra.names`): the messaging stack owns
  those resources and references this stack, never the reverse.
- No function may publish to the inbound-SMS topic: ingress trusts what arrives there as an
  owner's reply, and SMS publishing cannot be scoped by resource (see ``_SMS``).
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_

from infra.config import StageConfig
from infra.names import INGRESS, SCHEDULE_GROUP, Arns

# Who does what in the background (functions/* directory names).
SCHEDULE_MANAGERS = ("events", "supervisor")  # the API and CLI; the supervisor's reminder tool
SENDERS = ("events", "supervisor", "worker")  # verification codes, digests, reminders, held SMS;
# alerts and send_email; the send_email / send_sms connectors
LINKERS = ("events", "supervisor")  # digests and alerts link to runs (not a permission: a URL)
# A critical result starts an escalation wherever a background run is closed: the supervisor's
# Finalize, and ingress closing a failed / timed-out / aborted run's execution
# (zerg.runs.execution_status -> zerg.alerts.background.on_run_end). An acknowledgement stops one.
ESCALATION_STARTERS, ESCALATION_STOPPER = ("supervisor", "events"), "events"
SCHEDULE_ACTIONS = ["scheduler:CreateSchedule", "scheduler:UpdateSchedule",
                    "scheduler:DeleteSchedule", "scheduler:GetSchedule"]
# SNS Publish to a phone number has no resource to name and no condition key for the number
# (sns:Endpoint / sns:Protocol apply to Subscribe only), so SMS needs Resource "*"; the deny keeps
# that "*" off the inbound-SMS topic. What limits SMS spend is the account's SMS spending limit.
_SMS = "*"


def grant_background(stack: Stack, config: StageConfig, functions: Mapping[str, lambda_.Function]) -> None:
    arns = Arns(stack, config)
    for name in SCHEDULE_MANAGERS:
        _grant(functions[name], _schedules(config, arns))
    for name in SENDERS:
        _grant(functions[name], _notifications(config, arns))
    for name in LINKERS:
        functions[name].add_environment("ZERG_PUBLIC_URL", config.links_base)
    machine = arns.escalation_machine()
    for name in ESCALATION_STARTERS:
        _grant(functions[name], ({"ZERG_ESCALATION_STATE_MACHINE_ARN": machine}, [
            iam.PolicyStatement(actions=["states:StartExecution"], resources=[machine])]))
    _grant(functions[ESCALATION_STOPPER], ({"ZERG_ESCALATION_STATE_MACHINE_ARN": machine}, [
        iam.PolicyStatement(actions=["states:StopExecution"], resources=[arns.escalation_executions()])]))


def _grant(function: lambda_.Function, grant: tuple[dict[str, str], list[iam.PolicyStatement]]) -> None:
    environment, statements = grant
    for key, value in environment.items():
        function.add_environment(key, value)
    for statement in statements:
        function.add_to_role_policy(statement)


def _schedules(config: StageConfig, arns: Arns) -> tuple[dict[str, str], list[iam.PolicyStatement]]:
    """Owners' schedules are Scheduler schedules ``zerg-s{id}`` in the group, targeting ingress with
    the scheduler role; the rows are the truth, so the functions writing rows keep Scheduler in step."""
    environment = {
        "ZERG_SCHEDULE_GROUP": config.prefix(SCHEDULE_GROUP),
        "ZERG_SCHEDULER_ROLE_ARN": arns.scheduler_role(),
        "ZERG_SCHEDULE_DLQ_ARN": arns.schedule_dlq(),
        # Ingress's own ARN by name: its environment referencing its Arn attribute would be a cycle.
        "ZERG_SCHEDULE_TARGET_ARN": arns.function(INGRESS),
    }
    return environment, [
        iam.PolicyStatement(actions=SCHEDULE_ACTIONS, resources=[arns.schedules()]),
        iam.PolicyStatement(
            actions=["iam:PassRole"],
            resources=[arns.scheduler_role()],
            conditions={"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
        ),
    ]


def _notifications(config: StageConfig, arns: Arns) -> tuple[dict[str, str], list[iam.PolicyStatement]]:
    """Email through SES v2 (its SendEmail is authorised as ses:SendEmail, and as ses:SendRawEmail
    for raw MIME content) from the sender address only; SMS through SNS Publish; failed deliveries
    reported to the alert topic."""
    environment = {
        "ZERG_NOTIFIER": "aws",
        "ZERG_SENDER_EMAIL": config.sender_email,
        "ZERG_MAIL_DOMAIN": config.domain,
        "ZERG_ALERT_TOPIC_ARN": arns.alert_topic(),
    }
    if config.sms_origination:
        environment["ZERG_SMS_ORIGINATION"] = config.sms_origination
    return environment, [
        iam.PolicyStatement(
            actions=["ses:SendEmail", "ses:SendRawEmail"],
            resources=[arns.mail_identity()],
            conditions={"StringEquals": {"ses:FromAddress": config.sender_email}},
        ),
        iam.PolicyStatement(actions=["sns:Publish"], resources=[_SMS]),
        iam.PolicyStatement(effect=iam.Effect.DENY, actions=["sns:Publish"], resources=[arns.inbound_sms_topic()]),
        # Covered by the SMS "*" today; stated on its own so the alert topic stays reachable
        # whatever becomes of the SMS grant.
        iam.PolicyStatement(actions=["sns:Publish"], resources=[arns.alert_topic()]),
    ]
