"""``ZergFunction``: how every Zerg Lambda is built, so the functions cannot drift apart.

Invariants:
- Python 3.12 on arm64, code = one directory (handler module at its root), the core layer
  attached, running in the VPC's private subnets behind the functions security group.
- Logs go to a log group this construct owns, with the stage's retention (no log-retention
  custom resource, no never-expiring ``/aws/lambda`` group created on first invoke).
- X-Ray is active only when the stage asks for it; Powertools is told either way.
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
            "POWERTOOLS_TRACE_DISABLED": "false" if config.tracing else "true",
        }
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
            layers=[layer],
            timeout=spec.timeout,
            memory_size=spec.memory_mb,
            environment={**powertools, **spec.environment},
            vpc=vpc,
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            security_groups=[security_group],
            log_group=self.log_group,
            tracing=lambda_.Tracing.ACTIVE if config.tracing else lambda_.Tracing.DISABLED,
        )
