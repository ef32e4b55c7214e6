"""Constructs shared by the stacks: the core layer and the function every Lambda is built from."""
