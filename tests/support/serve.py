"""``zerg serve`` as its own process, as a user starts it: on an ephemeral loopback port, its
standard output read up to the line with its URL (what it printed before is kept in ``lines``),
its standard error appended to a log file."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class Served:
    """``zerg serve`` as its own process on an ephemeral loopback port."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log.open("a")
        self.proc = subprocess.Popen([sys.executable, "-m", "zerg.cli", "serve", "--port", "0"], env=env, cwd=ROOT,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True)
        guard = threading.Timer(120, self.proc.kill)  # a server that never says where it listens
        guard.start()
        self.lines = []
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.startswith("Zerg API on "):
                break
        guard.cancel()
        assert self.lines and self.lines[-1].startswith("Zerg API on "), (self.lines, log.read_text())
        self.url = self.lines[-1].split()[3]

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()
