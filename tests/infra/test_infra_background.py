"""Background runs on AWS: the escalation state machine, the role Scheduler assumes, and what each
function is told and allowed for schedules, notifications and escalations (infra/stacks/background.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = ("events", "supervisor", "worker", "summary", "migrator")


def _actions(statement: dict) -> list[str]:
    return [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]


def _resources(statement: dict) -> list:
    return statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]


def _allowed(synth, short: str, action: str) -> list:
    """The resources (resolved where they are built from names) ``short``'s role is allowed ``action`` on."""
    return [synth.resolve(r) for s in synth.statements_of_role(synth.role_of(short))
            if s["Effect"] == "Allow" and action in _actions(s) for r in _resources(s)]


def _env(synth, short: str) -> dict:
    return synth.function(short)[1]["Properties"]["Environment"]["Variables"]


def _arn(synth, service: str, rest: str) -> str:
    """What ``Stack.format_arn`` makes in the account and region ``synth.resolve`` assumes."""
    return f"arn:aws:{service}:{synth.region}:{synth.account}:{rest}"


def _messaging(synth, cfn_type: str, prefix: str) -> tuple[str, dict]:
    (found,) = [(k, r["Properties"]) for k, r in synth.resources("Messaging", cfn_type).items() if k.startswith(prefix)]
    return found


# --- the escalation state machine -------------------------------------------------------------

def test_the_escalation_machine_is_the_repo_file_inline_and_may_invoke_only_the_supervisor(synth):
    source = (ROOT / "statemachines" / "escalation.asl.json").read_text()
    _, machine = synth.state_machine("escalation")
    props = machine["Properties"]
    assert props["DefinitionString"] == source and "DefinitionS3Location" not in props
    assert set(re.findall(r"\$\{(\w+)\}", source)) == {"SupervisorFunctionArn"}
    supervisor_id = synth.function("supervisor")[0]
    assert props["DefinitionSubstitutions"] == {"SupervisorFunctionArn": {"Fn::GetAtt": [supervisor_id, "Arn"]}}
    assert props["StateMachineType"] == "STANDARD"  # Waits of up to a day: an express machine lasts 5 minutes
    assert props["LoggingConfiguration"]["Level"] == "ERROR"
    assert props["LoggingConfiguration"]["IncludeExecutionData"] is False
    # Its states are the definition's: wait, repeat through the supervisor, loop until done.
    definition = json.loads(props["DefinitionString"])
    states = definition["States"]
    assert states[definition["StartAt"]]["Type"] == "Wait" and "SecondsPath" in states[definition["StartAt"]]
    tasks = {name: s for name, s in states.items() if s["Type"] == "Task"}
    assert {t["Parameters"]["FunctionName"] for t in tasks.values()} == {"${SupervisorFunctionArn}"}
    assert "escalate" in {t["Parameters"]["Payload"]["action"] for t in tasks.values()}
    assert any(s["Type"] == "Choice" for s in states.values())
    # Its role: invoke the supervisor (and its versions), plus the log delivery every logged machine needs.
    role_id = props["RoleArn"]["Fn::GetAtt"][0]
    statements = synth.statements_of_role(role_id)
    invoke = [r for s in statements if "lambda:InvokeFunction" in _actions(s) for r in _resources(s)]
    assert invoke == [{"Fn::GetAtt": [supervisor_id, "Arn"]},
                      {"Fn::Join": ["", [{"Fn::GetAtt": [supervisor_id, "Arn"]}, ":*"]]}]
    assert {a for s in statements for a in _actions(s)} - {"lambda:InvokeFunction"} <= {
        "logs:CreateLogDelivery", "logs:GetLogDelivery", "logs:UpdateLogDelivery", "logs:DeleteLogDelivery",
        "logs:ListLogDeliveries", "logs:PutResourcePolicy", "logs:DescribeResourcePolicies", "logs:DescribeLogGroups"}
    assert "EscalationStateMachineArn" in synth.templates["Workflow"]["Outputs"]


def test_the_supervisor_and_ingress_start_escalations_ingress_stops_them_and_each_is_told_the_machine(synth):
    machine = _arn(synth, "states", "stateMachine:zerg-test-escalation")
    assert synth.state_machine("escalation")[1]["Properties"]["StateMachineName"] == "zerg-test-escalation"
    # Both close background runs, so both may raise a critical: the supervisor's Finalize, and ingress
    # closing a run whose execution failed, timed out or was aborted (zerg.runs.execution_status).
    assert _allowed(synth, "supervisor", "states:StartExecution") == [machine]
    assert machine in _allowed(synth, "events", "states:StartExecution")  # beside the run machine
    assert _allowed(synth, "supervisor", "states:StopExecution") == []
    # Executions are named esc-{escalation_id}; ingress stops one when its alert is acknowledged.
    assert _allowed(synth, "events", "states:StopExecution") == [_arn(synth, "states", "execution:zerg-test-escalation:*")]
    for name in ("supervisor", "events"):
        assert synth.resolve(_env(synth, name)["ZERG_ESCALATION_STATE_MACHINE_ARN"]) == machine
    for name in ("worker", "summary"):
        assert _allowed(synth, name, "states:StopExecution") == _allowed(synth, name, "states:StartExecution") == []


# --- schedules -------------------------------------------------------------------------------

def test_scheduler_assumes_its_role_only_for_schedules_of_the_zerg_group_in_this_account(synth):
    _, role = _messaging(synth, "AWS::IAM::Role", "SchedulerRole")
    group_id, _ = _messaging(synth, "AWS::Scheduler::ScheduleGroup", "Schedules")
    assert role["RoleName"] == "zerg-test-scheduler"
    assert role["AssumeRolePolicyDocument"]["Statement"] == [{
        "Action": "sts:AssumeRole",
        "Effect": "Allow",
        "Principal": {"Service": "scheduler.amazonaws.com"},
        "Condition": {  # the confused-deputy guard
            "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
            "ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": [group_id, "Arn"]}},
        },
    }]
    assert "ManagedPolicyArns" not in role and "Policies" not in role


def test_the_scheduler_role_may_only_invoke_ingress_and_send_to_the_schedule_dlq(synth):
    role_id, _ = _messaging(synth, "AWS::IAM::Role", "SchedulerRole")
    dlq_id, _ = _messaging(synth, "AWS::SQS::Queue", "ScheduleDlq")
    statements = [s for p in synth.resources("Messaging", "AWS::IAM::Policy").values()
                  if {"Ref": role_id} in p["Properties"]["Roles"] for s in p["Properties"]["PolicyDocument"]["Statement"]]
    assert [(s["Effect"], _actions(s)) for s in statements] == [
        ("Allow", ["lambda:InvokeFunction"]), ("Allow", ["sqs:SendMessage"])]
    (invoke, send) = statements
    # ingress itself, unqualified (the export of its Arn attribute): no other function, no version
    assert set(invoke["Resource"]) == {"Fn::ImportValue"}
    assert re.fullmatch(rf"Zerg-test-Workflow:ExportsOutputFnGetAtt{synth.function('events')[0]}Arn[0-9A-F]{{8}}",
                        invoke["Resource"]["Fn::ImportValue"])
    assert send["Resource"] == {"Fn::GetAtt": [dlq_id, "Arn"]}


def test_the_functions_writing_schedules_are_told_the_resources_the_messaging_stack_creates(synth):
    _, group = _messaging(synth, "AWS::Scheduler::ScheduleGroup", "Schedules")
    _, role = _messaging(synth, "AWS::IAM::Role", "SchedulerRole")
    _, dlq = _messaging(synth, "AWS::SQS::Queue", "ScheduleDlq")
    ingress_name = synth.function("events")[1]["Properties"]["FunctionName"]
    role_arn = f"arn:aws:iam::{synth.account}:role/{role['RoleName']}"
    for name in ("events", "supervisor"):  # the API and CLI; the supervisor's reminder tool
        env = _env(synth, name)
        assert env["ZERG_SCHEDULE_GROUP"] == group["Name"]
        assert synth.resolve(env["ZERG_SCHEDULER_ROLE_ARN"]) == role_arn
        assert synth.resolve(env["ZERG_SCHEDULE_DLQ_ARN"]) == _arn(synth, "sqs", dlq["QueueName"])
        # by name, never Fn::GetAtt of the function itself (a circular dependency for ingress)
        assert synth.resolve(env["ZERG_SCHEDULE_TARGET_ARN"]) == _arn(synth, "lambda", f"function:{ingress_name}")
        schedules = _arn(synth, "scheduler", f"schedule/{group['Name']}/zerg-s*")
        for action in ("scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule",
                       "scheduler:GetSchedule"):
            assert _allowed(synth, name, action) == [schedules], (name, action)
        (pass_role,) = [s for s in synth.statements_of_role(synth.role_of(name)) if "iam:PassRole" in _actions(s)]
        assert synth.resolve(pass_role["Resource"]) == role_arn
        assert pass_role["Condition"] == {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}}


# --- notifications -----------------------------------------------------------------------------

def test_senders_may_mail_only_as_the_sender_address_from_the_mail_domain_identity(synth):
    for name in ("events", "supervisor", "worker"):
        (mail,) = [s for s in synth.statements_of_role(synth.role_of(name)) if "ses:SendEmail" in _actions(s)]
        # SES v2 SendEmail is authorised as ses:SendEmail, and as ses:SendRawEmail for raw MIME content.
        assert sorted(_actions(mail)) == ["ses:SendEmail", "ses:SendRawEmail"]
        assert synth.resolve(mail["Resource"]) == _arn(synth, "ses", "identity/mail.zerg.test")
        assert mail["Condition"] == {"StringEquals": {"ses:FromAddress": "zerg@mail.zerg.test"}}
        env = _env(synth, name)
        assert (env["ZERG_NOTIFIER"], env["ZERG_SENDER_EMAIL"], env["ZERG_MAIL_DOMAIN"]) == (
            "aws", "zerg@mail.zerg.test", "mail.zerg.test")
    _, identity = _messaging(synth, "AWS::SES::EmailIdentity", "MailDomain")
    assert identity["EmailIdentity"] == "mail.zerg.test"


def test_senders_report_failed_deliveries_to_the_alert_topic_they_are_told(synth):
    _, topic = _messaging(synth, "AWS::SNS::Topic", "Alerts")
    alerts = _arn(synth, "sns", topic["TopicName"])
    for name in ("events", "supervisor", "worker"):
        assert synth.resolve(_env(synth, name)["ZERG_ALERT_TOPIC_ARN"]) == alerts
        assert alerts in _allowed(synth, name, "sns:Publish")


def test_no_function_may_publish_to_the_inbound_sms_topic_ingress_trusts(synth):
    _, topic = _messaging(synth, "AWS::SNS::Topic", "InboundSms")
    inbound = _arn(synth, "sns", topic["TopicName"])
    for name in FUNCTIONS:
        statements = synth.statements_of_role(synth.role_of(name))
        allowed = _allowed(synth, name, "sns:Publish")
        denied = [synth.resolve(r) for s in statements if s["Effect"] == "Deny" and "sns:Publish" in _actions(s)
                  for r in _resources(s)]
        assert inbound not in allowed, name
        if "*" in allowed:  # SMS to a phone number: no resource to name, so the topic is denied
            assert inbound in denied, name


def test_settings_are_set_exactly_on_the_functions_whose_role_has_their_permission(synth):
    for name in FUNCTIONS:
        env = _env(synth, name)
        publish = _allowed(synth, name, "sns:Publish")
        checks = {
            "ZERG_SCHEDULE_GROUP": bool(_allowed(synth, name, "scheduler:CreateSchedule")),
            "ZERG_SCHEDULER_ROLE_ARN": bool(_allowed(synth, name, "iam:PassRole")),
            "ZERG_SCHEDULE_TARGET_ARN": bool(_allowed(synth, name, "scheduler:CreateSchedule")),
            "ZERG_SCHEDULE_DLQ_ARN": bool(_allowed(synth, name, "scheduler:CreateSchedule")),
            "ZERG_NOTIFIER": bool(_allowed(synth, name, "ses:SendEmail")) and "*" in publish,
            "ZERG_SENDER_EMAIL": bool(_allowed(synth, name, "ses:SendEmail")),
            "ZERG_ALERT_TOPIC_ARN": bool(publish),
            "ZERG_ESCALATION_STATE_MACHINE_ARN": bool(_allowed(synth, name, "states:StartExecution")
                                                      + _allowed(synth, name, "states:StopExecution")),
        }
        for key, permitted in checks.items():
            assert (key in env) == permitted, (name, key)
        if "ZERG_ALERT_TOPIC_ARN" in env:
            assert synth.resolve(env["ZERG_ALERT_TOPIC_ARN"]) in publish
    assert "ZERG_NOTIFIER" in _env(synth, "worker") and "ZERG_SCHEDULE_GROUP" not in _env(synth, "worker")


def test_links_in_alerts_and_digests_start_with_the_jarvis_origin_unless_the_stage_names_a_public_url(synth):
    from infra.config import ConfigError, StageConfig

    for name in ("events", "supervisor"):  # the digest, reminders and alerts; the worker links nothing
        assert _env(synth, name)["ZERG_PUBLIC_URL"] == "https://jarvis.zerg.test"
    assert "ZERG_PUBLIC_URL" not in _env(synth, "worker")
    config = StageConfig(jarvis_origin="https://jarvis.example.com")
    assert config.links_base == "https://jarvis.example.com"
    assert config.replace(public_url="https://api.example.com").links_base == "https://api.example.com"
    with pytest.raises(ConfigError, match="public_url"):
        config.replace(public_url="api.example.com")


def test_sms_origination_reaches_every_sender_only_when_the_stage_sets_it():
    from aws_cdk import App, Stack
    from aws_cdk import aws_lambda as lambda_
    from aws_cdk.assertions import Template

    from infra.config import StageConfig
    from infra.stacks.background import grant_background

    def origination(config):
        app = App(builtin_cloud_formation_validation=False)
        stack = Stack(app, "S")
        code = lambda_.Code.from_inline("def handler(event, context):\n    return event\n")
        functions = {name: lambda_.Function(stack, name, function_name=name, runtime=lambda_.Runtime.PYTHON_3_12,
                                            handler="index.handler", code=code)
                     for name in ("events", "supervisor", "worker", "summary")}
        grant_background(stack, config, functions)
        found = Template.from_stack(stack).find_resources("AWS::Lambda::Function")
        return {f["Properties"]["FunctionName"]: f["Properties"].get("Environment", {}).get("Variables", {}).get(
            "ZERG_SMS_ORIGINATION") for f in found.values()}

    assert set(origination(StageConfig()).values()) == {None}
    assert origination(StageConfig(sms_origination="+15551234567")) == {
        "events": "+15551234567", "supervisor": "+15551234567", "worker": "+15551234567", "summary": None}


@pytest.mark.parametrize("origination", ["+15551234567", "+447700900123", "ZergAlerts", "Zerg1"])
def test_an_sms_origination_is_an_e164_number_or_an_alphanumeric_sender_id(origination):
    from infra.config import StageConfig

    assert StageConfig(sms_origination=origination).validate().sms_origination == origination


@pytest.mark.parametrize("origination", ["15551234567", "+0155512345", "+1 555 123 4567", "+1555123456789012",
                                         "Zerg Alerts", "ZergAlertsNow", "Zerg-1"])
def test_any_other_sms_origination_fails_the_synth_naming_the_key(origination):
    from infra.config import ConfigError, StageConfig

    with pytest.raises(ConfigError, match="sms_origination"):
        StageConfig(sms_origination=origination).validate()


def test_every_function_environment_loads_as_the_settings_it_is_meant_to_be(synth, tmp_path):
    """A name the core library does not know, or a value it refuses, would fail the cold start."""
    from zerg.config import load_settings

    def literal(value):  # a Ref / GetAtt / import stands for a value only known at deploy
        value = synth.resolve(value)
        return value if isinstance(value, str) else f"deploy-time:{json.dumps(value)[:40]}"

    for name in FUNCTIONS:
        env = {k: literal(v) for k, v in _env(synth, name).items()}
        settings = load_settings({**env, "ZERG_DATA_DIR": str(tmp_path), "ZERG_CONFIG_DIR": str(tmp_path)})
        if name in ("events", "supervisor", "worker"):
            assert settings.notifier == "aws" and settings.sender_email == "zerg@mail.zerg.test"
            assert settings.alert_topic_arn == _arn(synth, "sns", "zerg-test-alerts")
        if name in ("events", "supervisor"):
            assert settings.schedule_group == "zerg-test-schedules"
            assert settings.schedule_target_arn == _arn(synth, "lambda", "function:zerg-test-events")
            assert settings.escalation_state_machine_arn == _arn(synth, "states", "stateMachine:zerg-test-escalation")
            assert settings.public_url == "https://jarvis.zerg.test"
        if name in ("summary", "migrator"):
            assert settings.notifier == "local" and settings.schedule_group is None
