"""Housekeeping on AWS: the daily retention rule invoking ingress, its DLQ, and the narrow delete
grant it needs; none of it when the stage keeps artifacts forever."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Match

from zerg.handler_input import HousekeepingEvent, parse_event


def _rule(synth, name: str = "zerg-test-retention-sweep") -> dict:
    (rule,) = [r for r in synth.resources("Messaging", "AWS::Events::Rule").values()
               if r["Properties"].get("Name") == name]
    return rule["Properties"]


def test_a_daily_rule_sends_ingress_the_retention_event_the_handler_accepts(synth):
    props = _rule(synth)
    assert props["ScheduleExpression"] == "rate(1 day)" and props["State"] == "ENABLED"
    (target,) = props["Targets"]
    assert synth.function("events")[0] in json.dumps(target["Arn"])
    event = json.loads(target["Input"])
    assert event == {"trigger": "housekeeping", "task": "retention"}
    assert parse_event(HousekeepingEvent, event, "housekeeping").task == "retention"  # what the handler validates
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 6 * 3600}
    (dlq_id,) = [k for k in synth.resources("Messaging", "AWS::SQS::Queue") if "ScheduleDlq" in k]
    assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [dlq_id, "Arn"]}}  # the queue that alarms


@pytest.mark.parametrize(("name", "task"), [("zerg-test-memory-versions-prune", "memory-versions"),
                                           ("zerg-test-memory-facts-prune", "memory-facts")])
def test_a_daily_rule_always_sends_ingress_each_memory_prune(synth, name, task):
    props = _rule(synth, name)
    assert props["ScheduleExpression"] == "rate(1 day)" and props["State"] == "ENABLED"
    (target,) = props["Targets"]
    assert synth.function("events")[0] in json.dumps(target["Arn"])
    event = json.loads(target["Input"])
    assert parse_event(HousekeepingEvent, event, "housekeeping").task == task
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 6 * 3600}
    assert "DeadLetterConfig" in target


def test_a_rule_every_15_minutes_sends_ingress_the_embedding_sweep(synth):
    props = _rule(synth, "zerg-test-memory-embed-sweep")
    assert props["ScheduleExpression"] == "rate(15 minutes)" and props["State"] == "ENABLED"
    (target,) = props["Targets"]
    assert synth.function("events")[0] in json.dumps(target["Arn"])
    event = json.loads(target["Input"])
    assert parse_event(HousekeepingEvent, event, "housekeeping").task == "embed"  # what the handler validates
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 15 * 60}
    assert "DeadLetterConfig" in target
    env = synth.function("events")[1]["Properties"]["Environment"]["Variables"]
    # The sweep has an embedder: Titan on Bedrock (the default provider, no OpenAI key), else OpenAI's.
    assert env.get("ZERG_EMBEDDINGS", "auto") == "auto"
    assert ("amazon.titan-embed-text-v2:0" in env.get("ZERG_BEDROCK_MODEL_IDS", "").split(",")
            if env["ZERG_MODEL_PROVIDER"] == "bedrock" else "ZERG_OPENAI_SECRET_ARN" in env)


def test_a_rule_every_5_minutes_sends_ingress_the_release_of_sms_held_for_quiet_hours(synth):
    props = _rule(synth, "zerg-test-notifications-release")
    assert props["ScheduleExpression"] == "rate(5 minutes)" and props["State"] == "ENABLED"
    (target,) = props["Targets"]
    assert synth.function("events")[0] in json.dumps(target["Arn"])
    event = json.loads(target["Input"])
    assert event == {"trigger": "housekeeping", "task": "notifications"}
    assert parse_event(HousekeepingEvent, event, "housekeeping").task == "notifications"  # what the handler validates
    # A stale release is dropped (the next one, 5 minutes later, does the same work) into the DLQ.
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 5 * 60}
    (dlq_id,) = [k for k in synth.resources("Messaging", "AWS::SQS::Queue") if "ScheduleDlq" in k]
    assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [dlq_id, "Arn"]}}
    env = synth.function("events")[1]["Properties"]["Environment"]["Variables"]
    assert env["ZERG_NOTIFIER"] == "aws"  # ingress sends what it releases


def test_a_rule_every_5_minutes_sends_ingress_the_schedules_recovery_and_prune(synth):
    props = _rule(synth, "zerg-test-schedules-sweep")
    assert props["ScheduleExpression"] == "rate(5 minutes)" and props["State"] == "ENABLED"
    (target,) = props["Targets"]
    assert synth.function("events")[0] in json.dumps(target["Arn"])
    event = json.loads(target["Input"])
    assert event == {"trigger": "housekeeping", "task": "schedules"}
    assert parse_event(HousekeepingEvent, event, "housekeeping").task == "schedules"  # what the handler validates
    # A stale sweep is dropped (the next one, 5 minutes later, does the same work) into the DLQ.
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 5 * 60}
    (dlq_id,) = [k for k in synth.resources("Messaging", "AWS::SQS::Queue") if "ScheduleDlq" in k]
    assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [dlq_id, "Arn"]}}
    # The prune deletes Scheduler schedules and a recovered fire starts its run: ingress may do both.
    statements = [(s, [s["Action"]] if isinstance(s["Action"], str) else s["Action"])
                  for s in synth.statements_of_role(synth.role_of("events")) if s["Effect"] == "Allow"]
    deletes = [synth.resolve(s["Resource"]) for s, actions in statements if "scheduler:DeleteSchedule" in actions]
    assert deletes == [f"arn:aws:scheduler:{synth.region}:{synth.account}:schedule/zerg-test-schedules/zerg-s*"]
    assert {"Ref": synth.state_machine("run")[0]} in [
        s["Resource"] for s, actions in statements if "states:StartExecution" in actions]


def test_eventbridge_may_invoke_ingress_and_write_the_dlq_only_from_that_rule(synth):
    template = synth.assertion("Messaging")
    (rule_id,) = [k for k, r in synth.resources("Messaging", "AWS::Events::Rule").items()
                  if r["Properties"].get("Name") == "zerg-test-retention-sweep"]
    template.has_resource_properties("AWS::Lambda::Permission", {
        "Action": "lambda:InvokeFunction", "Principal": "events.amazonaws.com",
        "SourceArn": {"Fn::GetAtt": [rule_id, "Arn"]}})
    template.has_resource_properties("AWS::SQS::QueuePolicy", {"PolicyDocument": {"Statement": Match.array_with([
        Match.object_like({"Action": "sqs:SendMessage", "Principal": {"Service": "events.amazonaws.com"},
                           "Condition": {"ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": [rule_id, "Arn"]}}}})])}})


def test_ingress_may_delete_worker_objects_only_and_knows_the_retention(synth):
    statements = synth.statements_of_role(synth.role_of("events"))
    deletes = [s for s in statements if any(a.startswith("s3:Delete") for a in ([s["Action"]] if isinstance(
        s["Action"], str) else s["Action"]))]
    assert len(deletes) == 1
    assert sorted(deletes[0]["Action"]) == ["s3:DeleteObject", "s3:DeleteObjectVersion"]
    resource = json.dumps(deletes[0]["Resource"])
    assert resource.endswith('"/workers/*"]]}') and "GetAttArtifacts" in resource  # the artifacts bucket
    env = synth.function("events")[1]["Properties"]["Environment"]["Variables"]
    assert env["ZERG_ARTIFACT_RETENTION_DAYS"] == "30"
    for name in ("supervisor", "worker", "summary"):  # only ingress sweeps
        assert "ZERG_ARTIFACT_RETENTION_DAYS" not in synth.function(name)[1]["Properties"]["Environment"]["Variables"]


def test_without_a_retention_there_is_no_rule_no_delete_grant_and_no_setting():
    from aws_cdk import App, Stack
    from aws_cdk import aws_lambda as lambda_
    from aws_cdk import aws_s3 as s3
    from aws_cdk import aws_sqs as sqs
    from aws_cdk import aws_stepfunctions as sfn
    from aws_cdk.assertions import Template

    from infra.config import StageConfig
    from infra.stacks.messaging import MessagingStack
    from infra.stacks.workflow import retention_environment

    config = StageConfig(stage="test")
    assert config.artifact_retention_days == 0 and retention_environment(config) == {}
    assert retention_environment(config.replace(artifact_retention_days=90)) == {"ZERG_ARTIFACT_RETENTION_DAYS": "90"}
    app = App(builtin_cloud_formation_validation=False)
    deps = Stack(app, "Deps")
    code = lambda_.Code.from_inline("def handler(event, context):\n    return event\n")
    ingress = lambda_.Function(deps, "Ingress", runtime=lambda_.Runtime.PYTHON_3_12, handler="index.handler", code=code)
    run, escalation = (sfn.StateMachine(deps, name, definition_body=sfn.DefinitionBody.from_chainable(
        sfn.Pass(deps, f"{name}Pass"))) for name in ("Run", "Escalation"))
    stack = MessagingStack(app, "Messaging", config=config, bucket=s3.Bucket(deps, "Bucket"),
                           state_machine=run, escalation_machine=escalation, ingress=ingress,
                           ingress_failures=sqs.Queue(deps, "IngressFailures"))
    template = Template.from_stack(stack)
    rules = template.find_resources("AWS::Events::Rule")  # the memory prunes; embed, notifications, schedules, inbound
    assert sorted(r["Properties"]["Name"] for r in rules.values()) == [
        "zerg-test-inbound-sweep", "zerg-test-memory-embed-sweep", "zerg-test-memory-facts-prune", "zerg-test-memory-versions-prune",
        "zerg-test-notifications-release", "zerg-test-schedules-sweep"]
    assert "s3:Delete" not in json.dumps(template.find_resources("AWS::IAM::Policy"))


@pytest.mark.parametrize("days", [-1, 36_501])
def test_an_out_of_range_retention_fails_the_synth_naming_the_key(days):
    from infra.config import ConfigError, StageConfig

    with pytest.raises(ConfigError, match="artifact_retention_days"):
        StageConfig(artifact_retention_days=days).validate()
