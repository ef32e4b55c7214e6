"""The state machine definitions (ASL, JSONPath only), shared by the CDK app and the local engine.

Shipped as package data, so an installed wheel finds them as well as a source checkout does.
"""

from __future__ import annotations

from importlib import resources


def definition(name: str) -> str:
    """The text of ``statemachines/{name}.asl.json``."""
    return resources.files(__name__).joinpath(f"{name}.asl.json").read_text()
