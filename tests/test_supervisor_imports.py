"""What importing the supervisor's turn costs: the replies pipeline (its table modules, contacts,
the reply context) is imported by the turn that needs it, never by ``import zerg.supervisor.turn``
(the supervisor handler, and every module reaching for ``supervisor_tools``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[1] / "layers" / "core" / "python"


def test_importing_the_supervisor_turn_leaves_the_replies_pipeline_unimported():
    code = ("import json, sys; import zerg.supervisor.turn; "
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('zerg.inbound') or m == 'zerg.notify.contacts')))")
    done = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(CORE)}, capture_output=True,
                          text=True, check=True, timeout=60)

    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
