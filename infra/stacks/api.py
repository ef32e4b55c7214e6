"""API: the HTTP API in front of the ingress (``events``) function.

Invariants:
- Every ``/api/...`` request reaches the ingress function, whose router is the single list of
  routes (and authenticates the owner itself); API Gateway only throttles and answers CORS
  preflights for the one configured Jarvis origin.
- ``POST /mcp`` (Zerg as an MCP server, docs/mcp.md) reaches the same function through the same
  integration: it is one more route of that router, with the same bearer sessions and the same
  stage throttling; its exchange is bounded below the function's 29 s (``EXCHANGE_LIMIT_S``).
  No function of its own: the layout is the four functions, and a second copy of the API's
  code and cold start would buy nothing.
"""

from __future__ import annotations

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_lambda as lambda_
from aws_cdk.aws_apigatewayv2_integrations import HttpLambdaIntegration
from constructs import Construct

from infra.config import StageConfig

ROUTE_PATH = "/api/{proxy+}"
MCP_PATH = "/mcp"  # zerg.api.mcpserver.http.PATH
ROUTE_METHODS = (
    apigw.HttpMethod.GET, apigw.HttpMethod.POST, apigw.HttpMethod.PUT,
    apigw.HttpMethod.PATCH, apigw.HttpMethod.DELETE,
)


class ApiStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig,
                 ingress: lambda_.IFunction, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.api = apigw.HttpApi(
            self, "Api",
            api_name=config.prefix("api"),
            create_default_stage=False,
            cors_preflight=apigw.CorsPreflightOptions(
                allow_origins=[config.jarvis_origin],
                allow_methods=[apigw.CorsHttpMethod(m.value) for m in ROUTE_METHODS],
                # x-zerg-client: the web app sends it with every request (with the Origin, the proof a
                # cookie session needs to change anything: zerg.api.security).
                allow_headers=["authorization", "content-type", "last-event-id", "x-zerg-client"],
                allow_credentials=True,  # the Jarvis session cookie
                max_age=Duration.hours(1),
            ),
        )
        self.stage = apigw.HttpStage(
            self, "DefaultStage",
            http_api=self.api,
            stage_name="$default",
            auto_deploy=True,
            throttle=apigw.ThrottleSettings(
                rate_limit=config.api_rate_limit, burst_limit=config.api_burst_limit
            ),
        )
        integration = HttpLambdaIntegration("Ingress", ingress)
        self.api.add_routes(path=ROUTE_PATH, methods=list(ROUTE_METHODS), integration=integration)
        self.api.add_routes(path=MCP_PATH, methods=[apigw.HttpMethod.POST], integration=integration)
        CfnOutput(self, "ApiUrl", value=self.stage.url)
