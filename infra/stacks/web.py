"""Web: the Jarvis web app (``web/dist``) in a private bucket behind CloudFront, and ``/api/*``
through the same distribution to the HTTP API.

Invariants:
- One origin for the browser: the app and ``/api/*`` share the distribution's host, so the
  session cookie (``Path=/api; Secure; HttpOnly; SameSite=Strict``) is first-party and EventSource
  needs no cross-site credentials (no CORS on the app's own requests).
- The bucket is private (all public access blocked, TLS only, SSE-S3); only this distribution
  reads it, through Origin Access Control (a bucket policy conditioned on its ARN), never an OAI.
- ``/api/*`` is never cached and reaches API Gateway with everything the viewer sent but Host
  (cookies, query strings, Authorization, Last-Event-ID); every method is allowed; CloudFront does
  not compress it (a long-poll's ``text/event-stream`` body arrives as the function wrote it).
  The origin's read timeout is above what API Gateway itself waits for the ingress function, so a
  long-poll ends at the API, not at the edge.
- Any other extension-less path is the app (a CloudFront Function rewrites it to /index.html at
  viewer request); ``/api`` is never rewritten, and no error response is turned into the app (a
  403/404 from the API stays what it is).
- Every response carries the security headers (strict CSP: everything from 'self', connect-src
  'self', frame-ancestors 'none'; HSTS; nosniff; a referrer policy).
- The files are deployed only when the built app exists at synth time; hashed ``assets/*`` are
  cached for a year (immutable), everything else (index.html, sw.js) is ``no-cache`` and
  /index.html is invalidated on each deploy.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Annotations, Aws, CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudfront_origins as origins
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct

from infra.components.function import retention
from infra.config import StageConfig

ROOT = Path(__file__).resolve().parents[2]
SPA_FUNCTION_PATH = ROOT / "infra" / "web" / "spa_rewrite.js"
API_PATH_PATTERN = "/api/*"
ASSETS_PATTERN = "assets/*"  # Vite's content-hashed output (build.assetsDir)
INDEX = "index.html"
BUILD_HINT = "cd web && npm ci && npm run build"

# API Gateway HTTP APIs give up on an integration after 30 s (a hard limit; the ingress function's
# own timeout, 29 s, and the long-poll, ZERG_SSE_POLL_S <= 29 s, are below it). CloudFront waits a
# little longer so the API's answer (or its 504) always arrives; 60 s is CloudFront's default
# maximum without a quota increase.
API_GATEWAY_TIMEOUT_S = 30
API_ORIGIN_READ_TIMEOUT_S = API_GATEWAY_TIMEOUT_S + 5

# Everything from the app's own origin: the bundle has no CDN links, the API is same-origin.
# img-src allows data:/blob: (inline SVG chart exports, icons); style attributes set through the
# DOM (Preact, charts) are not inline <style> and need no 'unsafe-inline'.
CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data: blob:",
    "font-src 'self'",
    "connect-src 'self'",
    "worker-src 'self'",
    "manifest-src 'self'",
    "media-src 'self' blob:",
    "object-src 'none'",
    "base-uri 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
])
# Speech input needs the microphone, for this origin only; nothing else the page may ask for.
PERMISSIONS_POLICY = "microphone=(self), camera=(), geolocation=(), payment=(), usb=()"
ASSET_CACHE = [s3deploy.CacheControl.set_public(), s3deploy.CacheControl.max_age(Duration.days(365)),
               s3deploy.CacheControl.immutable()]
PAGE_CACHE = [s3deploy.CacheControl.no_cache()]


def web_dist(config: StageConfig) -> Path:
    path = Path(config.web_dist)
    return path if path.is_absolute() else ROOT / path


def dist_is_built(dist: Path) -> bool:
    return (dist / INDEX).is_file()


class WebStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig,
                 api: apigw.HttpApi, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        self.bucket = s3.Bucket(
            self, "App",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            minimum_tls_version=1.2,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            # Build output, redeployable at any time; retained like every Zerg bucket rather than
            # emptied by a custom resource on stack deletion.
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.headers = self._security_headers()
        self.spa_rewrite = cloudfront.Function(
            self, "SpaRewrite",
            function_name=config.prefix("web-spa-rewrite"),
            comment="Deep links into the single-page app are served /index.html (never /api)",
            code=cloudfront.FunctionCode.from_file(file_path=str(SPA_FUNCTION_PATH)),
            runtime=cloudfront.FunctionRuntime.JS_2_0,
        )
        self.distribution = self._distribution(api)
        url = f"https://{config.web_domain}" if config.web_domain else \
            f"https://{self.distribution.distribution_domain_name}"
        self.dist = web_dist(config)
        self.deployments = self._deploy_files(self.dist)
        CfnOutput(self, "WebUrl", value=url, description="The Jarvis web app (and /api) through CloudFront")
        CfnOutput(self, "DistributionId", value=self.distribution.distribution_id)
        CfnOutput(self, "WebBucketName", value=self.bucket.bucket_name)

    def _security_headers(self) -> cloudfront.ResponseHeadersPolicy:
        return cloudfront.ResponseHeadersPolicy(
            self, "SecurityHeaders",
            response_headers_policy_name=self.config.prefix("web-security-headers"),
            comment="Zerg web app: strict CSP (self only), HSTS, nosniff, no framing",
            security_headers_behavior=cloudfront.ResponseSecurityHeadersBehavior(
                content_security_policy=cloudfront.ResponseHeadersContentSecurityPolicy(
                    content_security_policy=CONTENT_SECURITY_POLICY, override=True),
                strict_transport_security=cloudfront.ResponseHeadersStrictTransportSecurity(
                    access_control_max_age=Duration.days(730), include_subdomains=True, override=True),
                content_type_options=cloudfront.ResponseHeadersContentTypeOptions(override=True),
                frame_options=cloudfront.ResponseHeadersFrameOptions(
                    frame_option=cloudfront.HeadersFrameOption.DENY, override=True),
                referrer_policy=cloudfront.ResponseHeadersReferrerPolicy(
                    referrer_policy=cloudfront.HeadersReferrerPolicy.SAME_ORIGIN, override=True),
            ),
            custom_headers_behavior=cloudfront.ResponseCustomHeadersBehavior(custom_headers=[
                cloudfront.ResponseCustomHeader(header="Permissions-Policy", value=PERMISSIONS_POLICY, override=True),
                cloudfront.ResponseCustomHeader(header="Cross-Origin-Opener-Policy", value="same-origin",
                                                override=True),
            ]),
        )

    def _distribution(self, api: apigw.HttpApi) -> cloudfront.Distribution:
        config = self.config
        api_origin = origins.HttpOrigin(
            f"{api.api_id}.execute-api.{Aws.REGION}.{Aws.URL_SUFFIX}",
            protocol_policy=cloudfront.OriginProtocolPolicy.HTTPS_ONLY,
            origin_ssl_protocols=[cloudfront.OriginSslPolicy.TLS_V1_2],
            read_timeout=Duration.seconds(API_ORIGIN_READ_TIMEOUT_S),
        )
        domain = {}
        if config.web_domain:
            domain = {
                "domain_names": [config.web_domain],
                "certificate": acm.Certificate.from_certificate_arn(self, "Certificate", config.web_certificate_arn),
                "minimum_protocol_version": cloudfront.SecurityPolicyProtocol.TLS_V1_2_2021,
            }
        return cloudfront.Distribution(
            self, "Distribution",
            comment=f"Zerg {config.stage}: the Jarvis web app, and /api/* to the HTTP API",
            default_root_object=INDEX,
            http_version=cloudfront.HttpVersion.HTTP2_AND_3,
            price_class=cloudfront.PriceClass.PRICE_CLASS_100,
            default_behavior=cloudfront.BehaviorOptions(
                origin=origins.S3BucketOrigin.with_origin_access_control(self.bucket),
                viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
                allowed_methods=cloudfront.AllowedMethods.ALLOW_GET_HEAD,
                cache_policy=cloudfront.CachePolicy.CACHING_OPTIMIZED,
                compress=True,
                response_headers_policy=self.headers,
                function_associations=[cloudfront.FunctionAssociation(
                    function=self.spa_rewrite, event_type=cloudfront.FunctionEventType.VIEWER_REQUEST)],
            ),
            additional_behaviors={
                API_PATH_PATTERN: cloudfront.BehaviorOptions(
                    origin=api_origin,
                    # Not a redirect: a browser turns a redirected POST into a GET. The app is on
                    # https, so its own requests never need one.
                    viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.HTTPS_ONLY,
                    allowed_methods=cloudfront.AllowedMethods.ALLOW_ALL,
                    cache_policy=cloudfront.CachePolicy.CACHING_DISABLED,
                    origin_request_policy=cloudfront.OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
                    compress=False,
                    response_headers_policy=self.headers,
                ),
            },
            **domain,
        )

    def _deploy_files(self, dist: Path) -> list[s3deploy.BucketDeployment]:
        if not dist_is_built(dist):
            message = (f"The web app is not built ({dist / INDEX} is missing): the distribution is deployed "
                       f"without it. Run `{BUILD_HINT}`, then deploy again.")
            Annotations.of(self).add_info(message)
            CfnOutput(self, "WebAppNotDeployed", value=message)
            return []
        source = s3deploy.Source.asset(str(dist))
        log_group = logs.LogGroup(self, "DeploymentLogs", retention=retention(self.config),
                                  removal_policy=RemovalPolicy.DESTROY)
        # Hashed assets first (never pruned: a page loaded before this deploy still finds its
        # chunks), then the pages that name them, which replace the old ones.
        assets = s3deploy.BucketDeployment(
            self, "DeployAssets",
            destination_bucket=self.bucket, sources=[source],
            exclude=["*"], include=[ASSETS_PATTERN],
            cache_control=ASSET_CACHE,
            prune=False,
            log_group=log_group,
        )
        pages = s3deploy.BucketDeployment(
            self, "DeployPages",
            destination_bucket=self.bucket, sources=[source],
            exclude=[ASSETS_PATTERN],
            cache_control=PAGE_CACHE,
            prune=True,  # stale pages go; excluded assets/* are left alone
            distribution=self.distribution,
            distribution_paths=[f"/{INDEX}"],
            log_group=log_group,
        )
        pages.node.add_dependency(assets)
        return [assets, pages]
