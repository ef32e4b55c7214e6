"""The core Lambda layer: ``python/zerg`` plus the runtime dependencies, built without Docker.

What goes in and how it is built lives in :mod:`infra.components.layer_build` (no CDK import,
so tests and benchmarks can build a layer); this module is the CDK side.

Invariants:
- The asset hash is :func:`layer_hash` of what ships -- dependency list, wheel target and the
  shipped library files (not ``zerg/local`` or the CLI) -- so a change to any of them publishes a
  new layer version and nothing else does.
"""

from __future__ import annotations

from pathlib import Path

import jsii
from aws_cdk import AssetHashType, BundlingOptions, ILocalBundling
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.components.layer_build import (  # noqa: F401  (re-exported for the stacks and tests)
    EXCLUDED,
    LAMBDA,
    LAYER_SOURCE,
    PLATFORMS,
    PYTHON_VERSION,
    build_layer,
    layer_hash,
    pip_command,
    runtime_requirements,
)


@jsii.implements(ILocalBundling)
class LocalLayerBundling:
    """CDK's local bundling hook: builds the layer in-process, so no Docker is needed."""

    def try_bundle(self, output_dir: str, *args, **kwargs) -> bool:
        build_layer(Path(output_dir), platform=LAMBDA)
        return True


class CoreLayer(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, description: str) -> None:
        super().__init__(scope, construct_id)
        code = lambda_.Code.from_asset(
            str(LAYER_SOURCE),
            asset_hash_type=AssetHashType.CUSTOM,
            asset_hash=layer_hash(runtime_requirements()),
            # The source's stray caches; not the bundled output, whose .cpython-312.pyc ship.
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
