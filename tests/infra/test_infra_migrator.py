"""The deploy-time migrator against a real PostgreSQL, with its secret in (moto) Secrets Manager."""

from __future__ import annotations

import json

import psycopg
import pytest

from infra.migrator import handler


@pytest.fixture
def db_secret(make_database, monkeypatch):
    """A fresh database described the way the Aurora secret describes it, plus its host."""
    import boto3
    from moto import mock_aws

    info = psycopg.conninfo.conninfo_to_dict(make_database())
    secret = {"username": info["user"], "password": info.get("password", ""),
              "dbname": info["dbname"], "port": int(info.get("port", 5432)), "engine": "postgres"}
    with mock_aws():
        arn = boto3.client("secretsmanager", region_name="us-east-1").create_secret(
            Name="zerg/test/database", SecretString=json.dumps(secret))["ARN"]
        monkeypatch.setenv("ZERG_DB_SECRET_ARN", arn)
        # On AWS this is the RDS Proxy host; here the embedded server's socket dir or host.
        monkeypatch.setenv("ZERG_DB_PROXY_ENDPOINT", info.get("host", "localhost"))
        yield info


def test_create_applies_migrations_and_update_is_a_no_op(db_secret):
    created = handler.on_event({"RequestType": "Create"})
    assert created["PhysicalResourceId"] == handler.PHYSICAL_ID
    assert created["Data"]["Applied"] >= 1 and created["Data"]["SchemaVersion"] >= 1
    updated = handler.on_event({"RequestType": "Update", "PhysicalResourceId": handler.PHYSICAL_ID})
    assert updated["Data"] == {"SchemaVersion": created["Data"]["SchemaVersion"], "Applied": 0}
    conninfo = psycopg.conninfo.make_conninfo(**db_secret)
    with psycopg.connect(conninfo) as conn:
        assert conn.execute("SELECT extname FROM pg_extension WHERE extname = 'vector'").fetchone()


def test_delete_leaves_the_schema_alone(monkeypatch):
    monkeypatch.delenv("ZERG_DB_SECRET_ARN", raising=False)  # would fail if it connected
    event = {"RequestType": "Delete", "PhysicalResourceId": handler.PHYSICAL_ID}
    assert handler.on_event(event) == {"PhysicalResourceId": handler.PHYSICAL_ID}


def test_connection_info_requires_tls():
    info = psycopg.conninfo.conninfo_to_dict(handler.connection_info(
        {"username": "zerg", "password": "p", "dbname": "zerg", "port": 5432}, "proxy.example"))
    assert info["sslmode"] == "require" and info["host"] == "proxy.example"
