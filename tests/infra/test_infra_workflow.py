"""Workflow stack: the functions, their settings and permissions, the layer, the migration and
the run state machine."""

from __future__ import annotations

import json
import re

from pathlib import Path

from aws_cdk.assertions import Match

ROOT = Path(__file__).resolve().parents[2]

FUNCTION_DIRS = sorted(p.name for p in (ROOT / "functions").iterdir()
                       if p.is_dir() and p.name != "__pycache__")
COMMON = {"ZERG_ARTIFACT_BACKEND", "ZERG_ARTIFACT_BUCKET", "ZERG_DB_SECRET_ARN",
          "ZERG_DB_PROXY_ENDPOINT", "ZERG_SUPERVISOR_MODEL", "ZERG_WORKER_MODEL",
          "ZERG_SUMMARY_MODEL", "ZERG_MAP_CONCURRENCY", "ZERG_MODEL_PROVIDER", "ZERG_BEDROCK_MODEL_IDS"}
SCHEDULES = {"ZERG_SCHEDULE_GROUP", "ZERG_SCHEDULER_ROLE_ARN", "ZERG_SCHEDULE_DLQ_ARN", "ZERG_SCHEDULE_TARGET_ARN"}
NOTIFIER = {"ZERG_NOTIFIER", "ZERG_SENDER_EMAIL", "ZERG_MAIL_DOMAIN", "ZERG_ALERT_TOPIC_ARN"}  # + ZERG_SMS_ORIGINATION if set
EXPECTED_ZERG_ENV = {
    # Bedrock (the default provider): no OpenAI key secret (tests/infra/test_infra_models.py)
    "supervisor": COMMON | SCHEDULES | NOTIFIER | {"ZERG_ESCALATION_STATE_MACHINE_ARN",
                                                   "ZERG_PUBLIC_URL", "ZERG_KMS_KEY_ID"},
    "worker": COMMON | NOTIFIER | {"ZERG_KMS_KEY_ID"},
    "summary": COMMON,
    "events": COMMON | SCHEDULES | NOTIFIER | {
        "ZERG_JWT_SECRET_ARN", "ZERG_STATE_MACHINE_ARN", "ZERG_KMS_KEY_ID",
        "ZERG_ARTIFACT_RETENTION_DAYS", "ZERG_ESCALATION_STATE_MACHINE_ARN", "ZERG_PUBLIC_URL"},
}


def test_one_function_per_functions_dir_on_python312_arm64_in_the_vpc(synth):
    assert FUNCTION_DIRS == ["events", "summary", "supervisor", "worker"]
    (layer_id,) = synth.resources("Workflow", "AWS::Lambda::LayerVersion")
    for name in FUNCTION_DIRS:
        _, fn = synth.function(name)
        props = fn["Properties"]
        assert props["Runtime"] == "python3.12"
        assert props["Architectures"] == ["arm64"]
        assert props["Handler"] == "handler.handler"
        assert props["Layers"] == [{"Ref": layer_id}]
        assert props["VpcConfig"]["SubnetIds"] and props["VpcConfig"]["SecurityGroupIds"]
        assert "TracingConfig" not in props  # X-Ray off unless the stage sets tracing=true
        assert props["Environment"]["Variables"]["POWERTOOLS_TRACE_DISABLED"] == "true"
        log_group = props["LoggingConfig"]["LogGroup"]["Ref"]
        assert synth.templates["Workflow"]["Resources"][log_group]["Properties"]["RetentionInDays"] == 30
        env = props["Environment"]["Variables"]
        assert env["POWERTOOLS_SERVICE_NAME"] == f"zerg-{name}"
        assert {"POWERTOOLS_METRICS_NAMESPACE", "POWERTOOLS_LOG_LEVEL"} <= set(env)


def test_each_function_gets_exactly_its_zerg_settings(synth):
    for name, expected in EXPECTED_ZERG_ENV.items():
        env = synth.function(name)[1]["Properties"]["Environment"]["Variables"]
        assert {k for k in env if k.startswith("ZERG_")} == expected, name
        assert env["ZERG_ARTIFACT_BACKEND"] == "s3"
        assert env["ZERG_MAP_CONCURRENCY"] == "7"  # from context, as a string


def test_layer_targets_python312_arm64(synth):
    synth.assertion("Workflow").has_resource_properties("AWS::Lambda::LayerVersion", {
        "CompatibleRuntimes": ["python3.12"], "CompatibleArchitectures": ["arm64"]})


def _statements_with(statements, action):
    return [s for s in statements if action in json.dumps(s["Action"])]


def test_state_machine_role_invokes_exactly_the_three_asl_functions(synth):
    _, machine = synth.state_machine("run")
    role_id = machine["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    invoke = _statements_with(synth.statements_of_role(role_id), "lambda:InvokeFunction")
    targets = {json.dumps(r) for s in invoke for r in s["Resource"]}
    functions = {re.search(r'"(\w+Function[0-9A-F]{8})"', t).group(1) for t in targets}
    assert functions == {synth.function(n)[0] for n in ("supervisor", "worker", "summary")}


def test_worker_cannot_read_the_jwt_secret_and_ingress_can(synth):
    def reads_jwt(role_id):
        return any("JwtSecret" in json.dumps(s["Resource"])
                   for s in _statements_with(synth.statements_of_role(role_id), "secretsmanager:GetSecretValue"))

    assert reads_jwt(synth.role_of("events"))
    for name in ("worker", "supervisor", "summary"):
        assert not reads_jwt(synth.role_of(name)), name


OWNER_SECRETS = {
    "Null": {"kms:EncryptionContext:zerg_owner_id": "false"},
    "ForAllValues:StringEquals": {"kms:EncryptionContextKeys": ["zerg_owner_id"]},
    "StringNotEquals": {"kms:EncryptionContext:zerg_owner_id": "deployment"},
}
DEPLOYMENT_SECRET = {
    "StringEquals": {"kms:EncryptionContext:zerg_owner_id": "deployment"},
    "ForAllValues:StringEquals": {"kms:EncryptionContextKeys": ["zerg_owner_id"]},
}


def _kms_uses(synth) -> dict[str, list[tuple[list[str], dict]]]:
    """function -> [(actions, conditions)] of its statements on the sealing key."""
    uses = {}
    for name in FUNCTION_DIRS:
        statements = [s for s in synth.statements_of_role(synth.role_of(name)) if "kms:" in json.dumps(s["Action"])]
        for statement in statements:
            assert "HostKeysKey" in json.dumps(statement["Resource"]), (name, statement)
        uses[name] = [([statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"],
                       statement["Condition"]) for statement in statements]
    return uses


def test_only_ingress_seals_and_only_the_worker_opens_host_keys_and_each_must_name_an_owner(synth):
    uses = _kms_uses(synth)
    owner_uses = {name: [actions for actions, condition in found if condition == OWNER_SECRETS]
                  for name, found in uses.items()}
    assert owner_uses == {"events": [["kms:Encrypt"]], "worker": [["kms:Decrypt"]], "supervisor": [], "summary": []}
    assert uses["summary"] == []
    for name in ("events", "worker", "supervisor"):
        env = synth.function(name)[1]["Properties"]["Environment"]["Variables"]
        assert "HostKeysKey" in json.dumps(env["ZERG_KMS_KEY_ID"])
    assert "ZERG_KMS_KEY_ID" not in synth.function("summary")[1]["Properties"]["Environment"]["Variables"]


def test_the_push_senders_seal_and_open_the_vapid_key_only_under_the_deployment_context(synth):
    uses = _kms_uses(synth)
    deployment_uses = {name: [actions for actions, condition in found if condition == DEPLOYMENT_SECRET]
                       for name, found in uses.items()}
    # Ingress makes the key on first use (GET /push/key) and signs pushes; so does the supervisor
    # (background results, escalation repeats). The worker cannot open it, nor they an SSH key.
    assert deployment_uses == {"events": [["kms:Encrypt", "kms:Decrypt"]],
                               "supervisor": [["kms:Encrypt", "kms:Decrypt"]], "worker": [], "summary": []}
    every_condition = [condition for found in uses.values() for _, condition in found]
    assert all(condition in (OWNER_SECRETS, DEPLOYMENT_SECRET) for condition in every_condition)


def test_the_deployment_context_is_the_one_zerg_sealing_uses(synth):
    from zerg.sealing import port

    from infra.stacks.workflow import DEPLOYMENT_CONTEXT_VALUE, OWNER_CONTEXT_KEY

    assert port.owner_context(7) == {OWNER_CONTEXT_KEY: "7"}
    assert port.DEPLOYMENT_CONTEXT == {OWNER_CONTEXT_KEY: DEPLOYMENT_CONTEXT_VALUE}


def test_only_ingress_starts_runs_and_only_the_supervisor_and_ingress_start_escalations(synth):
    starters = {}  # role -> what it may start
    for name in synth.templates:
        for res in synth.resources(name, "AWS::IAM::Policy").values():
            for statement in _statements_with(res["Properties"]["PolicyDocument"]["Statement"], "states:StartExecution"):
                for role in res["Properties"]["Roles"]:
                    starters.setdefault(json.dumps(role), []).append(statement["Resource"])
    run_id, _ = synth.state_machine("run")
    # by name: the machine's definition names the supervisor, so a Ref would be a cycle
    escalation = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":states:", {"Ref": "AWS::Region"}, ":",
                                    {"Ref": "AWS::AccountId"}, ":stateMachine:zerg-test-escalation"]]}
    assert starters == {
        # ingress closing a failed run's execution may find a critical answer (zerg.runs.execution_status)
        json.dumps({"Ref": synth.role_of("events")}): [{"Ref": run_id}, escalation],
        json.dumps({"Ref": synth.role_of("supervisor")}): [escalation],
    }


def test_only_ingress_and_the_worker_answer_the_run_machines_task_tokens(synth):
    """Issue 27: an approval's answer comes through the ingress (API, replies); the worker's
    await_approval answers at once when the answer came first. Nobody else, and only the run machine."""
    answerers = {}
    for name in synth.templates:
        for res in synth.resources(name, "AWS::IAM::Policy").values():
            statements = res["Properties"]["PolicyDocument"]["Statement"]
            for statement in _statements_with(statements, "states:SendTaskSuccess"):
                assert "states:SendTaskFailure" in statement["Action"]
                for role in res["Properties"]["Roles"]:
                    answerers.setdefault(json.dumps(role), []).append(statement["Resource"])
    run_id, _ = synth.state_machine("run")
    by_name = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":states:", {"Ref": "AWS::Region"}, ":",
                                 {"Ref": "AWS::AccountId"}, ":stateMachine:zerg-test-run"]]}
    assert answerers == {
        json.dumps({"Ref": synth.role_of("events")}): [{"Ref": run_id}],
        json.dumps({"Ref": synth.role_of("worker")}): [by_name],  # by name: the definition names the worker
    }


def test_synthesized_definition_is_the_repo_file_inline_with_substitutions(synth):
    source = (ROOT / "statemachines" / "run.asl.json").read_text()
    _, machine = synth.state_machine("run")
    props = machine["Properties"]
    assert props["DefinitionString"] == source  # inline (no S3 location): linters read it
    assert "DefinitionS3Location" not in props
    placeholders = set(re.findall(r"\$\{(\w+)\}", source))
    assert placeholders == {"SupervisorFunctionArn", "WorkerFunctionArn", "SummaryFunctionArn"}
    expected = {
        "SupervisorFunctionArn": synth.function("supervisor")[0],
        "WorkerFunctionArn": synth.function("worker")[0],
        "SummaryFunctionArn": synth.function("summary")[0],
    }
    assert props["DefinitionSubstitutions"] == {
        k: {"Fn::GetAtt": [v, "Arn"]} for k, v in expected.items()}
    assert props["StateMachineType"] == "STANDARD"
    assert props["LoggingConfiguration"]["Level"] == "ERROR"


def test_the_remember_step_invokes_the_supervisor_asynchronously_and_the_role_may(synth):
    _, machine = synth.state_machine("run")
    states = json.loads(machine["Properties"]["DefinitionString"])["States"]
    assert states["Finalize"]["Next"] == "Remember" and states["Remember"]["Next"] == "Succeeded"
    remember = states["Remember"]
    assert remember["Resource"] == "arn:aws:states:::lambda:invoke"
    assert remember["Parameters"]["FunctionName"] == "${SupervisorFunctionArn}"
    assert remember["Parameters"]["InvocationType"] == "Event"
    assert remember["Parameters"]["Payload"]["action"] == "remember"
    assert remember["ResultPath"] is None and "ResultSelector" not in remember  # an Event answer has no payload
    assert remember["Catch"] == [{"ErrorEquals": ["States.ALL"], "ResultPath": None, "Next": "Succeeded"}]
    role_id = machine["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    invoke = _statements_with(synth.statements_of_role(role_id), "lambda:InvokeFunction")
    assert synth.function("supervisor")[0] in json.dumps([s["Resource"] for s in invoke])


def test_migration_runs_on_deploy_before_functions_update(synth):
    template = synth.assertion("Workflow")
    template.has_resource_properties("Custom::ZergMigration", {
        "MigrationsHash": Match.string_like_regexp(r"^[0-9a-f]{64}$")})
    (migration_id,) = synth.resources("Workflow", "Custom::ZergMigration")
    for name in FUNCTION_DIRS:
        assert migration_id in synth.function(name)[1].get("DependsOn", [])
    _, migrator = synth.function("migrator")
    assert migrator["Properties"]["Handler"] == "handler.on_event"
    env = migrator["Properties"]["Environment"]["Variables"]
    assert {k for k in env if k.startswith("ZERG_")} == {"ZERG_DB_SECRET_ARN", "ZERG_DB_PROXY_ENDPOINT"}


def test_failed_timed_out_and_aborted_executions_reach_the_ingress(synth):
    machine_id, _ = synth.state_machine("run")
    ingress_id = synth.function("events")[0]
    (dlq_id,) = [k for k in synth.resources("Workflow", "AWS::SQS::Queue") if k.startswith("ExecutionStatusDlq")]
    template = synth.assertion("Workflow")
    template.has_resource_properties("AWS::Events::Rule", {
        "Name": "zerg-test-run-execution-ended",
        "State": "ENABLED",
        "EventPattern": {
            "source": ["aws.states"],
            "detail-type": ["Step Functions Execution Status Change"],
            "detail": {"status": ["FAILED", "TIMED_OUT", "ABORTED"], "stateMachineArn": [{"Ref": machine_id}]},
        },
        "Targets": [Match.object_like({
            "Arn": {"Fn::GetAtt": [ingress_id, "Arn"]},
            "DeadLetterConfig": {"Arn": {"Fn::GetAtt": [dlq_id, "Arn"]}},
            "RetryPolicy": {"MaximumRetryAttempts": 8, "MaximumEventAgeInSeconds": 21600},
        })],
    })
    (rule_id,) = [k for k, r in synth.resources("Workflow", "AWS::Events::Rule").items()
                  if r["Properties"]["Name"] == "zerg-test-run-execution-ended"]
    template.has_resource_properties("AWS::Lambda::Permission", {
        "Action": "lambda:InvokeFunction", "Principal": "events.amazonaws.com",
        "FunctionName": {"Fn::GetAtt": [ingress_id, "Arn"]},
        "SourceArn": {"Fn::GetAtt": [rule_id, "Arn"]},
    })
    dlq = synth.templates["Workflow"]["Resources"][dlq_id]["Properties"]
    assert dlq["SqsManagedSseEnabled"] is True and dlq["MessageRetentionPeriod"] == 14 * 24 * 3600


def test_failed_timed_out_and_aborted_escalation_executions_reach_the_ingress_too(synth):
    """An escalation that timed out or was aborted from outside never ran MarkFailed: only this
    event can tell ingress that its row is no longer repeating anything."""
    machine_id, _ = synth.state_machine("escalation")
    ingress_id = synth.function("events")[0]
    (dlq_id,) = [k for k in synth.resources("Workflow", "AWS::SQS::Queue") if k.startswith("ExecutionStatusDlq")]
    (rule_id, rule), = [(k, r["Properties"]) for k, r in synth.resources("Workflow", "AWS::Events::Rule").items()
                        if r["Properties"]["Name"] == "zerg-test-escalation-execution-ended"]
    assert rule["State"] == "ENABLED"
    assert rule["EventPattern"] == {
        "source": ["aws.states"],
        "detail-type": ["Step Functions Execution Status Change"],
        "detail": {"status": ["FAILED", "TIMED_OUT", "ABORTED"], "stateMachineArn": [{"Ref": machine_id}]},
    }
    (target,) = rule["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [ingress_id, "Arn"]}
    assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [dlq_id, "Arn"]}}  # the run rule's queue
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 8, "MaximumEventAgeInSeconds": 21600}
    synth.assertion("Workflow").has_resource_properties("AWS::Lambda::Permission", {
        "Action": "lambda:InvokeFunction", "Principal": "events.amazonaws.com",
        "FunctionName": {"Fn::GetAtt": [ingress_id, "Arn"]}, "SourceArn": {"Fn::GetAtt": [rule_id, "Arn"]}})


def test_ingress_changes_nothing_for_an_escalation_execution_until_its_handler_knows_escalations():
    """What the new rule delivers today: another state machine's execution, answered without a run closed."""
    from types import SimpleNamespace

    from zerg.runs.execution_status import on_execution_status

    escalation = "arn:aws:states:eu-west-1:123456789012:stateMachine:zerg-test-escalation"
    rt = SimpleNamespace(settings=SimpleNamespace(
        state_machine_arn="arn:aws:states:eu-west-1:123456789012:stateMachine:zerg-test-run"))
    for status in ("FAILED", "TIMED_OUT", "ABORTED"):
        out = on_execution_status(rt, {
            "source": "aws.states", "detail-type": "Step Functions Execution Status Change",
            "detail": {"executionArn": f"{escalation.replace(':stateMachine:', ':execution:')}:esc-7",
                       "stateMachineArn": escalation, "name": "esc-7", "status": status}})
        assert out["closed"] is False and out["reason"] == "another state machine's execution"


def test_the_state_machine_timeout_is_a_backstop_above_every_allowed_run_deadline(synth):
    from zerg.runs.deadline import BACKSTOP_GRACE_S, MAX_RUN_TIMEOUT_S

    _, machine = synth.state_machine("run")
    timeout = json.loads(machine["Properties"]["DefinitionString"])["TimeoutSeconds"]
    assert timeout > MAX_RUN_TIMEOUT_S + BACKSTOP_GRACE_S
