"""Web stack: the app bucket behind CloudFront (OAC), /api/* through the same distribution to the
HTTP API, the security headers, the SPA rewrite (run in node), and the file deployment."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.support.parts import need
from infra.config import ConfigError, StageConfig
from infra.stacks.web import API_ORIGIN_READ_TIMEOUT_S, SPA_FUNCTION_PATH
from infra.stacks.workflow import function_specs

# CloudFront's managed policies (ids fixed by AWS).
CACHING_DISABLED = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad"
CACHING_OPTIMIZED = "658327ea-f89d-4fab-a63d-7e88639e58f6"
ALL_VIEWER_EXCEPT_HOST_HEADER = "b689b0a8-53d0-40ab-baf2-68738e2966ac"


def _distribution(synth) -> dict:
    (distribution,) = synth.resources("Web", "AWS::CloudFront::Distribution").values()
    return distribution["Properties"]["DistributionConfig"]


def _origin(config: dict, origin_id: str) -> dict:
    (origin,) = [o for o in config["Origins"] if o["Id"] == origin_id]
    return origin


def _api_behaviour(config: dict) -> dict:
    (behaviour,) = [b for b in config["CacheBehaviors"] if b["PathPattern"] == "/api/*"]
    return behaviour


def test_the_app_bucket_is_private_encrypted_tls_only_and_read_by_the_distribution_through_oac(synth):
    (bucket_id, bucket), = synth.resources("Web", "AWS::S3::Bucket").items()
    props = bucket["Properties"]
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True, "RestrictPublicBuckets": True}
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0][
        "ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    assert "WebsiteConfiguration" not in props  # a REST origin, never the public website endpoint
    (oac,) = synth.resources("Web", "AWS::CloudFront::OriginAccessControl").values()
    assert oac["Properties"]["OriginAccessControlConfig"]["OriginAccessControlOriginType"] == "s3"
    assert oac["Properties"]["OriginAccessControlConfig"]["SigningBehavior"] == "always"
    assert synth.resources("Web", "AWS::CloudFront::CloudFrontOriginAccessIdentity") == {}

    config = _distribution(synth)
    s3_origin = _origin(config, config["DefaultCacheBehavior"]["TargetOriginId"])
    assert s3_origin["DomainName"] == {"Fn::GetAtt": [bucket_id, "RegionalDomainName"]}
    assert s3_origin["S3OriginConfig"] == {"OriginAccessIdentity": ""}
    assert "OriginAccessControlId" in s3_origin

    (policy,) = synth.resources("Web", "AWS::S3::BucketPolicy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    denies = [s for s in statements if s["Effect"] == "Deny"]
    assert {json.dumps(s["Condition"], sort_keys=True) for s in denies} == {
        json.dumps({"Bool": {"aws:SecureTransport": "false"}}), json.dumps({"NumericLessThan": {"s3:TlsVersion": 1.2}})}
    (allow,) = [s for s in statements if s["Effect"] == "Allow"]
    assert allow["Principal"] == {"Service": "cloudfront.amazonaws.com"}
    assert allow["Action"] == "s3:GetObject"  # read only, and only this distribution's requests
    (distribution_id,) = synth.resources("Web", "AWS::CloudFront::Distribution")
    assert distribution_id in json.dumps(allow["Condition"]["StringEquals"]["AWS:SourceArn"])


def test_the_app_is_served_over_https_http2_and_3_with_index_html_as_root(synth):
    config = _distribution(synth)
    assert config["DefaultRootObject"] == "index.html"
    assert config["HttpVersion"] == "http2and3"
    default = config["DefaultCacheBehavior"]
    assert default["ViewerProtocolPolicy"] == "redirect-to-https"
    assert default["AllowedMethods"] == ["GET", "HEAD"]
    assert default["CachePolicyId"] == CACHING_OPTIMIZED and default["Compress"] is True
    # No error response rewritten into the app: it would turn the API's 403/404 into a 200 page.
    assert "CustomErrorResponses" not in config


def test_api_goes_to_the_http_api_uncached_with_everything_but_host_all_methods_uncompressed(synth):
    config = _distribution(synth)
    behaviour = _api_behaviour(config)
    assert behaviour["CachePolicyId"] == CACHING_DISABLED
    assert behaviour["OriginRequestPolicyId"] == ALL_VIEWER_EXCEPT_HOST_HEADER
    assert set(behaviour["AllowedMethods"]) == {"GET", "HEAD", "OPTIONS", "PUT", "PATCH", "POST", "DELETE"}
    assert behaviour["Compress"] is False
    assert behaviour["ViewerProtocolPolicy"] == "https-only"  # a redirected POST would become a GET
    assert "FunctionAssociations" not in behaviour  # the SPA rewrite never sees /api

    origin = _origin(config, behaviour["TargetOriginId"])
    custom = origin["CustomOriginConfig"]
    assert custom["OriginProtocolPolicy"] == "https-only" and custom["OriginSSLProtocols"] == ["TLSv1.2"]
    (api_id,) = synth.resources("Api", "AWS::ApiGatewayV2::Api")
    domain = json.dumps(origin["DomainName"])
    assert f"Ref{api_id}" in domain and ".execute-api." in domain  # the Api stack's HTTP API, imported
    assert "OriginPath" not in origin or origin["OriginPath"] == ""  # /api/... reaches /api/{proxy+}


def test_the_api_origin_waits_longer_than_the_long_poll_within_cloudfronts_limit(synth):
    custom = _origin(_distribution(synth), _api_behaviour(_distribution(synth))["TargetOriginId"])["CustomOriginConfig"]
    ingress_timeout_s = function_specs()["events"].timeout.to_seconds()
    sse_poll_max_s = 29  # zerg.config: ZERG_SSE_POLL_S <= 29
    assert custom["OriginReadTimeout"] == API_ORIGIN_READ_TIMEOUT_S
    assert max(ingress_timeout_s, sse_poll_max_s, 30) < API_ORIGIN_READ_TIMEOUT_S <= 60


def test_every_response_carries_a_strict_csp_hsts_nosniff_and_no_framing(synth):
    (policy_id, policy), = synth.resources("Web", "AWS::CloudFront::ResponseHeadersPolicy").items()
    security = policy["Properties"]["ResponseHeadersPolicyConfig"]["SecurityHeadersConfig"]
    csp = dict(part.split(" ", 1) for part in security["ContentSecurityPolicy"]["ContentSecurityPolicy"].split("; "))
    assert csp["default-src"] == csp["script-src"] == csp["connect-src"] == csp["style-src"] == "'self'"
    assert csp["frame-ancestors"] == "'none'" and csp["object-src"] == "'none'"
    assert not any("unsafe" in value or "*" in value or "http" in value for value in csp.values())
    assert security["StrictTransportSecurity"]["AccessControlMaxAgeSec"] >= 365 * 86400
    assert security["ContentTypeOptions"] == {"Override": True}
    assert security["FrameOptions"]["FrameOption"] == "DENY"
    assert security["ReferrerPolicy"]["ReferrerPolicy"] == "same-origin"
    assert all(header["Override"] for header in security.values())
    config = _distribution(synth)
    for behaviour in [config["DefaultCacheBehavior"], *config["CacheBehaviors"]]:
        assert behaviour["ResponseHeadersPolicyId"] == {"Ref": policy_id}


def test_deep_links_get_the_spa_rewrite_at_viewer_request(synth):
    (function_id, function), = synth.resources("Web", "AWS::CloudFront::Function").items()
    assert function["Properties"]["FunctionConfig"]["Runtime"] == "cloudfront-js-2.0"
    assert function["Properties"]["FunctionCode"] == SPA_FUNCTION_PATH.read_text()
    (association,) = _distribution(synth)["DefaultCacheBehavior"]["FunctionAssociations"]
    assert association == {"EventType": "viewer-request", "FunctionARN": {"Fn::GetAtt": [function_id, "FunctionARN"]}}


def test_the_spa_rewrite_serves_the_app_for_routes_and_leaves_files_and_the_api_alone():
    # the README's commands need Node; CDK does too
    need(None if shutil.which("node") else "no node to run the CloudFront Function's JavaScript", "the SPA rewrite test")
    script = SPA_FUNCTION_PATH.read_text() + """
const cases = JSON.parse(process.argv[1]);
console.log(JSON.stringify(cases.map(uri => handler({request: {uri, method: 'GET', headers: {}}}).uri)));
"""
    cases = {
        "/": "/index.html",
        "/dashboard": "/index.html",
        "/dashboard/workers/abc-123": "/index.html",
        "/index.html": "/index.html",
        "/assets/index-3f2a9c.js": "/assets/index-3f2a9c.js",
        "/sw.js": "/sw.js",
        "/favicon.svg": "/favicon.svg",
        "/api/jarvis/runs": "/api/jarvis/runs",
        "/api": "/api",
        "/apiary": "/index.html",  # only the /api path itself, not a prefix of a word
    }
    result = subprocess.run(["node", "-e", script, json.dumps(list(cases))], capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 0, result.stderr
    assert dict(zip(cases, json.loads(result.stdout))) == cases


def test_hashed_assets_are_cached_for_a_year_and_pages_are_not_then_index_html_is_invalidated(synth):
    deployments = synth.resources("Web", "Custom::CDKBucketDeployment")
    assets = next(d["Properties"] for k, d in deployments.items() if k.startswith("DeployAssets"))
    pages_id, pages = next((k, d) for k, d in deployments.items() if k.startswith("DeployPages"))
    assert (assets["Exclude"], assets["Include"], assets["Prune"]) == (["*"], ["assets/*"], False)
    assert assets["SystemMetadata"]["cache-control"] == "public, max-age=31536000, immutable"
    assert "DistributionId" not in assets
    props = pages["Properties"]
    assert props["Exclude"] == ["assets/*"] and props["Prune"] is True  # old chunks stay for open pages
    assert props["SystemMetadata"]["cache-control"] == "no-cache"
    (distribution_id,) = synth.resources("Web", "AWS::CloudFront::Distribution")
    assert props["DistributionId"] == {"Ref": distribution_id} and props["DistributionPaths"] == ["/index.html"]
    # Pages go up only after the assets they name.
    assets_id = next(k for k in deployments if k.startswith("DeployAssets"))
    assert assets_id in pages.get("DependsOn", [])
    # Both deploy the same built directory: one asset.
    assert assets["SourceObjectKeys"] == props["SourceObjectKeys"]


def test_outputs_name_the_web_url_and_the_distribution(synth):
    outputs = synth.templates["Web"]["Outputs"]
    assert {"WebUrl", "DistributionId", "WebBucketName"} <= set(outputs)
    (distribution_id,) = synth.resources("Web", "AWS::CloudFront::Distribution")
    assert outputs["WebUrl"]["Value"] == {"Fn::Join": ["", ["https://", {"Fn::GetAtt": [distribution_id, "DomainName"]}]]}
    assert "WebAppNotDeployed" not in outputs


def _synth_web(base: dict, tmp_path, **context) -> dict:
    """The app synthesized again with ``context`` over the shared synth's: the Web stack's template
    and its messages (annotations)."""
    from aws_cdk import App

    from infra.app import build

    app = App(outdir=str(tmp_path / "out"), context={**base, **context}, builtin_cloud_formation_validation=False)
    stacks = build(app)
    assembly = app.synth()
    template = assembly.get_stack_by_name(stacks.web.stack_name).template
    messages = [m for m in assembly.get_stack_by_name(stacks.web.stack_name).messages]
    return {"template": template, "messages": messages}


@pytest.fixture(scope="module")
def without_dist(synth, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("no-dist")
    return _synth_web(synth.context, tmp_path, web_dist=str(tmp_path / "missing"))


def test_without_a_built_app_synth_still_works_and_says_how_to_build_it(without_dist):
    template = without_dist["template"]
    types = {r["Type"] for r in template["Resources"].values()}
    assert "Custom::CDKBucketDeployment" not in types and "AWS::Lambda::Function" not in types
    assert "AWS::CloudFront::Distribution" in types  # the rest of the stack is there
    hint = template["Outputs"]["WebAppNotDeployed"]["Value"]
    assert "npm ci && npm run build" in hint
    infos = [m.entry.data for m in without_dist["messages"] if m.level.value.lower() == "info"]
    assert any("npm run build" in str(info) for info in infos)
    assert not [m for m in without_dist["messages"] if m.level.value.lower() in ("warning", "error")]


def test_a_custom_domain_uses_its_us_east_1_certificate_and_modern_tls(synth, tmp_path):
    arn = "arn:aws:acm:us-east-1:123456789012:certificate/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
    template = _synth_web(synth.context, tmp_path, web_domain="jarvis.zerg.test", web_certificate_arn=arn,
                          web_dist=str(tmp_path / "missing"))["template"]
    (distribution,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::CloudFront::Distribution"]
    config = distribution["Properties"]["DistributionConfig"]
    assert config["Aliases"] == ["jarvis.zerg.test"]
    assert config["ViewerCertificate"] == {"AcmCertificateArn": arn, "MinimumProtocolVersion": "TLSv1.2_2021",
                                           "SslSupportMethod": "sni-only"}
    assert template["Outputs"]["WebUrl"]["Value"] == "https://jarvis.zerg.test"


@pytest.mark.parametrize("changes", [
    {"web_domain": "jarvis.zerg.test"},  # a domain needs its certificate
    {"web_certificate_arn": "arn:aws:acm:us-east-1:123456789012:certificate/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"},
    {"web_domain": "jarvis.zerg.test",  # CloudFront takes certificates from us-east-1 only
     "web_certificate_arn": "arn:aws:acm:eu-west-1:123456789012:certificate/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"},
    {"web_domain": "https://jarvis.zerg.test", "web_certificate_arn": "arn:aws:acm:us-east-1:123456789012:"
                                                                     "certificate/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"},
    {"web_dist": "  "},
])
def test_bad_web_settings_fail_the_synth_naming_the_key(changes):
    with pytest.raises(ConfigError, match="web_"):
        StageConfig().replace(**changes)


def test_a_custom_domain_is_where_alert_links_point_unless_public_url_says_otherwise():
    arn = "arn:aws:acm:us-east-1:123456789012:certificate/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
    on_domain = StageConfig(web_domain="jarvis.zerg.test", web_certificate_arn=arn).validate()
    assert on_domain.links_base == "https://jarvis.zerg.test"
    assert on_domain.replace(public_url="https://api.zerg.test").links_base == "https://api.zerg.test"
    assert StageConfig().links_base == StageConfig().jarvis_origin


def test_the_session_cookie_is_host_only_under_api_which_the_api_behaviour_forwards(synth):
    # Host-only (no Domain), Path=/api: on the distribution's host it is sent with exactly the
    # requests the /api/* behaviour forwards with every cookie (all-viewer-except-host), first-party.
    from zerg.api.routes import auth

    cookie = str(auth._cookie("token", 60))
    attributes = {part.strip().split("=")[0].lower(): part.strip() for part in cookie.split(";")[1:]}
    assert attributes["path"] == "Path=/api" and "domain" not in attributes
    assert {"secure", "httponly"} <= set(attributes) and attributes["samesite"] == "SameSite=Strict"
    behaviour = _api_behaviour(_distribution(synth))
    assert behaviour["PathPattern"] == "/api/*"
    assert behaviour["OriginRequestPolicyId"] == ALL_VIEWER_EXCEPT_HOST_HEADER
