"""Messaging & schedules: alert and inbound-SMS topics, SES inbound mail, the scheduler group,
and the alarms that page the alert topic.

Invariants:
- Inbound mail is stored under ``inbound/email/`` before the ingress function is invoked with
  the SES notification, so the function always finds the message it is told about.
- Owners' schedules (created at run time by ingress and the supervisor, see
  ``infra.stacks.background``) target the ingress function only, which writes the run row and
  starts the execution; Scheduler assumes a role that may only invoke ingress and send to the
  schedule DLQ, and only for schedules of this account's Zerg group. A fire Scheduler cannot
  deliver lands in the DLQ, one ingress fails on lands in the workflow's ingress-failed queue;
  a message in either raises an alarm.
- This stack references the workflow stack, never the other way round: grants to workflow
  roles are policies owned here, and the SNS -> Lambda subscription and permission live here.
  Workflow functions know this stack's resources by their deterministic names (``infra.names``).
- Housekeeping: with ``artifact_retention_days`` set, a daily rule invokes ingress with
  ``{"trigger": "housekeeping", "task": "retention"}`` (undeliverable events land in the schedule
  DLQ, which alarms), and ingress may delete objects under ``workers/`` only; unset, neither exists.
  Another daily rule, always there, sends ``{"task": "memory-versions"}``: memory file versions are
  kept 30 days whatever the artifact retention (a database sweep; no S3 grant). A third,
  ``{"task": "memory-facts"}``, deletes organisational memories forgotten more than 30 days ago.
  A fourth, every 15 minutes, sends ``{"task": "embed"}``: memory files without a current vector
  get one (ingress reads the OpenAI key already; the sweep stops starting batches near the
  function's timeout). A fifth, every 5 minutes, sends ``{"task": "notifications"}``: SMS held
  for quiet hours go out once the hours end (ingress sends with the notifier grants it has). A
  sixth, every 5 minutes, sends ``{"task": "schedules"}``: fires left pending are completed (on AWS
  nothing else recovers them) and one-off schedules fired long ago are pruned, row and Scheduler
  schedule (ingress manages schedules already: ``infra.stacks.background.SCHEDULE_MANAGERS``). A
  seventh, every 5 minutes, sends ``{"task": "inbound"}``: replies an invocation stopped half way
  (a row still ``received``, a run row whose execution never started) are completed.
- Inbound mail: SES may write only under ``inbound/email/`` (the bucket policy, for this account
  only), and ingress may read only that part of ``inbound/`` (``infra.stacks.workflow``).
"""

from __future__ import annotations

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_ses as ses
from aws_cdk import aws_ses_actions as ses_actions
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.components.queues import dead_letter_queue
from infra.config import StageConfig
from infra.names import (
    ALERT_TOPIC,
    INBOUND_EMAIL_PREFIX,
    INBOUND_RULE_SET,
    INBOUND_SMS_TOPIC,
    SCHEDULE_DLQ,
    SCHEDULE_GROUP,
    SCHEDULER_ROLE,
)

# The ingress event of the daily retention sweep (zerg.handler_input.HousekeepingEvent).
HOUSEKEEPING_RETENTION = {"trigger": "housekeeping", "task": "retention"}
# The ingress event of the daily prune of memory file versions older than 30 days.
HOUSEKEEPING_MEMORY_VERSIONS = {"trigger": "housekeeping", "task": "memory-versions"}
# The ingress event of the daily prune of organisational memories forgotten more than 30 days ago.
HOUSEKEEPING_MEMORY_FACTS = {"trigger": "housekeeping", "task": "memory-facts"}
# The ingress event of the embedding sweep, and how often: a file written through the API (no run,
# so no Remember step) waits at most this long for its vector; full-text search finds it meanwhile.
HOUSEKEEPING_EMBED = {"trigger": "housekeeping", "task": "embed"}
EMBED_EVERY = Duration.minutes(15)
# The ingress event releasing SMS held in quiet hours, and how often: a held SMS goes out at most
# this long after the quiet hours end.
HOUSEKEEPING_NOTIFICATIONS = {"trigger": "housekeeping", "task": "notifications"}
NOTIFICATIONS_EVERY = Duration.minutes(5)
# The ingress event completing schedule fires left pending (a process stopped between writing the
# fire and starting its run) and pruning fired one-off schedules, and how often: a fire is
# recovered at most this long after it became stale.
HOUSEKEEPING_SCHEDULES = {"trigger": "housekeeping", "task": "schedules"}
SCHEDULES_EVERY = Duration.minutes(5)
# The ingress event completing replies left half done (a stopped invocation between the inbound row
# and its run), and how often: such a reply gets its run at most this long after it became stale.
HOUSEKEEPING_INBOUND = {"trigger": "housekeeping", "task": "inbound"}
INBOUND_EVERY = Duration.minutes(5)


class MessagingStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig,
                 bucket: s3.IBucket, state_machine: sfn.IStateMachine, escalation_machine: sfn.IStateMachine,
                 ingress: lambda_.Function, ingress_failures: sqs.IQueue, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        self.alert_topic = sns.Topic(self, "Alerts", topic_name=config.prefix(ALERT_TOPIC), enforce_ssl=True)
        if config.alert_email:
            self.alert_topic.add_subscription(subscriptions.EmailSubscription(config.alert_email))
        self._inbound_sms(ingress)
        self._email(bucket, ingress)
        self._schedules(ingress)
        self._housekeeping(bucket, ingress)
        self._alarms(state_machine, escalation_machine, ingress_failures)
        CfnOutput(self, "AlertTopicArn", value=self.alert_topic.topic_arn)
        CfnOutput(self, "InboundSmsTopicArn", value=self.inbound_sms_topic.topic_arn)

    def _inbound_sms(self, ingress: lambda_.Function) -> None:
        # Two-way SMS (AWS End User Messaging) publishes replies to this topic.
        self.inbound_sms_topic = sns.Topic(
            self, "InboundSms", topic_name=self.config.prefix(INBOUND_SMS_TOPIC), enforce_ssl=True
        )
        # Created here rather than with topic.add_subscription(LambdaSubscription(...)), which
        # would put both resources in the function's stack and make it depend on this one.
        sns.Subscription(
            self, "InboundSmsToIngress",
            topic=self.inbound_sms_topic,
            protocol=sns.SubscriptionProtocol.LAMBDA,
            endpoint=ingress.function_arn,
        )
        lambda_.CfnPermission(
            self, "InboundSmsInvokesIngress",
            action="lambda:InvokeFunction",
            function_name=ingress.function_arn,
            principal="sns.amazonaws.com",
            source_arn=self.inbound_sms_topic.topic_arn,
        )

    def _email(self, bucket: s3.IBucket, ingress: lambda_.Function) -> None:
        domain = self.config.domain
        # The identity Zerg sends from (the senders' grant: infra.stacks.background); DNS (DKIM,
        # MX for receiving) is set up outside the stack: the domain's zone may live anywhere.
        self.mail_identity = ses.EmailIdentity(self, "MailDomain", identity=ses.Identity.domain(domain))
        # The rule's Lambda action finds the permission the workflow stack gave SES (only for this
        # rule set: infra.stacks.workflow) and adds none of its own.
        self.rule_set = ses.ReceiptRuleSet(self, "InboundMail",
                                           receipt_rule_set_name=self.config.prefix(INBOUND_RULE_SET))
        self.rule_set.add_rule(
            "ToZerg",
            recipients=[domain],
            scan_enabled=True,
            tls_policy=ses.TlsPolicy.REQUIRE,
            actions=[
                ses_actions.S3(bucket=bucket, object_key_prefix=INBOUND_EMAIL_PREFIX),
                ses_actions.Lambda(function=ingress, invocation_type=ses_actions.LambdaInvocationType.EVENT),
            ],
        )

    def _schedules(self, ingress: lambda_.Function) -> None:
        self.schedule_dlq = dead_letter_queue(self, "ScheduleDlq", self.config, SCHEDULE_DLQ)
        self.schedule_group = scheduler.ScheduleGroup(
            self, "Schedules", schedule_group_name=self.config.prefix(SCHEDULE_GROUP)
        )
        self.scheduler_role = iam.Role(
            self, "SchedulerRole",
            role_name=self.config.prefix(SCHEDULER_ROLE),  # the functions pass it by this name
            description="Assumed by EventBridge Scheduler to deliver Zerg schedule fires to ingress",
            # Confused-deputy guard: only schedules in this account's Zerg group may assume it.
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": self.account},
                    "ArnEquals": {"aws:SourceArn": self.schedule_group.schedule_group_arn},
                },
            ),
        )
        # Schedules target ingress (it writes the run row, then starts the execution): invoking it
        # is the role's one job, and a fire it cannot deliver goes to the DLQ (SQS-managed
        # encryption: no key grant needed).
        self.scheduler_role.add_to_policy(iam.PolicyStatement(
            actions=["lambda:InvokeFunction"], resources=[ingress.function_arn],
        ))
        self.scheduler_role.add_to_policy(iam.PolicyStatement(
            actions=["sqs:SendMessage"], resources=[self.schedule_dlq.queue_arn],
        ))
        CfnOutput(self, "ScheduleGroupName", value=self.schedule_group.schedule_group_name)
        CfnOutput(self, "SchedulerRoleArn", value=self.scheduler_role.role_arn)
        CfnOutput(self, "ScheduleDlqArn", value=self.schedule_dlq.queue_arn)

    def _housekeeping(self, bucket: s3.IBucket, ingress: lambda_.Function) -> None:
        self.memory_versions_rule = self._daily(
            "MemoryVersionsPrune", "memory-versions-prune",
            "Daily: delete memory file versions replaced more than 30 days ago", ingress, HOUSEKEEPING_MEMORY_VERSIONS)
        self.memory_facts_rule = self._daily(
            "MemoryFactsPrune", "memory-facts-prune",
            "Daily: delete organisational memories forgotten more than 30 days ago", ingress, HOUSEKEEPING_MEMORY_FACTS)
        self.embed_rule = self._daily(
            "MemoryEmbedSweep", "memory-embed-sweep",
            "Every 15 minutes: embed memory files that have no current vector", ingress, HOUSEKEEPING_EMBED,
            every=EMBED_EVERY, max_age=EMBED_EVERY)
        self.notifications_rule = self._daily(
            "NotificationsRelease", "notifications-release",
            "Every 5 minutes: send the SMS held for quiet hours that have ended", ingress, HOUSEKEEPING_NOTIFICATIONS,
            every=NOTIFICATIONS_EVERY, max_age=NOTIFICATIONS_EVERY)
        self.schedules_rule = self._daily(
            "SchedulesSweep", "schedules-sweep",
            "Every 5 minutes: complete schedule fires left pending; prune one-off schedules fired long ago",
            ingress, HOUSEKEEPING_SCHEDULES, every=SCHEDULES_EVERY, max_age=SCHEDULES_EVERY)
        self.inbound_rule = self._daily(
            "InboundSweep", "inbound-sweep",
            "Every 5 minutes: complete replies left half done (an inbound row without its run, a run never started)",
            ingress, HOUSEKEEPING_INBOUND, every=INBOUND_EVERY, max_age=INBOUND_EVERY)
        if not self.config.artifact_retention_days:
            return
        self.retention_rule = self._daily(
            "RetentionSweep", "retention-sweep", "Daily: delete workers older than the artifact retention that nothing pins",
            ingress, HOUSEKEEPING_RETENTION)
        iam.Policy(
            self, "IngressExpiresArtifacts",
            roles=[ingress.role],
            statements=[iam.PolicyStatement(
                actions=["s3:DeleteObject", "s3:DeleteObjectVersion"],
                resources=[bucket.arn_for_objects("workers/*")],
            )],
        )

    def _daily(self, construct_id: str, name: str, description: str, ingress: lambda_.Function,
               event: dict[str, str], *, every: Duration | None = None, max_age: Duration | None = None) -> events.Rule:
        """A rule invoking ingress with a housekeeping ``event``, daily unless ``every`` says otherwise
        (failed deliveries: the schedule DLQ; an event older than ``max_age`` is dropped there)."""
        return events.Rule(
            self, construct_id,
            rule_name=self.config.prefix(name),
            description=description,
            schedule=events.Schedule.rate(every or Duration.days(1)),
            targets=[targets.LambdaFunction(
                ingress,
                event=events.RuleTargetInput.from_object(event),
                dead_letter_queue=self.schedule_dlq,
                retry_attempts=2,
                max_event_age=max_age or Duration.hours(6),
            )],
        )

    def _alarms(self, state_machine: sfn.IStateMachine, escalation_machine: sfn.IStateMachine,
                ingress_failures: sqs.IQueue) -> None:
        action = cw_actions.SnsAction(self.alert_topic)
        five = Duration.minutes(5)
        metrics = {
            "RunsFailed": state_machine.metric_failed(period=five, statistic="Sum"),
            "RunsTimedOut": state_machine.metric_timed_out(period=five, statistic="Sum"),
            "ScheduleDeliveriesFailed": self.schedule_dlq.metric_approximate_number_of_messages_visible(
                period=five, statistic="Maximum"),
            # A failed escalation stops repeating a critical alert nobody acknowledged.
            "EscalationsFailed": escalation_machine.metric_failed(period=five, statistic="Sum"),
            "IngressEventsFailed": ingress_failures.metric_approximate_number_of_messages_visible(
                period=five, statistic="Maximum"),
        }
        for name, metric in metrics.items():
            alarm = metric.create_alarm(
                self, name,
                alarm_name=self.config.prefix(name),
                threshold=1,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            alarm.add_alarm_action(action)
