"""The functions' models (issue 28): Bedrock by default, reached with the functions' own role, which may
invoke exactly the configured model ids; OpenAI's key only when a model is OpenAI's."""

from __future__ import annotations

import json

import pytest

from infra.config import ConfigError, StageConfig
from zerg.config import DEFAULT_MODELS

MODEL_FUNCTIONS = ("supervisor", "worker", "summary", "events")
NOVA = DEFAULT_MODELS["bedrock"]


def _synth(tmp_path, **context) -> tuple[dict, dict]:
    """The Workflow and Data templates of the app synthesized with ``context`` over the suite's."""
    from aws_cdk import App
    from aws_cdk.assertions import Template

    from infra.app import build
    from tests.infra.conftest import CONTEXT, built_web_app

    (tmp_path / "dist").mkdir()
    context = {**CONTEXT, "web_dist": str(built_web_app(tmp_path / "dist")), **context}
    stacks = build(App(outdir=str(tmp_path / "out"), context=context, builtin_cloud_formation_validation=False))
    return Template.from_stack(stacks.workflow).to_json(), Template.from_stack(stacks.data).to_json()


def bedrock_statements(synth, function: str) -> list[dict]:
    return [s for s in synth.statements_of_role(synth.role_of(function))
            if any(a.startswith("bedrock:") for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"]))]


def test_by_default_the_functions_use_bedrock_with_its_default_models_and_no_openai_key(synth):
    for name in MODEL_FUNCTIONS:
        env = synth.function(name)[1]["Properties"]["Environment"]["Variables"]
        assert env["ZERG_MODEL_PROVIDER"] == "bedrock"
        assert (env["ZERG_SUPERVISOR_MODEL"], env["ZERG_WORKER_MODEL"], env["ZERG_SUMMARY_MODEL"]) == (
            NOVA["ZERG_SUPERVISOR_MODEL"], NOVA["ZERG_WORKER_MODEL"], NOVA["ZERG_SUMMARY_MODEL"])
        assert env["ZERG_BEDROCK_MODEL_IDS"].split(",") == [
            "amazon.nova-pro-v1:0", "amazon.nova-lite-v1:0", "amazon.nova-micro-v1:0", "amazon.titan-embed-text-v2:0"]
        assert "ZERG_OPENAI_SECRET_ARN" not in env


def test_each_model_function_may_invoke_exactly_the_configured_bedrock_models(synth):
    expected = sorted(f"arn:aws:bedrock:{synth.region}::foundation-model/{m}" for m in
                      ("amazon.nova-pro-v1:0", "amazon.nova-lite-v1:0", "amazon.nova-micro-v1:0",
                       "amazon.titan-embed-text-v2:0"))
    for name in MODEL_FUNCTIONS:
        (statement,) = bedrock_statements(synth, name)
        assert statement["Effect"] == "Allow" and statement["Action"] == "bedrock:InvokeModel", name
        assert sorted(synth.resolve(r) for r in statement["Resource"]) == expected, name
    # No other role of the app may invoke a model, and no statement anywhere names every model.
    for template in synth.templates.values():
        for res in template["Resources"].values():
            if res["Type"] == "AWS::IAM::Policy":
                for s in res["Properties"]["PolicyDocument"]["Statement"]:
                    if "bedrock" in json.dumps(s["Action"]):
                        assert "*" not in [synth.resolve(r) for r in
                                           (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])]


def test_an_anthropic_stage_reads_its_key_from_its_own_secret_and_invokes_no_bedrock_model(tmp_path):
    template, data = _synth(tmp_path, model_provider="anthropic")
    secrets = {r["Properties"]["Name"]: k for k, r in data["Resources"].items() if r["Type"] == "AWS::SecretsManager::Secret"}
    assert "zerg/test/anthropic" in secrets
    functions = {r["Properties"].get("FunctionName"): r for r in template["Resources"].values()
                 if r["Type"] == "AWS::Lambda::Function"}
    for name in MODEL_FUNCTIONS:
        env = functions[f"zerg-test-{name}"]["Properties"]["Environment"]["Variables"]
        assert env["ZERG_MODEL_PROVIDER"] == "anthropic" and env["ZERG_SUPERVISOR_MODEL"] == "claude-sonnet-4-6"
        assert "ZERG_ANTHROPIC_SECRET_ARN" in env and "ZERG_OPENAI_SECRET_ARN" not in env
        assert "ZERG_BEDROCK_MODEL_IDS" not in env
    assert not [s for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Policy"
                for s in r["Properties"]["PolicyDocument"]["Statement"] if "bedrock" in json.dumps(s["Action"])]


def test_a_bedrock_stage_has_no_anthropic_secret(synth):
    names = {r["Properties"].get("Name") for r in synth.resources("Data", "AWS::SecretsManager::Secret").values()}
    assert "zerg/test/anthropic" not in names


def test_no_function_may_read_the_openai_secret_when_no_model_is_openais(synth):
    secret = [k for k, r in synth.resources("Data", "AWS::SecretsManager::Secret").items()
              if r["Properties"].get("Name") == "zerg/test/openai"]
    assert len(secret) == 1
    for name in MODEL_FUNCTIONS:
        readable = json.dumps([s for s in synth.statements_of_role(synth.role_of(name))
                               if "secretsmanager:GetSecretValue" in json.dumps(s["Action"])])
        assert secret[0] not in readable, name


def test_the_stage_config_resolves_models_providers_and_grants():
    openai = StageConfig(model_provider="openai-chat")
    assert openai.models()["ZERG_SUPERVISOR_MODEL"] == "gpt-4o" and openai.uses_openai
    assert openai.bedrock_model_ids() == []
    mixed = StageConfig(model_provider="openai-chat", worker_model="bedrock:us.anthropic.claude-haiku-4-5-20251001-v1:0",
                        bedrock_models="amazon.nova-pro-v1:0, amazon.nova-pro-v1:0")
    assert mixed.bedrock_model_ids() == ["us.anthropic.claude-haiku-4-5-20251001-v1:0", "amazon.nova-pro-v1:0"]
    claude = StageConfig(supervisor_model="anthropic.claude-sonnet-4-5-20250929-v1:0", summary_model="openai-chat:gpt-4o-mini")
    assert claude.uses_openai  # the summaries: its key is granted, and Bedrock does not embed then
    assert claude.bedrock_model_ids() == ["anthropic.claude-sonnet-4-5-20250929-v1:0", "amazon.nova-lite-v1:0",
                                          "amazon.nova-micro-v1:0"]
    for bad in ({"model_provider": "gemini"}, {"bedrock_models": "a b"}, {"worker_model": "x y"}):
        with pytest.raises(ConfigError):
            StageConfig(**bad).validate()


def test_a_geographic_inference_profile_is_granted_with_the_foundation_model_it_routes_to(tmp_path):
    template, _ = _synth(tmp_path, model_provider="openai-chat",
                         worker_model="bedrock:us.anthropic.claude-haiku-4-5-20251001-v1:0")
    functions = {r["Properties"].get("FunctionName"): r for r in template["Resources"].values()
                 if r["Type"] == "AWS::Lambda::Function"}
    env = functions["zerg-test-worker"]["Properties"]["Environment"]["Variables"]
    assert env["ZERG_MODEL_PROVIDER"] == "openai-chat" and "ZERG_OPENAI_SECRET_ARN" in env
    assert env["ZERG_WORKER_MODEL"] == "bedrock:us.anthropic.claude-haiku-4-5-20251001-v1:0"
    assert env["ZERG_BEDROCK_MODEL_IDS"] == "us.anthropic.claude-haiku-4-5-20251001-v1:0"
    statements = [s for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Policy"
                  for s in r["Properties"]["PolicyDocument"]["Statement"] if s["Action"] == "bedrock:InvokeModel"]
    assert len(statements) == 4  # one per model function
    resources = {json.dumps(r, sort_keys=True) for r in statements[0]["Resource"]}
    assert any("inference-profile/us.anthropic.claude-haiku-4-5-20251001-v1:0" in r for r in resources)
    assert any(":bedrock:*::foundation-model/anthropic.claude-haiku-4-5-20251001-v1:0" in r for r in resources)
    assert len(resources) == 2
