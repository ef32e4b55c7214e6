"""The import contract of the core library: its layers, bottom to top, each importing only from its
own layer or below, no cycle between its packages, nor between any two modules (docs/architecture.md
has the picture).

Every import counts: at module level and inside functions alike (a deferred import is for cold
start, never to dodge a cycle); only ``if TYPE_CHECKING:`` blocks are left out, since they never
run. A module's layer is that of the longest entry of :data:`LAYERS` naming it or a package above
it, so each package (or the one module that sits apart from its package) is declared once.
An upward import that must stay is listed in :data:`UPWARD` with its reason; there are few.
Between packages there is no cycle at all, counting a package's table modules (its records, one
layer down) as a unit of their own: ``alerts`` may read which schedule started a run
(``schedules.fires``) while ``schedules`` fires digests and reminders (``alerts``).

Run ``python -m tests.test_layers`` to print every offending import of a tree at once.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ZERG = ROOT / "layers" / "core" / "python" / "zerg"

FOUNDATION, ADAPTERS, RECORDS, SERVICES, FEATURES, AGENTS, ENTRY = range(1, 8)
LAYER_NAMES = {FOUNDATION: "foundation", ADAPTERS: "adapters", RECORDS: "records", SERVICES: "services",
               FEATURES: "features", AGENTS: "agents", ENTRY: "entry points"}

LAYERS: dict[str, int] = {
    # 1 foundation: settings, the database, time, statuses, logging, the port protocols, egress rules
    "zerg": FOUNDATION, "config": FOUNDATION, "db": FOUNDATION, "migrate": FOUNDATION, "migrations": FOUNDATION,
    "observability": FOUNDATION, "statuses": FOUNDATION, "timestamps": FOUNDATION, "timezones": FOUNDATION,
    "handler_input": FOUNDATION, "ports": FOUNDATION, "egress": FOUNDATION, "aws_clients": FOUNDATION,
    "pids": FOUNDATION, "hosting": FOUNDATION, "runtime": FOUNDATION, "validation": FOUNDATION, "text": FOUNDATION,
    "files": FOUNDATION, "approvals.commands": FOUNDATION, "approvals.policy": FOUNDATION,
    # 2 adapters and the loop: what talks to the world, and the model<->tool loop with its tool seam
    "llm": ADAPTERS, "embeddings": ADAPTERS, "sealing": ADAPTERS, "artifacts": ADAPTERS, "sandbox": ADAPTERS,
    "loop": ADAPTERS, "notify.channels": ADAPTERS, "schedules.eventbridge": ADAPTERS,
    "runs.stepfunctions": ADAPTERS, "tracing": ADAPTERS,
    # 3 records: one module per table, the only place SQL lives
    "runs.store": RECORDS, "runs.threads": RECORDS, "runs.events": RECORDS, "runs.jobs": RECORDS,
    "owners": RECORDS, "identity": RECORDS, "notify.contacts": RECORDS, "llm.ledger": RECORDS, "hosts.store": RECORDS,
    "memory.files": RECORDS, "memory.versions": RECORDS, "memory.vectors": RECORDS,
    "memory.embed_failures": RECORDS, "memory.terms": RECORDS, "memory.facts": RECORDS, "memory.summaries": RECORDS,
    "schedules.store": RECORDS, "schedules.fires": RECORDS,
    "notify.policy": RECORDS, "notify.limits": RECORDS, "notify.notifications": RECORDS,
    "notify.push_subscriptions": RECORDS, "notify.push_keys": RECORDS,
    "alerts.inbox": RECORDS, "alerts.escalations": RECORDS,
    "inbound.messages": RECORDS, "agents.configs": RECORDS,
    "approvals.requests": RECORDS,
    "approvals.policies": RECORDS, "mcp_servers.store": RECORDS,
    "tracing.store": RECORDS, "tracing.setup": RECORDS,
    # 4 core services and the run lifecycle
    "runs": SERVICES, "memory": SERVICES, "hosts": SERVICES, "notify": SERVICES, "agents": SERVICES,
    "auth": SERVICES, "approvals": SERVICES, "tracing.steps": SERVICES, "mcp_servers": SERVICES,
    # 5 features that start runs or react to their close
    "alerts": FEATURES, "schedules": FEATURES, "inbound": FEATURES, "privacy": FEATURES,
    # 6 agents: the tools and their catalogue, the supervisor, the worker runner, Jarvis
    "tools": AGENTS, "supervisor": AGENTS, "workers": AGENTS, "jarvis": AGENTS,
    # 7 entry points: the one composition root, the HTTP API, the command line, the local host
    "wiring": ENTRY, "api": ENTRY, "cli": ENTRY, "local": ENTRY,
}

# (importer, imported) -> why this upward import stays.
UPWARD: dict[tuple[str, str], str] = {
    ("llm.offline", "memory.notes"):
        "the offline provider plays the model for a task that says 'remember that ...': it leaves aside the "
        "sentences the Remember step saves, found by memory's one parser of them (a second copy would drift)",
}


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module, without "zerg."
    imported: str
    line: int

    def where(self) -> str:
        return f"{self.importer.replace('.', '/')}.py:{self.line}"


def module_name(path: Path, root: Path = ZERG) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts) or "zerg"


def modules(root: Path = ZERG) -> dict[str, Path]:
    return {module_name(p, root): p for p in sorted(root.rglob("*.py")) if "__pycache__" not in p.parts}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip |= {id(n) for child in node.body for n in ast.walk(child)}
    return skip


def imports(root: Path = ZERG) -> list[Import]:
    """Every import of one core module by another (module level and deferred; not TYPE_CHECKING)."""
    known = modules(root)

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    found = []
    for mod, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        skip = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets = [f"{node.module}.{a.name}" for a in node.names]
            for target in targets:
                if target == "zerg" or target.startswith("zerg."):
                    imported = resolve(target.removeprefix("zerg").removeprefix(".") or "zerg")
                    if imported and imported != mod:
                        found.append(Import(mod, imported, node.lineno))
    return found


def layer_of(module: str) -> int:
    name = module
    while name:
        if name in LAYERS:
            return LAYERS[name]
        name = name.rpartition(".")[0]
    return LAYERS["zerg"] if module == "zerg" else 0


def unit_of(module: str) -> str:
    """What the cycle check counts as one node: a package, with its table modules (its records)
    apart, since they sit in the records layer below whatever else the package holds."""
    package = module.split(".")[0]
    return f"{package} records" if layer_of(module) == RECORDS and layer_of(package) != RECORDS else package


def undeclared(root: Path = ZERG) -> list[str]:
    return sorted(m for m in modules(root) if layer_of(m) == 0)


def upward(found: list[Import], allowed: dict[tuple[str, str], str] = UPWARD) -> list[str]:
    return [f"{i.where()}: {i.importer} ({LAYER_NAMES[layer_of(i.importer)]}) imports {i.imported} "
            f"({LAYER_NAMES[layer_of(i.imported)]})"
            for i in found if layer_of(i.imported) > layer_of(i.importer) and (i.importer, i.imported) not in allowed]


def package_cycles(found: list[Import], allowed: dict[tuple[str, str], str] = UPWARD) -> list[str]:
    """Each cycle between packages (a strongly connected set of two or more), with the imports that make it."""
    return cycles(found, unit_of, allowed)


def module_cycles(found: list[Import], allowed: dict[tuple[str, str], str] = UPWARD) -> list[str]:
    """Each cycle between modules, inside a package too."""
    return cycles(found, lambda module: module, allowed)


def cycles(found: list[Import], unit: Callable[[str], str], allowed: dict[tuple[str, str], str]) -> list[str]:
    edges: dict[str, dict[str, list[Import]]] = defaultdict(lambda: defaultdict(list))
    for i in found:
        a, b = unit(i.importer), unit(i.imported)
        if a != b and (i.importer, i.imported) not in allowed:
            edges[a][b].append(i)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in list(edges[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            connect(v)
    report = []
    for component in components:
        lines = [f"{i.where()}: {i.importer} imports {i.imported}"
                 for a in component for b in component if b in edges[a] for i in edges[a][b]]
        report.append(f"cycle between {', '.join(component)}:\n  " + "\n  ".join(sorted(lines)))
    return report


def test_every_module_of_the_core_has_a_declared_layer():
    assert undeclared() == []


def test_every_declared_name_is_a_module_or_package_of_the_core():
    known = modules()
    assert sorted(name for name in LAYERS if name != "zerg" and name not in known) == []


def test_no_module_imports_from_a_layer_above_its_own():
    found = upward(imports())
    assert found == [], "imports into a higher layer:\n" + "\n".join(found)


def test_no_cycle_between_the_packages_of_the_core():
    found = package_cycles(imports())
    assert found == [], "\n".join(found)


def test_no_cycle_between_the_modules_of_a_package_either():
    found = module_cycles(imports())
    assert found == [], "\n".join(found)


def test_the_few_upward_imports_that_stay_still_exist_and_say_why():
    found = {(i.importer, i.imported) for i in imports()}
    assert len(UPWARD) <= 5
    for pair, reason in UPWARD.items():
        assert pair in found, f"{pair} is no longer imported: drop it from UPWARD"
        assert layer_of(pair[1]) > layer_of(pair[0]) and len(reason) > 20


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "zerg"
    for name, text in {"__init__.py": "", **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_a_planted_upward_import_fails_with_its_line(tmp_path):
    root = _plant(tmp_path, {
        "runs/__init__.py": "", "runs/store.py": "import os\n\n\ndef f():\n    from zerg.alerts import escalation\n",
        "alerts/__init__.py": "", "alerts/escalation.py": "",
        "alerts/inbox.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from zerg.api import app\n",
        "api/__init__.py": "", "api/app.py": "",
    })
    # the deferred import counts, the one under TYPE_CHECKING does not
    assert upward(imports(root), {}) == [
        "runs/store.py:5: runs.store (records) imports alerts.escalation (features)"]


def test_a_planted_cycle_between_packages_fails_with_its_imports(tmp_path):
    root = _plant(tmp_path, {
        "memory/__init__.py": "", "memory/recall.py": "from zerg.hosts import registry\n",
        "hosts/__init__.py": "", "hosts/registry.py": "def f():\n    import zerg.memory.recall\n",
    })
    assert module_cycles(imports(root), {}) == [
        "cycle between hosts.registry, memory.recall:\n"
        "  hosts/registry.py:2: hosts.registry imports memory.recall\n"
        "  memory/recall.py:1: memory.recall imports hosts.registry"]
    assert package_cycles(imports(root), {}) == [
        "cycle between hosts, memory:\n"
        "  hosts/registry.py:2: hosts.registry imports memory.recall\n"
        "  memory/recall.py:1: memory.recall imports hosts.registry"]


if __name__ == "__main__":  # every offender at once, to work through
    everything = imports()
    for line in undeclared():
        print("undeclared:", line)
    for line in upward(everything):
        print("upward:", line)
    for line in package_cycles(everything) + module_cycles(everything):
        print(line)
