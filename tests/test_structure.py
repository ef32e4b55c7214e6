"""The shape of the core library, checked so it stays that way: SQL only in the table modules,
the handlers imported only by the local host, statuses defined once and matching the schema."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.test_layers import RECORDS, layer_of, modules
from zerg.statuses import JOB_STATUSES, RUN_FINAL, RUN_STATUSES, RUN_UNFINISHED

ROOT = Path(__file__).resolve().parents[1]
ZERG = ROOT / "layers" / "core" / "python" / "zerg"
# The modules that own tables: the records layer of the import contract (tests/test_layers.py),
# plus the migrator, the server-level catalog reads in db.py and the local upgrade's row counts.
TABLE_MODULES = {path.relative_to(ZERG).as_posix() for module, path in modules().items() if layer_of(module) == RECORDS}
TABLE_MODULES |= {"migrate.py", "db.py", "local/pg_upgrade.py"}
# SQL keywords are upper case in this code base, which keeps English ("show the schema") out.
SQL = re.compile(r"\b(SELECT\b.*\bFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+TABLE|SHOW\s+[a-z_]+)",
                 re.DOTALL)


def _python_files(*roots: Path) -> list[Path]:
    return sorted(p for root in roots for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def _strings(tree: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_no_sql_text_outside_the_table_modules_and_migrations():
    offenders = []
    for path in _python_files(ZERG, ROOT / "functions"):
        rel = path.relative_to(ZERG).as_posix() if path.is_relative_to(ZERG) else path.relative_to(ROOT).as_posix()
        if rel in TABLE_MODULES:
            continue
        tree = ast.parse(path.read_text())
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
                      and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                if SQL.search(node.value):
                    offenders.append(f"{rel}:{node.lineno}: {node.value.strip()[:60]!r}")
    assert offenders == []


def test_the_scan_finds_sql_where_it_is():  # the check above is not vacuous
    text = (ZERG / "runs" / "jobs.py").read_text()
    assert any(SQL.search(s) for s in _strings(ast.parse(text)))


def test_only_the_local_host_and_the_cli_import_the_handlers():
    importers = set()
    for path in _python_files(ZERG):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if any(n == "functions" or n.startswith("functions.") for n in names):
                importers.add(path.relative_to(ZERG).as_posix())
    assert importers and all(p.startswith(("local/", "cli/")) for p in importers), importers


def test_statuses_are_the_ones_the_schema_allows(pool):
    with pool.connection() as conn:
        checks = {r["table"]: r["def"] for r in conn.execute(
            """SELECT conrelid::regclass::text AS table, pg_get_constraintdef(oid) AS def FROM pg_constraint
               WHERE contype = 'c' AND conrelid::regclass::text IN ('runs', 'worker_jobs')
                 AND pg_get_constraintdef(oid) LIKE '%%status%%'""").fetchall()}
    for table, statuses in (("runs", RUN_STATUSES), ("worker_jobs", JOB_STATUSES)):
        assert sorted(re.findall(r"'(\w+)'", checks[table])) == sorted(statuses)
    assert sorted(RUN_FINAL + RUN_UNFINISHED) == sorted(RUN_STATUSES) and "interrupted" in RUN_FINAL
