"""Deploy-time schema migration: the ``onEvent`` handler of a CloudFormation custom resource.

Invariants:
- Create and Update apply pending migrations with ``zerg.migrate.migrate`` (idempotent and
  serialised by an advisory lock, so a retried deploy is safe); Delete changes nothing, because
  the schema and its data outlive the stack.
- Credentials come from the cluster secret at run time and never reach the response or logs.
- A migration error fails the deploy (the exception propagates to the Provider framework).
"""

from __future__ import annotations

import json
import os
from typing import Any

PHYSICAL_ID = "zerg-schema"


def connection_info(secret: dict[str, Any], host: str) -> str:
    from psycopg.conninfo import make_conninfo

    return make_conninfo(
        host=host,
        port=secret.get("port", 5432),
        dbname=secret.get("dbname", "zerg"),
        user=secret["username"],
        password=secret["password"],
        sslmode="require",  # the RDS Proxy refuses plain connections
        connect_timeout=30,
    )


def _read_secret(arn: str) -> dict[str, Any]:
    import boto3

    return json.loads(boto3.client("secretsmanager").get_secret_value(SecretId=arn)["SecretString"])


def on_event(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    if event["RequestType"] == "Delete":
        return {"PhysicalResourceId": event.get("PhysicalResourceId", PHYSICAL_ID)}

    import psycopg
    from zerg.migrate import migrate, status

    secret = _read_secret(os.environ["ZERG_DB_SECRET_ARN"])
    with psycopg.connect(connection_info(secret, os.environ["ZERG_DB_PROXY_ENDPOINT"]), autocommit=True) as conn:
        applied = migrate(conn)
        current = status(conn).current
    print(json.dumps({"applied": [m.version for m in applied], "schema_version": current,
                      "notes": [note for m in applied for note in m.notes]}))  # what a migration did to rows
    return {
        "PhysicalResourceId": PHYSICAL_ID,
        "Data": {"SchemaVersion": current, "Applied": len(applied)},
    }
