"""The suite's slices stay true (tests/support/slices.py, docs/testing.md): the markers are the
registered ones, every listed file and test exists, a file with a way to the end-to-end engine says
whether it is e2e, the engine guard is armed, and the package table matches the test files' imports."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

from tests.support import slices

ROOT = Path(__file__).resolve().parents[1]
MARKERS = {"db", "e2e", "browser", "infra", "slow"}


def _functions(path: Path) -> set[str]:
    """The test functions a file defines (at module level or in a class)."""
    return {node.name for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")}


def test_the_registered_markers_are_the_ones_the_rule_gives():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    registered = {line.split(":")[0] for line in pyproject["tool"]["pytest"]["ini_options"]["markers"]}
    assert registered == MARKERS
    for key, (marks, why) in slices.LISTED.items():
        assert marks.split() and set(marks.split()) <= MARKERS and why, key


def test_the_fast_slice_of_dev_sh_deselects_registered_markers_only():
    slice_ = re.search(r'slice="([^"]+)"', (ROOT / "dev.sh").read_text()).group(1)
    words = set(slice_.split()) - {"and", "not", "or"}
    assert words == {"browser", "infra", "e2e", "slow"}, slice_


def test_every_listed_file_and_test_exists():
    stale = []
    for key in [*slices.LISTED, *slices.NOT_E2E, *slices.RUN_FIRST]:
        file, _, test = key.partition("::")
        path = slices.TESTS / file
        if not path.is_file():
            stale.append(f"{key}: no file tests/{file}")
            continue
        name, _, case = test.partition("[")
        if name and name not in _functions(path):
            stale.append(f"{key}: tests/{file} has no {name}")
        elif case and not re.search(rf"[\"']{re.escape(case.rstrip(']'))}[\"']", path.read_text()):
            stale.append(f"{key}: tests/{file} has no case {case.rstrip(']')!r}")
    assert stale == [], "tests/support/slices.py names what is gone (renamed? update the entry):\n" + "\n".join(stale)


def test_a_file_with_a_way_to_the_engine_says_whether_it_is_e2e():
    listed_e2e = {key.partition("::")[0] for key, (marks, _) in slices.LISTED.items() if "e2e" in marks.split()}
    undecided, stale = [], []
    for path in slices.test_files():
        rel, signs = slices.relative(path), slices.E2E_SIGNS.findall(path.read_text())
        if signs and rel not in listed_e2e and rel not in slices.NOT_E2E:
            undecided.append(f"tests/{rel} ({', '.join(sorted(set(signs)))})")
        if not signs and rel in slices.NOT_E2E:
            stale.append(rel)
    assert undecided == [], (
        "these files mention a way to the end-to-end engine (a zerg run/serve process, ./dev.sh, a LocalEngine): "
        "list the tests that take it in LISTED, or the file in NOT_E2E with why (tests/support/slices.py):\n"
        + "\n".join(undecided))
    assert stale == [], f"NOT_E2E entries with nothing left to explain: {stale}"


def test_the_engine_guard_is_armed():
    """Without it, a test reaching the engine through the API or a schedule fire would run in --fast."""
    assert slices.watch_engine(), "the local engine moved: update slices.watch_engine"
    assert slices.engine_is_watched()
    assert "e2e" in slices.unmarked_engine_start("tests/test_x.py::test_y")


@pytest.mark.parametrize(("path", "name", "fixtures", "marks"), [
    ("test_config.py", "test_defaults_need_no_environment", {"tmp_path"}, set()),
    ("test_runs_list.py", "test_x", {"pool", "database_url", "make_database", "admin_url"}, {"db"}),
    ("test_run_e2e.py", "test_x", {"engine", "database_url"}, {"db", "e2e"}),
    ("browser/test_dashboard.py", "test_x", {"open_page", "served", "database_url"}, {"browser", "e2e", "db"}),
    ("infra/test_infra_lint.py", "test_x", {"synth"}, {"infra"}),
    ("test_memory_vectors.py", "test_x", {"crowded", "pool", "database_url"}, {"db", "slow"}),
    ("test_escalation_machine.py", "test_the_escalation_repeats_until_the_function_says_done[local]", set(), {"e2e"}),
    ("test_escalation_machine.py", "test_the_escalation_repeats_until_the_function_says_done[aws]", set(), set()),
    ("test_local_engine.py", "test_moto_is_the_pinned_version", set(), {"e2e"}),
])
def test_the_rule_follows_fixtures_directories_and_the_list(path, name, fixtures, marks):
    assert slices.marks_for(slices.TESTS / path, name, fixtures) == marks


def test_every_collected_test_carries_what_the_rule_gives(request):
    """The collection hook ran on everything this process collected (a pytestmark may add more)."""
    for item in request.session.items:
        given = slices.marks_for(item.path, item.name, item.fixturenames)
        assert given <= {m.name for m in item.iter_markers()}, item.nodeid


def test_the_package_table_in_docs_testing_md_is_current():
    assert slices.documented() == slices.table(), (
        "docs/testing.md's package table is not what the test files import: regenerate it with "
        "`.venv/bin/python -m tests.support.slices --write` and commit docs/testing.md")


def test_the_package_table_sees_imports_in_every_form(tmp_path):
    test = tmp_path / "test_forms.py"
    test.write_text("import zerg.db\nfrom zerg.memory import files\nfrom zerg import config, runtime\n"
                    "def test_x():\n    from zerg.runs.store import create_run\n")
    assert slices.imported(test, set(slices.packages())) == {"zerg.db", "zerg.memory", "zerg.config",
                                                             "zerg.runtime", "zerg.runs"}
