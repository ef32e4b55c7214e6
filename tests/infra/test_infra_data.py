"""Data stack: network, database, proxy, secrets and the artifact bucket's security properties."""

from __future__ import annotations

import json

from aws_cdk.assertions import Match


def test_bucket_is_private_encrypted_versioned(synth):
    synth.assertion("Data").has_resource_properties("AWS::S3::Bucket", {
        "BucketEncryption": {"ServerSideEncryptionConfiguration": [
            {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]},
        "PublicAccessBlockConfiguration": {
            "BlockPublicAcls": True, "BlockPublicPolicy": True,
            "IgnorePublicAcls": True, "RestrictPublicBuckets": True},
        "VersioningConfiguration": {"Status": "Enabled"},
        "OwnershipControls": {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]},
        "LifecycleConfiguration": {"Rules": Match.array_with([Match.object_like(
            {"Prefix": "inbound/", "ExpirationInDays": 30, "Status": "Enabled"})])},
    })


def test_bucket_policy_denies_plain_http_and_only_lets_ses_write_inbound_mail(synth):
    (policy,) = synth.resources("Data", "AWS::S3::BucketPolicy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    deny_http = [s for s in statements if s["Effect"] == "Deny"
                 and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}]
    assert deny_http and deny_http[0]["Action"] == "s3:*" and deny_http[0]["Principal"] == {"AWS": "*"}
    allows = [s for s in statements if s["Effect"] == "Allow"]
    assert len(allows) == 1, "only SES gets a resource-policy grant; functions use their roles"
    (ses,) = allows
    assert ses["Principal"] == {"Service": "ses.amazonaws.com"} and ses["Action"] == "s3:PutObject"
    assert json.dumps(ses["Resource"]).endswith('"/inbound/email/*"]]}')
    assert "aws:SourceAccount" in ses["Condition"]["StringEquals"]


def test_vpc_has_one_nat_and_endpoints_for_aws_apis(synth):
    assert len(synth.resources("Data", "AWS::EC2::NatGateway")) == 1
    endpoints = synth.resources("Data", "AWS::EC2::VPCEndpoint").values()
    services = {}
    for ep in endpoints:
        name = json.dumps(ep["Properties"]["ServiceName"])
        services[name.split(".")[-1].strip('"]}')] = ep["Properties"].get("VpcEndpointType", "Gateway")
    for interface in ("secretsmanager", "states", "sns", "email", "kms"):
        assert services.get(interface) == "Interface", services
    assert any(v == "Gateway" for v in services.values())  # S3
    for ep in endpoints:
        if ep["Properties"].get("VpcEndpointType") == "Interface":
            assert ep["Properties"]["PrivateDnsEnabled"] is True


def test_aurora_serverless_v2_postgres_with_pgvector_is_encrypted_and_private(synth):
    template = synth.assertion("Data")
    template.has_resource_properties("AWS::RDS::DBCluster", {
        "Engine": "aurora-postgresql",
        "EngineVersion": Match.string_like_regexp(r"^1[6-9]\."),
        "StorageEncrypted": True,
        "DatabaseName": "zerg",
        "ServerlessV2ScalingConfiguration": {"MinCapacity": 0.5, "MaxCapacity": 4},
    })
    template.has_resource_properties("AWS::RDS::DBInstance", {
        "DBInstanceClass": "db.serverless", "PubliclyAccessible": False})
    template.has_resource_properties("AWS::SecretsManager::SecretTargetAttachment", {
        "TargetType": "AWS::RDS::DBCluster"})


def test_aurora_is_postgresql_16_at_a_minor_whose_pgvector_has_iterative_scans(synth):
    """16: the major the migrations are tested on (tests/test_migrations.py). 16.8+: Aurora's
    release notes list pgvector 0.8.0 from 16.8 on (16.6 has 0.7.4); memory search's owner filter
    relies on 0.8's iterative index scans."""
    (cluster,) = synth.resources("Data", "AWS::RDS::DBCluster").values()
    version = cluster["Properties"]["EngineVersion"]
    major, minor = (int(part) for part in version.split(".")[:2])
    assert version == "16.9" and major == 16 and minor >= 8


def test_proxy_requires_tls_and_only_functions_reach_it(synth):
    synth.assertion("Data").has_resource_properties("AWS::RDS::DBProxy", {
        "EngineFamily": "POSTGRESQL", "RequireTLS": True, "DBProxyName": "zerg-test-db",
        "Auth": [Match.object_like({"AuthScheme": "SECRETS", "IAMAuth": "DISABLED"})],
    })
    ingress = synth.resources("Data", "AWS::EC2::SecurityGroupIngress").values()
    to_proxy = [r["Properties"] for r in ingress
                if "Proxy" in json.dumps(r["Properties"]["GroupId"])]
    assert len(to_proxy) == 1
    assert to_proxy[0]["FromPort"] == to_proxy[0]["ToPort"] == 5432
    assert "FunctionsSecurityGroup" in json.dumps(to_proxy[0]["SourceSecurityGroupId"])


def test_secrets_and_outputs(synth):
    names = {r["Properties"].get("Name") for r in synth.resources("Data", "AWS::SecretsManager::Secret").values()}
    assert {"zerg/test/database", "zerg/test/jwt", "zerg/test/openai"} <= names
    assert "ArtifactBucketName" in synth.templates["Data"]["Outputs"]


def test_host_keys_have_their_own_rotated_retained_kms_key(synth):
    (key,) = synth.resources("Data", "AWS::KMS::Key").values()
    assert key["Properties"]["EnableKeyRotation"] is True
    assert key["DeletionPolicy"] == "Retain" and key["UpdateReplacePolicy"] == "Retain"
    (alias,) = synth.resources("Data", "AWS::KMS::Alias").values()
    assert alias["Properties"]["AliasName"] == "alias/zerg/test/host-keys"
