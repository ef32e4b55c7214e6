"""Workflow: the core layer, one Lambda per ``functions/*`` dir, the schema migration, the run
and escalation state machines.

Invariants:
- Every function gets exactly the ZERG_* settings it has permissions for: a secret's ARN is in
  a function's environment if and only if its role may read that secret. The OpenAI key's secret
  only when a model is OpenAI's, Anthropic's only when one is Anthropic's; with Bedrock (the default) the role may ``bedrock:InvokeModel`` the
  configured model ids (``ZERG_BEDROCK_MODEL_IDS``) and no other model. The worker (and every
  function but ingress) can neither read the JWT secret nor start a run's execution.
- The host-keys KMS key (the sealing key), owners' secrets: ingress may only Encrypt (the API seals
  an owner's SSH key), the worker may only Decrypt (``ssh_exec`` opens it); both only with a
  ``zerg_owner_id`` encryption context that names an owner (never ``deployment``).
  The deployment's own secret (the Web Push VAPID private key, sealed with
  ``zerg_owner_id=deployment``): the push senders, ingress and the supervisor, may Encrypt (the
  first to need it generates it) and Decrypt (signing a push) only with exactly that context, so
  neither can open an owner's SSH key, and the worker cannot open the VAPID key.
  ``ZERG_KMS_KEY_ID`` is set exactly on the functions that may use the key.
  The background settings (schedules, notifications, escalation) follow the same rule:
  :mod:`infra.stacks.background`.
- Each state machine is its ``statemachines/*.asl.json`` verbatim, inline in the template, with
  ``${...}Arn`` substituted by CloudFormation; its role may invoke exactly the functions the
  definition names (run: supervisor, worker, summary; escalation: supervisor only).
- Migrations run on deploy, after the database exists and before new function code goes live.
- An execution of the run state machine that ends FAILED, TIMED_OUT or ABORTED reaches the ingress
  function (an EventBridge rule on that state machine only), which closes its run
  (``zerg.runs.execution_status``); a delivery that keeps failing lands in a queue. An escalation
  execution ending so reaches ingress the same way (a second rule, the same queue): one that timed
  out or was aborted from outside never ran MarkFailed, and its row stays ``running`` until an
  acknowledgement unless ingress ends it on this event. (Until the handler knows escalations it
  answers "another state machine's execution" and changes nothing.)
- In the artifacts bucket, the supervisor, worker and summary functions read and write
  ``workers/*`` only; ingress reads ``workers/*`` (it serves artifacts) and ``inbound/email/*``
  (the raw mail SES stored), and nothing else under ``inbound/``. SES may invoke ingress only for
  the rules of Zerg's receipt rule set.
- An asynchronous invocation of ingress that still fails after Lambda's two retries (a schedule
  fire, a housekeeping task, inbound mail or SMS) lands in ``zerg-{stage}-ingress-failed``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path

from aws_cdk import Aws, CfnOutput, CustomResource, Duration, RemovalPolicy, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import custom_resources as cr
from constructs import Construct

from infra.components.function import FunctionSpec, ZergFunction, retention
from infra.components.layer import CoreLayer
from infra.components.queues import dead_letter_queue
from infra.config import StageConfig
from infra.names import ARTIFACTS_PREFIX, ESCALATION_MACHINE, INBOUND_EMAIL_PREFIX, Arns
from infra.stacks.background import grant_background
from infra.stacks.data import DataStack

ROOT = Path(__file__).resolve().parents[2]
ASL_PATH = ROOT / "statemachines" / "run.asl.json"
ESCALATION_ASL_PATH = ROOT / "statemachines" / "escalation.asl.json"
MIGRATIONS_DIR = ROOT / "layers" / "core" / "python" / "zerg" / "migrations"
_PLACEHOLDER = re.compile(r"\$\{(\w+)\}")
# Bedrock's geographic inference profiles (zerg.llm.pricing.GEO_PREFIXES): ``us.amazon.nova-pro-v1:0``.
BEDROCK_GEO_PREFIXES = ("us", "eu", "apac", "jp", "au", "ca", "us-gov", "global")
# The encryption context key zerg.sealing binds every sealed secret to (zerg/sealing/port.py), and
# the value it takes for the deployment's own secrets (port.DEPLOYMENT_CONTEXT) instead of an owner id.
OWNER_CONTEXT_KEY = "zerg_owner_id"
DEPLOYMENT_CONTEXT_VALUE = "deployment"
# Who uses the sealing key for what (functions/* directory names).
OWNER_SECRET_SEALERS, OWNER_SECRET_OPENERS = ("events",), ("worker",)  # SSH keys: the API; ssh_exec
PUSH_SENDERS = ("events", "supervisor")  # VAPID key: the API (key, test push, closing runs, held
# notifications) and the supervisor (background results, escalation repeats)


def function_specs() -> dict[str, FunctionSpec]:
    fn = ROOT / "functions"
    return {
        spec.name: spec
        for spec in (
            FunctionSpec("supervisor", fn / "supervisor", "Plan / resume / finalize a run",
                         Duration.minutes(15)),
            FunctionSpec("worker", fn / "worker", "One worker job: the tool-calling loop",
                         Duration.minutes(15)),
            FunctionSpec("summary", fn / "summary", "150-character summary of one worker result",
                         Duration.minutes(2), memory_mb=512),
            # API Gateway gives up after 30 s; the events long-poll ends before that.
            FunctionSpec("events", fn / "events",
                         "Ingress: HTTP API, inbound mail/SMS, schedule ticks",
                         Duration.seconds(29)),
        )
    }


def retention_environment(config: StageConfig) -> dict[str, str]:
    """Ingress runs the retention sweep: it is told the retention only when the stage sets one."""
    days = config.artifact_retention_days
    return {"ZERG_ARTIFACT_RETENTION_DAYS": str(days)} if days else {}


def migrations_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted(MIGRATIONS_DIR.glob("*.sql")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


class WorkflowStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig,
                 data: DataStack, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        self.data = data
        self.layer = CoreLayer(self, "Core", description="Zerg core library + runtime dependencies").layer
        self.functions = {name: self._function(spec) for name, spec in function_specs().items()}
        self._grant_data_access()
        self._grant_host_keys()
        migration = self._migration()
        for function in self.functions.values():
            function.node.add_dependency(migration)
        self.state_machine = self._state_machine()
        self.escalation_machine = self._escalation_machine()
        self.execution_status_dlq = dead_letter_queue(self, "ExecutionStatusDlq", self.config, "execution-status-dlq")
        self.execution_status_rule = self._execution_ended_rule(
            "RunExecutionEnded", "run-execution-ended", self.state_machine,
            "A run's execution failed, timed out or was aborted: the ingress closes the run")
        self.escalation_status_rule = self._execution_ended_rule(
            "EscalationExecutionEnded", "escalation-execution-ended", self.escalation_machine,
            "An escalation's execution failed, timed out or was aborted: the ingress ends its escalation")
        self.state_machine.grant_start_execution(self.ingress)
        # Issue 27: an approval's answer (the API, a reply: the ingress) and a waiting run's own steps
        # (the worker's await_approval answers at once when the answer came first) answer task tokens.
        self.state_machine.grant_task_response(self.ingress)
        self.functions["worker"].add_to_role_policy(iam.PolicyStatement(  # by name: the machine names the worker
            actions=["states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat"],
            resources=[Arns(self, config).run_machine()]))
        self.ingress.add_environment("ZERG_STATE_MACHINE_ARN", self.state_machine.state_machine_arn)
        self.ingress_failures = self._ingress_failures()
        grant_background(self, config, self.functions)
        CfnOutput(self, "StateMachineArn", value=self.state_machine.state_machine_arn)
        CfnOutput(self, "EscalationStateMachineArn", value=self.escalation_machine.state_machine_arn)

    @property
    def ingress(self) -> lambda_.Function:
        return self.functions["events"]

    def _common_environment(self) -> dict[str, str]:
        data, config = self.data, self.config
        return {
            "ZERG_ARTIFACT_BACKEND": "s3",
            "ZERG_ARTIFACT_BUCKET": data.bucket.bucket_name,
            "ZERG_DB_SECRET_ARN": data.db_secret.secret_arn,
            "ZERG_DB_PROXY_ENDPOINT": data.proxy.endpoint,
            **{var: model for var, model in config.models().items() if var != "ZERG_INTENT_MODEL"},
            "ZERG_MODEL_PROVIDER": config.model_provider,
            **({"ZERG_BEDROCK_MODEL_IDS": ",".join(ids)} if (ids := config.bedrock_model_ids()) else {}),
            "ZERG_MAP_CONCURRENCY": str(config.map_concurrency),
        }

    def _function(self, spec: FunctionSpec, environment: dict[str, str] | None = None) -> lambda_.Function:
        env = self._common_environment() if environment is None else environment
        construct = ZergFunction(
            self, spec.name.capitalize(),
            spec=dataclasses.replace(spec, environment={**env, **spec.environment}),
            config=self.config,
            layer=self.layer,
            vpc=self.data.vpc,
            security_group=self.data.functions_sg,
        )
        return construct.function

    def _grant_data_access(self) -> None:
        data, fns = self.data, self.functions
        for function in fns.values():
            data.db_secret.grant_read(function)
        for name in ("supervisor", "worker", "summary"):
            data.bucket.grant_read_write(fns[name], f"{ARTIFACTS_PREFIX}*")
        # The model: every function calls one (ingress: intent, quick answers, memory; and it embeds search
        # queries, so the API's search is hybrid like the supervisor's recall). OpenAI's key only when a
        # model is OpenAI's; Bedrock: bedrock:InvokeModel on the configured model ids and nothing else.
        bedrock = self._bedrock_statement()
        for name in ("supervisor", "worker", "summary", "events"):
            if self.config.uses_openai:
                data.openai_secret.grant_read(fns[name])
                fns[name].add_environment("ZERG_OPENAI_SECRET_ARN", data.openai_secret.secret_arn)
            if data.anthropic_secret is not None:
                data.anthropic_secret.grant_read(fns[name])
                fns[name].add_environment("ZERG_ANTHROPIC_SECRET_ARN", data.anthropic_secret.secret_arn)
            if bedrock is not None:
                fns[name].add_to_role_policy(bedrock)
        # Ingress reads inbound mail and serves artifacts; it never writes worker evidence.
        data.bucket.grant_read(self.ingress, f"{ARTIFACTS_PREFIX}*")
        # The raw inbound mail SES stored (zerg.inbound.email.from_ses_record: HeadObject, then
        # GetObject), and nothing else under inbound/.
        self.ingress.add_to_role_policy(iam.PolicyStatement(
            actions=["s3:GetObject"], resources=[data.bucket.arn_for_objects(f"{INBOUND_EMAIL_PREFIX}*")]))
        # SES invokes ingress for Zerg's receipt rules only. Named "AllowSes", the permission the
        # rule's Lambda action would add (for any rule of the account) is not added again.
        self.ingress.add_permission(
            "AllowSes", principal=iam.ServicePrincipal("ses.amazonaws.com"), action="lambda:InvokeFunction",
            source_account=self.account, source_arn=Arns(self, self.config).inbound_receipt_rules())
        data.jwt_secret.grant_read(self.ingress)
        self.ingress.add_environment("ZERG_JWT_SECRET_ARN", data.jwt_secret.secret_arn)
        for key, value in retention_environment(self.config).items():  # its sweep's delete grant: Messaging
            self.ingress.add_environment(key, value)

    def _bedrock_statement(self) -> iam.PolicyStatement | None:
        """bedrock:InvokeModel (which Converse needs) on exactly the configured Bedrock models: a foundation
        model in this region, or a geographic inference profile (``us.…``) and the foundation model in the
        regions it routes to."""
        resources = []
        for model_id in self.config.bedrock_model_ids():
            geo, _, base = model_id.partition(".")
            if geo in BEDROCK_GEO_PREFIXES:
                resources.append(f"arn:{Aws.PARTITION}:bedrock:{Aws.REGION}:{Aws.ACCOUNT_ID}:inference-profile/{model_id}")
                resources.append(f"arn:{Aws.PARTITION}:bedrock:*::foundation-model/{base}")
            else:
                resources.append(f"arn:{Aws.PARTITION}:bedrock:{Aws.REGION}::foundation-model/{model_id}")
        if not resources:
            return None
        return iam.PolicyStatement(actions=["bedrock:InvokeModel"], resources=resources)

    def _grant_host_keys(self) -> None:
        key = self.data.host_keys_key
        context = f"kms:EncryptionContext:{OWNER_CONTEXT_KEY}"
        only_that_key = {"kms:EncryptionContextKeys": [OWNER_CONTEXT_KEY]}
        owner_secrets = {
            "Null": {context: "false"},
            "ForAllValues:StringEquals": only_that_key,
            "StringNotEquals": {context: DEPLOYMENT_CONTEXT_VALUE},
        }
        deployment_secret = {
            "StringEquals": {context: DEPLOYMENT_CONTEXT_VALUE},
            "ForAllValues:StringEquals": only_that_key,
        }
        grants = [(name, ["kms:Encrypt"], owner_secrets) for name in OWNER_SECRET_SEALERS]
        grants += [(name, ["kms:Decrypt"], owner_secrets) for name in OWNER_SECRET_OPENERS]
        grants += [(name, ["kms:Encrypt", "kms:Decrypt"], deployment_secret) for name in PUSH_SENDERS]
        for name, actions, conditions in grants:
            function = self.functions[name]
            function.add_to_role_policy(iam.PolicyStatement(
                actions=actions, resources=[key.key_arn], conditions=conditions))
            function.add_environment("ZERG_KMS_KEY_ID", key.key_arn)

    def _migration(self) -> CustomResource:
        spec = FunctionSpec(
            "migrator", ROOT / "infra" / "migrator", "Applies zerg migrations on deploy",
            Duration.minutes(5), memory_mb=512, handler="handler.on_event",
        )
        migrator = self._function(spec, environment={
            "ZERG_DB_SECRET_ARN": self.data.db_secret.secret_arn,
            "ZERG_DB_PROXY_ENDPOINT": self.data.proxy.endpoint,
        })
        self.data.db_secret.grant_read(migrator)
        provider = cr.Provider(
            self, "MigrationProvider",
            on_event_handler=migrator,
            log_group=logs.LogGroup(self, "MigrationProviderLogs", retention=retention(self.config),
                                    removal_policy=RemovalPolicy.DESTROY),
        )
        return CustomResource(
            self, "Migration",
            service_token=provider.service_token,
            resource_type="Custom::ZergMigration",
            # A changed migration set changes the properties, which re-runs the migrator.
            properties={"MigrationsHash": migrations_hash()},
        )

    def _ingress_failures(self) -> sqs.Queue:
        """Every asynchronous invocation of ingress (schedule fires, housekeeping, inbound mail and
        SMS, execution status) that still fails after Lambda's retries lands here (the messaging
        stack alarms on it). The schedule DLQ only sees events Scheduler could not hand over."""
        queue = dead_letter_queue(self, "IngressFailedEvents", self.config, "ingress-failed")
        self.ingress.configure_async_invoke(
            on_failure=destinations.SqsDestination(queue),
            retry_attempts=2,
            max_event_age=Duration.hours(6),
        )
        return queue

    def _execution_ended_rule(self, construct_id: str, name: str, machine: sfn.StateMachine,
                              description: str) -> events.Rule:
        """FAILED / TIMED_OUT / ABORTED executions of ``machine`` -> ingress, which tells the machines
        apart by ``stateMachineArn`` (the backstop for what an execution could not record itself)."""
        return events.Rule(
            self, construct_id,
            rule_name=self.config.prefix(name),
            description=description,
            event_pattern=events.EventPattern(
                source=["aws.states"],
                detail_type=["Step Functions Execution Status Change"],
                detail={"status": ["FAILED", "TIMED_OUT", "ABORTED"],
                        "stateMachineArn": [machine.state_machine_arn]},
            ),
            targets=[targets.LambdaFunction(
                self.ingress,
                retry_attempts=8,
                max_event_age=Duration.hours(6),
                dead_letter_queue=self.execution_status_dlq,
            )],
        )

    def _state_machine(self) -> sfn.StateMachine:
        return self._machine("Run", "run", ASL_PATH, {
            "SupervisorFunctionArn": self.functions["supervisor"],
            "WorkerFunctionArn": self.functions["worker"],
            "SummaryFunctionArn": self.functions["summary"],
        })

    def _escalation_machine(self) -> sfn.StateMachine:
        """Repeats a critical alert until acknowledged: Wait, then the supervisor's ``escalate`` action."""
        return self._machine("Escalation", ESCALATION_MACHINE, ESCALATION_ASL_PATH,
                             {"SupervisorFunctionArn": self.functions["supervisor"]})

    def _machine(self, construct_id: str, name: str, path: Path,
                 targets: dict[str, lambda_.Function]) -> sfn.StateMachine:
        """A standard state machine from a repo ASL file, inline, ``${...}`` substituted with the
        ``targets``' ARNs; its role may invoke exactly those functions."""
        definition = path.read_text()
        json.loads(definition)  # a broken file fails the synth, not the deploy
        missing = set(_PLACEHOLDER.findall(definition)) ^ set(targets)
        if missing:
            raise ValueError(f"{path.name}: placeholders and substitutions differ: {sorted(missing)}")
        machine = sfn.StateMachine(
            self, construct_id,
            state_machine_name=self.config.prefix(name),
            state_machine_type=sfn.StateMachineType.STANDARD,
            definition_body=sfn.DefinitionBody.from_string(definition),
            definition_substitutions={k: fn.function_arn for k, fn in targets.items()},
            tracing_enabled=self.config.xray,
            logs=sfn.LogOptions(
                destination=logs.LogGroup(self, f"{construct_id}Logs", retention=retention(self.config),
                                          removal_policy=RemovalPolicy.DESTROY),
                level=sfn.LogLevel.ERROR,
                include_execution_data=False,
            ),
        )
        for function in targets.values():
            function.grant_invoke(machine)
        return machine
