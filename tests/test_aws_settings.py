"""What the Lambdas read on AWS: the database and OpenAI secrets (moto Secrets Manager)."""

from __future__ import annotations

import json

import boto3
from moto import mock_aws
from psycopg.conninfo import conninfo_to_dict

from zerg import db
from zerg.config import load_settings
from zerg.wiring import make_llm


def test_database_url_comes_from_the_rds_secret_with_the_proxy_host_and_tls():
    with mock_aws():
        sm = boto3.client("secretsmanager", region_name="us-east-1")
        arn = sm.create_secret(Name="zerg/test/database", SecretString=json.dumps({
            "username": "zerg", "password": "p@ss word", "host": "cluster.internal", "port": 5432, "dbname": "zerg"}))["ARN"]
        settings = load_settings({"ZERG_DB_SECRET_ARN": arn, "ZERG_DB_PROXY_ENDPOINT": "proxy.internal", "HOME": "/tmp"})
        parts = conninfo_to_dict(db.database_url(settings))
    assert parts["host"] == "proxy.internal" and parts["user"] == "zerg" and parts["password"] == "p@ss word"
    assert parts["dbname"] == "zerg" and parts["sslmode"] == "require"


def test_openai_key_comes_from_its_secret_and_is_not_offline():
    with mock_aws():
        sm = boto3.client("secretsmanager", region_name="us-east-1")
        arn = sm.create_secret(Name="zerg/test/openai", SecretString="sk-test-123")["ARN"]
        settings = load_settings({"ZERG_OPENAI_SECRET_ARN": arn, "HOME": "/tmp"})
        assert not settings.offline
        model = make_llm(settings).provider(settings.default_provider)
    assert model.client.api_key == "sk-test-123"


def test_the_openai_key_is_read_once_per_runtime_for_the_model_and_the_embedder_with_short_timeouts(monkeypatch):
    from botocore.client import BaseClient

    from zerg import wiring
    from zerg.llm import keys
    from zerg.wiring import make_embedder

    reads, configs = [], []
    real_call = BaseClient._make_api_call

    def counting(self, operation, params):
        if operation == "GetSecretValue":
            reads.append(params["SecretId"])
            configs.append(self.meta.config)
        return real_call(self, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", counting)
    wiring.reset_runtime()
    with mock_aws():
        sm = boto3.client("secretsmanager", region_name="us-east-1")
        arn = sm.create_secret(Name="zerg/test/openai-once", SecretString="sk-once")["ARN"]
        settings = load_settings({"ZERG_OPENAI_SECRET_ARN": arn, "ZERG_EMBEDDINGS": "openai", "HOME": "/tmp"})
        assert make_llm(settings).provider("openai-chat").client.api_key == "sk-once"
        assert make_embedder(settings).inner.client.api_key == "sk-once"
        assert reads == [arn]  # once, shared
        assert configs[0].connect_timeout == configs[0].read_timeout == keys.SECRET_TIMEOUT_S
        assert configs[0].retries["total_max_attempts"] == 2
        wiring.reset_runtime()  # a new runtime reads it afresh (a rotated key)
        make_llm(settings)
    assert reads == [arn, arn]
