"""API and messaging stacks: routes, throttling, CORS; topics, inbound mail, schedules, alarms."""

from __future__ import annotations

import json

from aws_cdk.assertions import Match


def test_http_api_routes_reach_the_ingress_function(synth):
    routes = {r["Properties"]["RouteKey"] for r in synth.resources("Api", "AWS::ApiGatewayV2::Route").values()}
    assert routes == {f"{m} /api/{{proxy+}}" for m in ("GET", "POST", "PUT", "PATCH", "DELETE")} | {"POST /mcp"}
    (integration,) = synth.resources("Api", "AWS::ApiGatewayV2::Integration").values()
    assert integration["Properties"]["IntegrationType"] == "AWS_PROXY"
    assert integration["Properties"]["PayloadFormatVersion"] == "2.0"
    ingress_id = synth.function("events")[0]
    assert ingress_id in json.dumps(integration["Properties"]["IntegrationUri"])
    synth.assertion("Api").has_resource_properties("AWS::Lambda::Permission", {
        "Action": "lambda:InvokeFunction", "Principal": "apigateway.amazonaws.com"})


def test_http_api_is_throttled_and_allows_only_the_jarvis_origin(synth):
    template = synth.assertion("Api")
    template.has_resource_properties("AWS::ApiGatewayV2::Stage", {
        "StageName": "$default", "AutoDeploy": True,
        "DefaultRouteSettings": {"ThrottlingRateLimit": 20, "ThrottlingBurstLimit": 40}})
    template.has_resource_properties("AWS::ApiGatewayV2::Api", {
        "ProtocolType": "HTTP",
        "CorsConfiguration": Match.object_like({
            "AllowOrigins": [synth.context["jarvis_origin"]], "AllowCredentials": True}),
    })
    assert "ApiUrl" in synth.templates["Api"]["Outputs"]


def test_topics_and_inbound_sms_delivery_to_ingress(synth):
    template = synth.assertion("Messaging")
    for name in ("zerg-test-alerts", "zerg-test-inbound-sms"):
        template.has_resource_properties("AWS::SNS::Topic", {"TopicName": name})
    template.has_resource_properties("AWS::SNS::Subscription", {"Protocol": "lambda"})
    template.has_resource_properties("AWS::SNS::Subscription", {
        "Protocol": "email", "Endpoint": synth.context["alert_email"]})
    template.has_resource_properties("AWS::Lambda::Permission", {
        "Principal": "sns.amazonaws.com", "SourceArn": {"Ref": Match.string_like_regexp("InboundSms")}})


def test_inbound_mail_is_stored_under_inbound_email_then_ingress_is_invoked(synth):
    (rule,) = synth.resources("Messaging", "AWS::SES::ReceiptRule").values()
    props = rule["Properties"]["Rule"]
    assert props["Recipients"] == [synth.context["domain"]]
    assert props["ScanEnabled"] is True and props["TlsPolicy"] == "Require"
    s3_action, lambda_action = props["Actions"]  # order matters: stored before the function runs
    assert s3_action["S3Action"]["ObjectKeyPrefix"] == "inbound/email/"
    assert lambda_action["LambdaAction"]["InvocationType"] == "Event"
    assert synth.function("events")[0] in json.dumps(lambda_action)


def test_scheduler_group_and_its_dlq(synth):
    template = synth.assertion("Messaging")
    template.has_resource_properties("AWS::Scheduler::ScheduleGroup", {"Name": "zerg-test-schedules"})
    template.has_resource_properties("AWS::SQS::Queue", {
        "QueueName": "zerg-test-schedule-dlq", "SqsManagedSseEnabled": True})
    outputs = synth.templates["Messaging"]["Outputs"]
    assert {"ScheduleGroupName", "SchedulerRoleArn", "ScheduleDlqArn"} <= set(outputs)


def test_failed_runs_and_undelivered_schedules_alarm_to_the_alert_topic(synth):
    alarms = synth.resources("Messaging", "AWS::CloudWatch::Alarm").values()
    by_metric = {(a["Properties"]["Namespace"], a["Properties"]["MetricName"]): a for a in alarms}
    for key in [("AWS/States", "ExecutionsFailed"), ("AWS/States", "ExecutionsTimedOut"),
                ("AWS/SQS", "ApproximateNumberOfMessagesVisible")]:
        props = by_metric[key]["Properties"]
        assert props["AlarmActions"] == [{"Ref": Match.string_like_regexp("Alerts")}] or \
            "Alerts" in json.dumps(props["AlarmActions"])
        assert props["Threshold"] == 1


def _alarm(synth, name: str) -> dict:
    (alarm,) = [a["Properties"] for a in synth.resources("Messaging", "AWS::CloudWatch::Alarm").values()
                if a["Properties"]["AlarmName"] == f"zerg-test-{name}"]
    assert alarm["AlarmActions"] == [{"Ref": next(k for k in synth.resources("Messaging", "AWS::SNS::Topic")
                                                  if k.startswith("Alerts"))}]
    assert alarm["Threshold"] == 1 and alarm["EvaluationPeriods"] == 1
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    return alarm


def test_a_message_in_the_schedule_dlq_alarms(synth):
    alarm = _alarm(synth, "ScheduleDeliveriesFailed")
    assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/SQS", "ApproximateNumberOfMessagesVisible")
    (dlq_id,) = [k for k in synth.resources("Messaging", "AWS::SQS::Queue") if k.startswith("ScheduleDlq")]
    assert alarm["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [dlq_id, "QueueName"]}}]


def test_an_ingress_event_that_fails_after_its_retries_lands_in_a_queue_that_alarms(synth):
    ingress_id = synth.function("events")[0]
    (config,) = synth.resources("Workflow", "AWS::Lambda::EventInvokeConfig").values()
    props = config["Properties"]
    assert props["FunctionName"] == {"Ref": ingress_id} and props["Qualifier"] == "$LATEST"
    assert props["MaximumRetryAttempts"] == 2 and props["MaximumEventAgeInSeconds"] == 6 * 3600
    queue_id = props["DestinationConfig"]["OnFailure"]["Destination"]["Fn::GetAtt"][0]
    queue = synth.templates["Workflow"]["Resources"][queue_id]["Properties"]
    assert queue["QueueName"] == "zerg-test-ingress-failed" and queue["SqsManagedSseEnabled"] is True
    alarm = _alarm(synth, "IngressEventsFailed")
    assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert queue_id in json.dumps(alarm["Dimensions"])  # the workflow's queue, imported


def test_a_failed_escalation_alarms(synth):
    alarm = _alarm(synth, "EscalationsFailed")
    assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/States", "ExecutionsFailed")
    escalation_id, _ = synth.state_machine("escalation")
    assert escalation_id in json.dumps(alarm["Dimensions"])
