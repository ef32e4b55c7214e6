"""Data: the network, Aurora PostgreSQL (pgvector) behind RDS Proxy, secrets, the artifact bucket.

Invariants:
- The database lives in isolated subnets; only the RDS Proxy reaches it, and only the
  functions security group reaches the proxy (TLS required).
- AWS API traffic (S3, Secrets Manager, Step Functions, SNS, SES) uses VPC endpoints; the NAT
  gateway is for the internet the workers and the supervisor need (LLM API, SSH hosts).
- The artifact bucket is private, encrypted, versioned and TLS-only; inbound mail under
  ``inbound/`` expires, worker artifacts never do (they are the evidence).
- Owners' SSH private keys are sealed with their own KMS key (rotated yearly, retained on stack
  deletion: a database snapshot's sealed keys are useless without it).
"""

from __future__ import annotations

from aws_cdk import CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_rds as rds
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.config import StageConfig

DATABASE_NAME = "zerg"
POSTGRES_PORT = 5432
# Aurora PostgreSQL 16 (the migrations avoid PostgreSQL 17/18-only SQL and are tested on a real
# 16: tests/test_migrations.py). The minor must be 16.8 or later: Aurora 16.8 updated pgvector
# to 0.8.0 (iterative index scans, which owner-filtered memory search relies on; 16.6 has 0.7.4),
# per the Aurora PostgreSQL release notes. 16.9 ships pgvector 0.8.0 and is a minor cfn-lint does
# not flag as deprecated. tests/infra/test_infra_data.py pins both facts.
ENGINE_VERSION = rds.AuroraPostgresEngineVersion.VER_16_9
INTERFACE_ENDPOINTS = {
    "SecretsManager": ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
    "StepFunctions": ec2.InterfaceVpcEndpointAwsService.STEP_FUNCTIONS,
    "Sns": ec2.InterfaceVpcEndpointAwsService.SNS,
    # The SES API (email.<region>), which boto3's sesv2 client calls; not the SMTP endpoint.
    "Ses": ec2.InterfaceVpcEndpointAwsService.EMAIL,
    "Kms": ec2.InterfaceVpcEndpointAwsService.KMS,  # sealing and opening owners' SSH keys
}
PRIVATE = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
ISOLATED = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)


class DataStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        self._network()
        self._database()
        self._secrets()
        self._bucket()
        CfnOutput(self, "ArtifactBucketName", value=self.bucket.bucket_name)
        CfnOutput(self, "DbProxyEndpoint", value=self.proxy.endpoint)

    def _network(self) -> None:
        self.vpc = ec2.Vpc(
            self, "Vpc",
            max_azs=2,
            nat_gateways=self.config.nat_gateways,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24),
                ec2.SubnetConfiguration(name="app", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=22),
                ec2.SubnetConfiguration(name="db", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=24),
            ],
            gateway_endpoints={
                "S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3),
            },
        )
        for name, service in INTERFACE_ENDPOINTS.items():
            # open=True (default): the endpoint accepts 443 from inside the VPC only.
            self.vpc.add_interface_endpoint(name, service=service, subnets=PRIVATE, private_dns_enabled=True)
        self.functions_sg = ec2.SecurityGroup(
            self, "FunctionsSecurityGroup",
            vpc=self.vpc,
            description="Zerg Lambda functions: egress to AWS endpoints, the DB proxy and the internet",
            allow_all_outbound=True,
        )

    def _database(self) -> None:
        self.cluster = rds.DatabaseCluster(
            self, "Database",
            engine=rds.DatabaseClusterEngine.aurora_postgres(version=ENGINE_VERSION),
            credentials=rds.Credentials.from_generated_secret(
                "zerg", secret_name=f"zerg/{self.config.stage}/database"
            ),
            default_database_name=DATABASE_NAME,
            writer=rds.ClusterInstance.serverless_v2("Writer"),
            serverless_v2_min_capacity=self.config.db_min_capacity,
            serverless_v2_max_capacity=self.config.db_max_capacity,
            vpc=self.vpc,
            vpc_subnets=ISOLATED,
            storage_encrypted=True,
            backup=rds.BackupProps(retention=Duration.days(7 if self.config.is_prod else 1)),
            deletion_protection=self.config.is_prod,
            removal_policy=RemovalPolicy.SNAPSHOT,
        )
        # RDS Proxy, not the Data API: the core library speaks the PostgreSQL wire protocol
        # through psycopg 3 (the same code path as the local runtime), which the Data API
        # cannot serve without a second database adapter. The proxy also pools connections
        # across the Map fan-out's concurrent Lambdas, so Aurora's connection count stays flat.
        # (add_proxy also opens the cluster's security group to the proxy's.)
        self.proxy = self.cluster.add_proxy(
            "Proxy",
            db_proxy_name=self.config.prefix("db"),
            secrets=[self.cluster.secret],
            vpc=self.vpc,
            vpc_subnets=ISOLATED,
            require_tls=True,
        )
        self.proxy.connections.allow_from(self.functions_sg, ec2.Port.tcp(POSTGRES_PORT), "Zerg functions to RDS Proxy")

    def _secrets(self) -> None:
        self.db_secret = self.cluster.secret
        self.jwt_secret = secretsmanager.Secret(
            self, "JwtSecret",
            secret_name=f"zerg/{self.config.stage}/jwt",
            description="Signing key for Jarvis session tokens (ingress function only)",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=64, exclude_punctuation=True
            ),
        )
        self.openai_secret = secretsmanager.Secret(
            self, "OpenAiSecret",
            secret_name=f"zerg/{self.config.stage}/openai",
            description="OpenAI API key: replace the generated placeholder after the first deploy",
        )
        # Anthropic's key, only for a stage whose models include Anthropic's (model_provider=anthropic or an
        # anthropic: model): the same placeholder, replaced after the first deploy.
        self.anthropic_secret = secretsmanager.Secret(
            self, "AnthropicSecret",
            secret_name=f"zerg/{self.config.stage}/anthropic",
            description="Anthropic API key: replace the generated placeholder after the first deploy",
        ) if self.config.uses_anthropic else None

        self.host_keys_key = kms.Key(
            self, "HostKeysKey",
            alias=f"alias/zerg/{self.config.stage}/host-keys",
            description="Seals owners' SSH private keys; every use names the owner (encryption context zerg_owner_id)",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.RETAIN,
        )

    def _bucket(self) -> None:
        self.bucket = s3.Bucket(
            self, "Artifacts",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            minimum_tls_version=1.2,
            versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-inbound",
                    prefix="inbound/",
                    expiration=Duration.days(self.config.inbound_retention_days),
                    noncurrent_version_expiration=Duration.days(1),
                ),
                s3.LifecycleRule(
                    id="trim-old-versions",
                    noncurrent_version_expiration=Duration.days(30),
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                ),
            ],
            removal_policy=RemovalPolicy.RETAIN,
        )
