"""Replies on AWS (issue 15): SES stores inbound mail under ``inbound/email/`` and then invokes
ingress asynchronously; two-way SMS reaches ingress through its topic; who may write, read and
invoke what; and the 5-minute sweep completing replies left half done."""

from __future__ import annotations

import json

from zerg.handler_input import HousekeepingEvent, parse_event

OTHER_FUNCTIONS = ("supervisor", "worker", "summary")


def _actions(statement: dict) -> list[str]:
    return [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]


def _resources(statement: dict) -> list:
    return statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]


def _s3_grants(synth, name: str) -> list[tuple[list[str], str]]:
    """(actions, object pattern) of every S3 grant of a function's role: the pattern is what
    follows the bucket ARN ("" for the bucket itself)."""
    grants = []
    for statement in synth.statements_of_role(synth.role_of(name)):
        actions = _actions(statement)
        if statement["Effect"] != "Allow" or not any(a.startswith("s3:") for a in actions):
            continue
        for resource in _resources(statement):
            if "Fn::Join" in resource:
                _, parts = resource["Fn::Join"]
                assert "Artifacts" in json.dumps(parts[0]) and len(parts) == 2, resource  # the artifacts bucket
                grants.append((actions, parts[1]))
            else:
                assert "Artifacts" in json.dumps(resource), resource
                grants.append((actions, ""))
    return grants


def test_ingress_may_read_inbound_mail_and_nothing_else_under_inbound(synth):
    grants = _s3_grants(synth, "events")
    patterns = {pattern for _, pattern in grants}
    assert patterns == {"", "/workers/*", "/inbound/email/*"}  # never "/*": not the whole bucket
    (mail,) = [actions for actions, pattern in grants if pattern == "/inbound/email/*"]
    assert mail == ["s3:GetObject"]  # HeadObject is authorised as GetObject; nothing written, nothing deleted
    assert not [p for p in patterns if p.startswith("/inbound/") and p != "/inbound/email/*"]


def test_the_other_functions_reach_worker_artifacts_only_never_inbound_mail(synth):
    for name in OTHER_FUNCTIONS:
        patterns = {pattern for _, pattern in _s3_grants(synth, name)}
        assert patterns == {"", "/workers/*"}, name


def test_only_ses_for_this_account_may_write_to_the_bucket_and_only_under_inbound_email(synth):
    (policy,) = synth.resources("Data", "AWS::S3::BucketPolicy").values()
    allows = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Allow"]
    (ses,) = allows
    assert ses["Principal"] == {"Service": "ses.amazonaws.com"} and ses["Action"] == "s3:PutObject"
    _, parts = ses["Resource"]["Fn::Join"]
    assert parts[1] == "/inbound/email/*"
    # The confused-deputy guard: SES writes only on behalf of this account's receipt rules.
    assert ses["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}


def test_the_receipt_rule_stores_the_mail_in_the_artifacts_bucket_then_invokes_ingress_as_an_event(synth):
    (rule_set,) = synth.resources("Messaging", "AWS::SES::ReceiptRuleSet").values()
    assert rule_set["Properties"]["RuleSetName"] == "zerg-test-inbound"
    (rule,) = synth.resources("Messaging", "AWS::SES::ReceiptRule").values()
    props = rule["Properties"]["Rule"]
    assert props["Enabled"] is True and props["Recipients"] == ["mail.zerg.test"]
    assert props["ScanEnabled"] is True  # the spam and virus verdicts the parser checks
    assert [next(iter(action)) for action in props["Actions"]] == ["S3Action", "LambdaAction"]  # stored first
    store, invoke = (next(iter(action.values())) for action in props["Actions"])
    assert store["ObjectKeyPrefix"] == "inbound/email/" and "Artifacts" in json.dumps(store["BucketName"])
    # Event: SES does not wait for ingress (its own Lambda event carries no body; ingress reads S3).
    assert invoke["InvocationType"] == "Event"
    assert synth.function("events")[0] in json.dumps(invoke["FunctionArn"])


def test_ses_may_invoke_ingress_only_for_the_rules_of_zergs_receipt_rule_set(synth):
    permissions = [(stack, r["Properties"]) for stack in synth.templates
                   for r in synth.resources(stack, "AWS::Lambda::Permission").values()
                   if r["Properties"]["Principal"] == "ses.amazonaws.com"]
    (stack, permission), = permissions  # one: the rule's Lambda action adds none of its own
    assert stack == "Workflow" and permission["FunctionName"] == {"Fn::GetAtt": [synth.function("events")[0], "Arn"]}
    assert permission["Action"] == "lambda:InvokeFunction"
    assert permission["SourceAccount"] == {"Ref": "AWS::AccountId"}
    assert synth.resolve(permission["SourceArn"]) == (
        f"arn:aws:ses:{synth.region}:{synth.account}:receipt-rule-set/zerg-test-inbound:receipt-rule/*")


def test_the_inbound_sms_topic_is_subscribed_by_ingress_which_sns_may_invoke_only_from_that_topic(synth):
    (topic_id,) = [k for k, r in synth.resources("Messaging", "AWS::SNS::Topic").items()
                   if r["Properties"]["TopicName"] == "zerg-test-inbound-sms"]
    ingress_id = synth.function("events")[0]
    (subscription,) = [r["Properties"] for r in synth.resources("Messaging", "AWS::SNS::Subscription").values()
                       if r["Properties"]["Protocol"] == "lambda"]
    assert subscription["TopicArn"] == {"Ref": topic_id} and ingress_id in json.dumps(subscription["Endpoint"])
    permissions = [r["Properties"] for stack in synth.templates
                   for r in synth.resources(stack, "AWS::Lambda::Permission").values()
                   if r["Properties"]["Principal"] == "sns.amazonaws.com"]
    (permission,) = permissions
    assert permission["SourceArn"] == {"Ref": topic_id} and permission["Action"] == "lambda:InvokeFunction"
    assert ingress_id in json.dumps(permission["FunctionName"])


def test_a_rule_every_5_minutes_sends_ingress_the_inbound_sweep(synth):
    (rule,) = [r["Properties"] for r in synth.resources("Messaging", "AWS::Events::Rule").values()
               if r["Properties"].get("Name") == "zerg-test-inbound-sweep"]
    assert rule["ScheduleExpression"] == "rate(5 minutes)" and rule["State"] == "ENABLED"
    (target,) = rule["Targets"]
    assert synth.function("events")[0] in json.dumps(target["Arn"])
    event = json.loads(target["Input"])
    assert event == {"trigger": "housekeeping", "task": "inbound"}
    assert parse_event(HousekeepingEvent, event, "housekeeping").task == "inbound"  # what the handler validates
    # A stale sweep is dropped (the next one, 5 minutes later, does the same work) into the DLQ.
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 5 * 60}
    (dlq_id,) = [k for k in synth.resources("Messaging", "AWS::SQS::Queue") if "ScheduleDlq" in k]
    assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [dlq_id, "Arn"]}}


def test_ingress_is_told_the_bucket_and_the_mail_domain_the_parsers_need(synth):
    env = synth.function("events")[1]["Properties"]["Environment"]["Variables"]
    assert "Artifacts" in json.dumps(env["ZERG_ARTIFACT_BUCKET"]) and env["ZERG_MAIL_DOMAIN"] == "mail.zerg.test"
