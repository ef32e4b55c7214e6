"""cfn-lint on every synthesized template, and no CDK warnings at synth.

Ignored: W3005 only ("dependency already enforced by a Ref/GetAtt"). CDK itself writes those
redundant DependsOn entries (a Lambda function on its own service role's default policy, the
state machine on its role's policy, the proxy target group on the cluster); they are harmless
and not under our control.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

IGNORED_CHECKS = ["W3005"]


def _cfn_lint() -> str:
    beside_python = Path(sys.executable).with_name("cfn-lint")
    return str(beside_python) if beside_python.exists() else shutil.which("cfn-lint")


def test_cfn_lint_passes_on_every_template(synth):
    files = sorted(str(p) for p in synth.outdir.glob("*.template.json"))
    assert len(files) == len(synth.templates) == 5
    result = subprocess.run(
        [_cfn_lint(), "--format", "parseable", "--ignore-checks", *IGNORED_CHECKS, "--", *files],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_synth_reports_no_cdk_warnings_or_errors(synth):
    assert synth.metadata, "expected the stacks' *.metadata.json files"
    problems = [
        (path, entry["type"], entry["data"])
        for path, entries in synth.metadata.items()
        for entry in entries
        if entry["type"] in ("aws:cdk:warning", "aws:cdk:error")
    ]
    assert problems == []
