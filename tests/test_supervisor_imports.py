"""The cold-start contract: what importing a Lambda handler (and the supervisor's turn) may load.

- The replies pipeline (its table modules, contacts, the reply context) is imported by the turn that
  needs it, never by ``import zerg.supervisor.turn`` (the supervisor handler, and every module
  reaching for ``supervisor_tools``).
- ``import handler`` of every function is the standard library and :mod:`zerg.observability`: no
  pydantic (so no model is built), no AWS SDK, no model client, no database driver, no API app, no
  OpenTelemetry (loaded only when tracing is on: tests/test_tracing_setup.py).
  Each is imported by the invocation that uses it (issue 24: a handler's import <= 150 ms). Asserted
  on ``sys.modules``, never on a clock, so load on the machine cannot make it flaky.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.lambda_layer import FUNCTION_DIRS

CORE = Path(__file__).resolve().parents[1] / "layers" / "core" / "python"
# Top-level packages a handler's import must not load (each costs 20-300 ms from source).
HEAVY = ("pydantic", "pydantic_core", "boto3", "botocore", "openai", "httpx", "psycopg", "psycopg_pool",
         "aws_lambda_powertools", "jmespath", "opentelemetry", "google")
# The core modules that are the invocation's, not the import's.
DEFERRED = ("zerg.handler_input", "zerg.config", "zerg.runtime", "zerg.wiring", "zerg.api", "zerg.db", "zerg.aws_clients")


def _loaded_after(code: str, cwd: Path | None = None) -> list[str]:
    """The modules a fresh interpreter has loaded after running ``code`` (core library on sys.path)."""
    probe = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], env={"PYTHONPATH": str(CORE)}, cwd=cwd,
                          capture_output=True, text=True, check=True, timeout=60)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_the_supervisor_turn_leaves_the_replies_pipeline_unimported():
    loaded = _loaded_after("import zerg.supervisor.turn")

    assert [m for m in loaded if m.startswith("zerg.inbound") or m == "zerg.notify.contacts"] == []


@pytest.mark.parametrize("name", sorted(FUNCTION_DIRS))
def test_a_handler_import_loads_no_pydantic_sdk_or_driver(name: str):
    loaded = _loaded_after("import handler", cwd=FUNCTION_DIRS[name])

    heavy = sorted({m.split(".")[0] for m in loaded} & set(HEAVY))
    deferred = [m for m in loaded if m in DEFERRED or m.startswith(tuple(d + "." for d in DEFERRED))]
    assert (heavy, deferred) == ([], []), f"{name}: import handler loads {heavy + deferred}"
    assert [m for m in loaded if m.startswith("zerg")] in ([], ["zerg", "zerg.observability"]), name
