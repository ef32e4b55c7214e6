"""``ZergFunction``: how every Zerg Lambda is built, so the functions cannot drift apart.

Invariants:
- Python 3.12 on arm64, code = one directory (handler module at its root), the core layer
  attached, running in the VPC's private subnets behind the functions security group.
- Logs go to a log group this construct owns, with the stage's retention (no log-retention
  custom resource, no never-expiring ``/aws/lambda`` group created on first invoke).
- X-Ray is active only when the stage asks for it (``tracing`` or ``adot``); Powertools is told either way.
- With ``adot`` the ADOT collector layer (:data:`ADOT_COLLECTOR`, pinned) runs beside every function
  and the function exports its run's OpenTelemetry spans to it over OTLP/HTTP on localhost
  (``OTEL_EXPORTER_OTLP_ENDPOINT``); without it nothing of OpenTelemetry is configured.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import StageConfig

_RETENTION = {
    1: logs.RetentionDays.ONE_DAY, 3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS, 7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS, 30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS, 90: logs.RetentionDays.THREE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS, 365: logs.RetentionDays.ONE_YEAR,
}
METRICS_NAMESPACE = "Zerg"
# The ADOT collector for Lambda (the "generic" layer: the collector alone, no auto-instrumentation:
# the functions make their own spans). Its default configuration receives OTLP on localhost:4317/4318
# and exports traces to X-Ray. Pinned: a new collector is taken on purpose.
ADOT_COLLECTOR = lambda_.AdotLambdaLayerGenericVersion.V0_115_0
ADOT_ENDPOINT = "http://localhost:4318"


def otel_environment(config: StageConfig, name: str) -> dict[str, str]:
    """The OpenTelemetry variables of a function (none unless the stage turns the ADOT collector on)."""
    if not config.adot:
        return {}
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": ADOT_ENDPOINT, "OTEL_SERVICE_NAME": f"zerg-{name}",
            "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"}


def retention(config: StageConfig) -> logs.RetentionDays:
    return _RETENTION[config.log_retention_days]


@dataclass(frozen=True)
class FunctionSpec:
    """What differs between functions; everything else is the construct's business."""

    name: str
    code_dir: Path
    description: str
    timeout: Duration
    memory_mb: int = 1024
    handler: str = "handler.handler"
    environment: dict[str, str] = field(default_factory=dict)


class ZergFunction(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        spec: FunctionSpec,
        config: StageConfig,
        layer: lambda_.ILayerVersion,
        vpc: ec2.IVpc,
        security_group: ec2.ISecurityGroup,
    ) -> None:
        super().__init__(scope, construct_id)
        function_name = config.prefix(spec.name)
        self.log_group = logs.LogGroup(
            self, "Logs",
            log_group_name=f"/aws/lambda/{function_name}",
            retention=retention(config),
            removal_policy=RemovalPolicy.DESTROY,
        )
        powertools = {
            "POWERTOOLS_SERVICE_NAME": f"zerg-{spec.name}",
            "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
            "POWERTOOLS_LOG_LEVEL": config.log_level,
            "POWERTOOLS_TRACE_DISABLED": "false" if config.xray else "true",
        }
        layers = [layer]
        if config.adot:
            layers.append(lambda_.LayerVersion.from_layer_version_arn(
                self, "AdotCollector", ADOT_COLLECTOR.layer_arn(self, lambda_.Architecture.ARM_64)))
        self.function = lambda_.Function(
            self, "Function",
            function_name=function_name,
            description=spec.description,
            runtime=lambda_.Runtime.PYTHON_3_12,
            architecture=lambda_.Architecture.ARM_64,
            handler=spec.handler,
            code=lambda_.Code.from_asset(
                str(spec.code_dir), exclude=["**/__pycache__", "**/*.pyc"]
            ),
            layers=layers,
            timeout=spec.timeout,
            memory_size=spec.memory_mb,
            environment={**powertools, **otel_environment(config, spec.name), **spec.environment},
            vpc=vpc,
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            security_groups=[security_group],
            log_group=self.log_group,
            tracing=lambda_.Tracing.ACTIVE if config.xray else lambda_.Tracing.DISABLED,
        )
