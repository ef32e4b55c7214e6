"""CDK entry point (``cdk.json``: ``python -m infra.app``): builds the five stacks of one stage.

Stacks are environment-agnostic (no account/region lookups), so ``cdk synth`` needs no AWS
credentials; ``cdk deploy`` takes the account and region from the CLI's credentials.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from aws_cdk import App, Tags  # noqa: E402  (jsii reads the variable above at import)

from infra.config import StageConfig  # noqa: E402
from infra.stacks.api import ApiStack  # noqa: E402
from infra.stacks.data import DataStack  # noqa: E402
from infra.stacks.messaging import MessagingStack  # noqa: E402
from infra.stacks.web import WebStack  # noqa: E402
from infra.stacks.workflow import WorkflowStack  # noqa: E402


@dataclass(frozen=True)
class ZergStacks:
    data: DataStack
    workflow: WorkflowStack
    api: ApiStack
    messaging: MessagingStack
    web: WebStack

    def all(self) -> list:
        return [self.data, self.workflow, self.api, self.messaging, self.web]


def build(app: App) -> ZergStacks:
    config = StageConfig.from_context(app.node)
    name = f"Zerg-{config.stage}"
    data = DataStack(app, f"{name}-Data", config=config, description="Zerg: network, database, secrets, artifacts")
    workflow = WorkflowStack(app, f"{name}-Workflow", config=config, data=data,
                             description="Zerg: functions, core layer, migrations, run and escalation state machines")
    api = ApiStack(app, f"{name}-Api", config=config, ingress=workflow.ingress,
                   description="Zerg: HTTP API")
    messaging = MessagingStack(
        app, f"{name}-Messaging", config=config, bucket=data.bucket,
        state_machine=workflow.state_machine, escalation_machine=workflow.escalation_machine,
        ingress=workflow.ingress, ingress_failures=workflow.ingress_failures,
        description="Zerg: alerts, inbound mail/SMS, schedules, alarms",
    )
    web = WebStack(app, f"{name}-Web", config=config, api=api.api,
                   description="Zerg: the Jarvis web app on S3 + CloudFront, /api/* to the HTTP API")
    stacks = ZergStacks(data, workflow, api, messaging, web)
    for stack in stacks.all():
        for key, value in (("project", "zerg"), ("stage", config.stage)):
            # CDK's own template validator rejects Tags on proxy target groups (cfn-lint's newer
            # schema allows them): skip that one type rather than ship a disputed property.
            Tags.of(stack).add(key, value, exclude_resource_types=["AWS::RDS::DBProxyTargetGroup"])
    return stacks


def main() -> None:
    app = App()
    # `cdk synth -c skip_bundling=true`: the CLI refuses user context under `aws:`, so this is
    # the offline switch that leaves the layer unbuilt (synth and lint only, not deployable).
    if str(app.node.try_get_context("skip_bundling")).lower() == "true":
        app.node.set_context("aws:cdk:bundling-stacks", [])
    build(app)
    app.synth()


if __name__ == "__main__":
    main()
