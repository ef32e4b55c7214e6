"""The core Lambda layer: ``python/zerg`` plus the runtime dependencies, built without Docker.

Invariants:
- The layer ships exactly ``[project].dependencies`` from pyproject.toml (the local-only
  extras -- pgserver, moto, CDK -- are never in it) and the core library from
  ``layers/core/python``.
- Wheels are the Lambda target's (CPython 3.12, manylinux aarch64), never the build
  machine's: pip runs with ``--platform``/``--only-binary`` so a missing wheel fails the build
  instead of compiling for the wrong CPU.
- The asset hash covers the dependency list, the pip target flags and the library files, so
  a change to any of them publishes a new layer version and nothing else does.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import jsii
from aws_cdk import AssetHashType, BundlingOptions, ILocalBundling
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

ROOT = Path(__file__).resolve().parents[2]
LAYER_SOURCE = ROOT / "layers" / "core"
PYTHON_VERSION = "3.12"
# Lambda's python3.12 runtime is Amazon Linux 2023 (glibc 2.34): both tags are loadable.
PLATFORMS = ("manylinux2014_aarch64", "manylinux_2_28_aarch64")
_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc")


def runtime_requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    with pyproject.open("rb") as fh:
        return list(tomllib.load(fh)["project"]["dependencies"])


def pip_command(target: Path, requirements: list[str]) -> list[str]:
    platform_flags = [flag for tag in PLATFORMS for flag in ("--platform", tag)]
    return [
        sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
        "--no-compile",  # Lambda's file system is read-only: .pyc files would be dead weight
        "--target", str(target), *platform_flags, "--implementation", "cp",
        "--python-version", PYTHON_VERSION, "--only-binary=:all:", *requirements,
    ]


def build_layer(output_dir: Path, requirements: list[str] | None = None) -> None:
    """Lay out the layer under ``output_dir/python`` (also usable outside CDK, e.g. to measure)."""
    target = output_dir / "python"
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run(pip_command(target, requirements or runtime_requirements()), check=True)
    shutil.copytree(LAYER_SOURCE / "python" / "zerg", target / "zerg", ignore=_IGNORED,
                    dirs_exist_ok=True)
    # Console scripts carry the build machine's interpreter path: useless in a layer.
    shutil.rmtree(target / "bin", ignore_errors=True)
    for cache in target.rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)


@jsii.implements(ILocalBundling)
class LocalLayerBundling:
    """CDK's local bundling hook: builds the layer in-process, so no Docker is needed."""

    def try_bundle(self, output_dir: str, *args, **kwargs) -> bool:
        build_layer(Path(output_dir))
        return True


def layer_hash(requirements: list[str]) -> str:
    digest = hashlib.sha256()
    digest.update("\n".join([PYTHON_VERSION, *PLATFORMS, *requirements]).encode())
    source = LAYER_SOURCE / "python"
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        if "__pycache__" in path.parts or path.suffix == ".pyc":
            continue
        digest.update(str(path.relative_to(source)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


class CoreLayer(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, description: str) -> None:
        super().__init__(scope, construct_id)
        code = lambda_.Code.from_asset(
            str(LAYER_SOURCE),
            asset_hash_type=AssetHashType.CUSTOM,
            asset_hash=layer_hash(runtime_requirements()),
            exclude=["**/__pycache__", "**/*.pyc"],
            bundling=BundlingOptions(
                # Only used if local bundling declined, which it never does.
                image=lambda_.Runtime.PYTHON_3_12.bundling_image,
                local=LocalLayerBundling(),
            ),
        )
        self.layer = lambda_.LayerVersion(
            self, "Layer",
            code=code,
            compatible_runtimes=[lambda_.Runtime.PYTHON_3_12],
            compatible_architectures=[lambda_.Architecture.ARM_64],
            description=description,
        )
