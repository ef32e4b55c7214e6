"""Synthesize the CDK app once per test process and hand tests the templates.

Synth settings keep the suite fast and offline: bundling is skipped (the layer's pip install
never runs; ``aws:cdk:bundling-stacks=[]``), CDK's built-in CloudFormation validation is off
(cfn-lint runs instead, see test_infra_lint.py) and each xdist worker gets its own outdir.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

ROOT = Path(__file__).resolve().parents[2]
STAGE = "test"
# cdk.json's context (feature flags) as the CLI would pass it, then the test stage's values.
CONTEXT = {
    **json.loads((ROOT / "cdk.json").read_text())["context"],
    "aws:cdk:bundling-stacks": [],
    "stage": STAGE,
    "domain": "mail.zerg.test",
    "sender_email": "zerg@mail.zerg.test",
    "alert_email": "ops@zerg.test",
    "jarvis_origin": "https://jarvis.zerg.test",
    "map_concurrency": "7",  # as `-c map_concurrency=7` delivers it: a string
    "artifact_retention_days": "30",  # the daily retention sweep and its grants exist
}


STACKS = ("Data", "Workflow", "Api", "Messaging", "Web")


# What the pseudo parameters resolve to in :func:`resolve` (any account and region would do).
ACCOUNT, REGION = "123456789012", "eu-west-1"


def resolve(value: Any) -> Any:
    """A template value built only from literals and the pseudo parameters (``Stack.format_arn``
    of a name), as the string CloudFormation makes of it in :data:`ACCOUNT` / :data:`REGION`.
    Anything else (a Ref or GetAtt of a resource, an import) is returned unchanged."""
    pseudo = {"AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::URLSuffix": "amazonaws.com"}
    if isinstance(value, dict) and set(value) == {"Ref"} and value["Ref"] in pseudo:
        return pseudo[value["Ref"]]
    if isinstance(value, dict) and set(value) == {"Fn::Join"}:
        separator, parts = value["Fn::Join"]
        resolved = [resolve(part) for part in parts]
        if all(isinstance(part, str) for part in resolved):
            return separator.join(resolved)
    return value


@dataclass
class Synthesized:
    outdir: Path
    stacks: Any  # infra.app.ZergStacks
    context: dict = field(default_factory=lambda: dict(CONTEXT))
    templates: dict[str, dict] = field(default_factory=dict)  # short name -> template JSON
    metadata: dict[str, list] = field(default_factory=dict)  # construct path -> entries
    account, region = ACCOUNT, REGION
    resolve = staticmethod(resolve)

    def template_file(self, name: str) -> Path:
        return self.outdir / f"Zerg-{STAGE}-{name}.template.json"

    def assertion(self, name: str):
        from aws_cdk.assertions import Template

        return Template.from_json(self.templates[name])

    def resources(self, name: str, cfn_type: str) -> dict[str, dict]:
        return {k: r for k, r in self.templates[name]["Resources"].items() if r["Type"] == cfn_type}

    def function(self, short: str) -> tuple[str, dict]:
        """The Workflow stack's Lambda named ``zerg-test-{short}``: (logical id, resource)."""
        for logical_id, res in self.resources("Workflow", "AWS::Lambda::Function").items():
            if res["Properties"].get("FunctionName") == f"zerg-{STAGE}-{short}":
                return logical_id, res
        raise KeyError(short)

    def state_machine(self, short: str) -> tuple[str, dict]:
        """The Workflow stack's state machine named ``zerg-test-{short}``: (logical id, resource)."""
        for logical_id, res in self.resources("Workflow", "AWS::StepFunctions::StateMachine").items():
            if res["Properties"].get("StateMachineName") == f"zerg-{STAGE}-{short}":
                return logical_id, res
        raise KeyError(short)

    def role_of(self, short: str) -> str:
        return self.function(short)[1]["Properties"]["Role"]["Fn::GetAtt"][0]

    def statements_of_role(self, role_id: str) -> list[dict]:
        """Every IAM statement attached to a Workflow role, from any stack (Messaging attaches
        its own policies to workflow roles through exported role names)."""
        found = []
        for name, template in self.templates.items():
            for res in template["Resources"].values():
                if res["Type"] != "AWS::IAM::Policy":
                    continue
                if any(_names_role(ref, role_id, name) for ref in res["Properties"].get("Roles", [])):
                    found.extend(res["Properties"]["PolicyDocument"]["Statement"])
        return found


def _names_role(ref: Any, role_id: str, stack: str) -> bool:
    if stack == "Workflow":
        return ref == {"Ref": role_id}
    return "Fn::ImportValue" in ref and f"Ref{role_id}" in json.dumps(ref)


def built_web_app(dist: Path) -> Path:
    """What ``npm run build`` leaves in web/dist, in miniature: the page, a hashed asset, the
    service worker (the synth must not depend on whether the real app was built)."""
    (dist / "assets").mkdir()
    (dist / "index.html").write_text('<!doctype html><script type="module" src="/assets/index-3f2a9c.js"></script>')
    (dist / "assets" / "index-3f2a9c.js").write_text("console.log('zerg')")
    (dist / "sw.js").write_text("self.addEventListener('push', () => {})")
    return dist


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    from aws_cdk import App

    from infra.app import build

    outdir = tmp_path_factory.mktemp("cdk.out")
    context = {**CONTEXT, "web_dist": str(built_web_app(tmp_path_factory.mktemp("web-dist")))}
    app = App(outdir=str(outdir), context=context, builtin_cloud_formation_validation=False)
    stacks = build(app)
    app.synth()
    result = Synthesized(outdir=outdir, stacks=stacks, context=context)
    for name in STACKS:
        result.templates[name] = json.loads(result.template_file(name).read_text())
    for path in outdir.glob("*.metadata.json"):
        result.metadata.update(json.loads(path.read_text()))
    return result
