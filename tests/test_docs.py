"""The documentation stays true where it can drift: the README stays short, every relative link in
it and in docs/ leads somewhere, and docs/architecture.md names every package of the core and no
path of the core that does not exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ZERG = ROOT / "layers" / "core" / "python" / "zerg"
DOCS = sorted((ROOT / "docs").glob("*.md"))
ARCHITECTURE = ROOT / "docs" / "architecture.md"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CORE_PATH = re.compile(r"`([a-z_]+(?:/[a-z_]+)*(?:/|\.py))`")
NOT_CORE = ("functions", "web", "infra", "tests", "bench", "statemachines", "layers", "docs")


def packages() -> set[str]:
    """Every package of the core, as ``name/`` (``notify/channels/``, ``api/routes/`` too)."""
    return {p.parent.relative_to(ZERG).as_posix() + "/" for p in ZERG.rglob("__init__.py")
            if "__pycache__" not in p.parts and p.parent != ZERG}


def _exists(token: str, base: str = "") -> bool:
    return (ZERG / base / token.rstrip("/")).exists()


def test_the_readme_is_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300


def test_every_relative_link_in_the_readme_and_docs_resolves():
    broken = []
    for doc in [ROOT / "README.md", *DOCS]:
        for target in LINK.findall(doc.read_text()):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue  # another site, or a place on the same page
            path = target.split("#")[0]
            if not (doc.parent / path).exists():
                broken.append(f"{doc.relative_to(ROOT)}: {target}")
    assert broken == []


def test_every_setting_is_documented():
    from zerg.config import Settings

    text = "".join(doc.read_text() for doc in DOCS)
    undocumented = [f.alias for f in Settings.model_fields.values() if f.alias and f"`{f.alias}`" not in text]
    assert undocumented == []


def test_the_architecture_names_every_package_of_the_core():
    named = set(CORE_PATH.findall(ARCHITECTURE.read_text()))
    assert sorted(packages() - named - {"migrations/"} - {"api/routes/"}) == []


def test_the_architecture_names_no_path_of_the_core_that_does_not_exist():
    missing = []
    for line in ARCHITECTURE.read_text().splitlines():
        cells = [c.strip() for c in line.split("|")] if line.startswith("|") else []
        row_package = CORE_PATH.findall(cells[1])[0] if len(cells) > 2 and CORE_PATH.findall(cells[1]) else ""
        for token in CORE_PATH.findall(line):
            if token.split("/")[0] in NOT_CORE or _exists(token):
                continue
            if row_package.endswith("/") and _exists(token, row_package):
                continue  # a module named in its package's row
            missing.append(token)
    assert missing == []


def test_the_architecture_check_is_not_vacuous(tmp_path):
    assert "notify/" in packages() and "loop/" in packages()
    assert _exists("runs/closing.py") and not _exists("runs/starter.py")
