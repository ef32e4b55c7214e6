"""The one-machine host: the local engine, the HTTP server, ``zerg run`` and the ``zerg ask`` client.

Not in the Lambda layer; the only core code (with ``zerg.cli``) that imports ``functions``.
"""
