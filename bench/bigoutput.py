"""Memory of a ``zerg serve`` process while a 60 MB tool output is written and then read.

A real ``zerg serve`` (a fresh process: uvicorn, the local engine, the real handlers, this
checkout's code) runs one run whose worker prints 60 MB with ``container_exec`` (the scripted
model on loopback asks for it); the stored output is then read back whole through the API in
``Range`` pieces, as a client would. The server's memory is read from /proc: VmRSS before, and
the peak of each phase (VmHWM, reset through /proc/PID/clear_refs when allowed; otherwise VmRSS
sampled every 10 ms). A warm-up run and a warm-up range read come first, so the figures show
the output, not first-use imports.

Before streaming (issue 12): the server went from ~280 MB to 637 MB for this output.

Run: .venv/bin/python -m bench.bigoutput   (smoke: main(smoke=True), a 6 MB output, same code paths)
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench._common import ROOT, bench_database, environ, script
from bench.cli import cli_env

SERVE = "import sys; from zerg.cli.main import main; sys.exit(main(['serve', '--host', '127.0.0.1', '--port', '0']))"
TASK = "Print the big log"


def _kb(pid: int, field: str) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(rf"^{field}:\s+(\d+) kB", status, re.M).group(1))


class Peak:
    """The peak resident memory of ``pid`` over a block: VmHWM after a reset, or VmRSS sampled."""

    def __init__(self, pid: int) -> None:
        self.pid, self.sampled, self.kb = pid, 0, 0
        self._stop = threading.Event()
        self.exact = False

    def __enter__(self) -> "Peak":
        try:
            Path(f"/proc/{self.pid}/clear_refs").write_text("5")  # VmHWM := VmRSS
            self.exact = True
        except OSError:  # another user's (or a non-dumpable) process: sample instead
            pass
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            self.sampled = max(self.sampled, _kb(self.pid, "VmRSS"))

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.kb = max(self.sampled, _kb(self.pid, "VmHWM") if self.exact else 0)


def _start_server(env: dict[str, str], tmp: str) -> tuple[subprocess.Popen, str]:
    out = Path(tmp) / "serve.out"
    with open(out, "wb") as stdout, open(Path(tmp) / "serve.err", "wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-c", SERVE], env=env, cwd=ROOT, stdout=stdout, stderr=stderr)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.search(r"Zerg API on (http://\S+)", out.read_text())
        if found:
            return proc, found.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"zerg serve did not start:\n{(Path(tmp) / 'serve.err').read_text()[-2000:]}")


def _run(client, task: str) -> dict:
    """Start a run and wait for its end; the run document."""
    run_id = client.post("/api/jarvis/supervisor", json={"task": task}).json()["run_id"]
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        doc = client.get(f"/api/jarvis/runs/{run_id}").json()
        if doc["status"] != "running":
            if doc["status"] != "success":
                raise RuntimeError(f"run {run_id} ended {doc['status']}: {doc}")
            return doc
        time.sleep(0.1)
    raise RuntimeError(f"run {run_id} did not finish")


def _read_in_ranges(client, url: str) -> tuple[int, int]:
    """(bytes read, responses): the whole file, piece after piece, as Content-Range directs."""
    got = responses = 0
    while True:
        resp = client.get(url, headers={"Range": f"bytes={got}-"})
        if resp.status_code != 206:
            raise RuntimeError(f"range read answered {resp.status_code}: {resp.text[:300]}")
        start, end, size = map(int, re.fullmatch(r"bytes (\d+)-(\d+)/(\d+)", resp.headers["content-range"]).groups())
        got, responses = got + len(resp.content), responses + 1
        if end + 1 == size:
            return got, responses


def main(smoke: bool = False) -> None:
    import httpx

    from tests.support.llm_server import ScriptedLLM
    from tests.support.scripts import run_script
    from zerg.api.ranges import RANGE_MAX_BYTES
    from zerg.loop.tool import ARTIFACT_OUTPUT_CAP
    from zerg.owners import create_owner
    from zerg.wiring import get_runtime

    printed = 6_000_000 if smoke else 60_000_000
    command = f"head -c {printed} /dev/zero | tr '\\0' a"
    llm = ScriptedLLM().respond_with(run_script([TASK], commands={TASK: command}, answer=lambda r: "Printed it."))
    with tempfile.TemporaryDirectory() as tmp, bench_database() as url, environ(DATABASE_URL=url, ZERG_DATA_DIR=tmp):
        with get_runtime().pool.connection() as conn:
            owner = create_owner(conn, "bench")
        env = cli_env(tmp, url)
        env.update(OPENAI_BASE_URL=llm.base_url, ZERG_LOG_LEVEL="WARNING")
        proc, base = _start_server(env, tmp)
        try:
            client = httpx.Client(base_url=base, timeout=120)
            token = client.post("/api/jarvis/auth", json={"device_secret": owner.device_secret}).json()["token"]
            client.headers["Authorization"] = f"Bearer {token}"
            warm = _run(client, "Warm up")["workers"][0]["job_id"]  # engine, sandbox, range path: all loaded
            client.get(f"/api/jarvis/workers/{warm}/files/tool_calls/001_container_exec.txt", headers={"Range": "bytes=0-"})
            before = _kb(proc.pid, "VmRSS")

            started = time.perf_counter()
            with Peak(proc.pid) as written:
                job = _run(client, TASK)["workers"][0]["job_id"]
            write_s = time.perf_counter() - started
            after_write = _kb(proc.pid, "VmRSS")

            files = {f["path"]: f["size"] for f in client.get(f"/api/jarvis/workers/{job}").json()["files"]}
            path = next(p for p in files if p.startswith("tool_calls/") and p.endswith("container_exec.txt"))
            url_ = f"/api/jarvis/workers/{job}/files/{path}"
            whole = client.get(url_)
            started = time.perf_counter()
            with Peak(proc.pid) as read:
                got, responses = _read_in_ranges(client, url_)
            read_s = time.perf_counter() - started
            after = _kb(proc.pid, "VmRSS")
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
            llm.close()
    if got != files[path]:
        raise RuntimeError(f"read {got} bytes of a {files[path]}-byte file")

    def mb(kb: int) -> str:
        return f"{kb / 1000:8.1f} MB"

    how = "VmHWM" if written.exact and read.exact else "sampled VmRSS"
    print(f"== zerg serve memory, {printed / 1e6:.0f} MB tool output (container_exec; peaks from {how}) ==")
    print(f"{'output printed':<44} {printed / 1e6:8.1f} MB  (kept in the artifact: {files[path] / 1e6:.1f} MB, "
          f"bound {ARTIFACT_OUTPUT_CAP / 1e6:.0f} MB per stream)")
    print(f"{'server RSS before':<44} {mb(before)}")
    print(f"{'peak while written':<44} {mb(written.kb)}  (+{(written.kb - before) / 1000:.1f} MB; run {write_s:.1f} s)")
    print(f"{'RSS after the write':<44} {mb(after_write)}")
    print(f"{'peak while read':<44} {mb(read.kb)}  (+{(read.kb - before) / 1000:.1f} MB; {responses} ranges of "
          f"<= {RANGE_MAX_BYTES / 2**20:.0f} MiB in {read_s:.1f} s)")
    print(f"{'RSS after':<44} {mb(after)}")
    print(f"{'whole-file GET of it':<44} {whole.status_code} {whole.json()['error']}")


if __name__ == "__main__":
    script(main)
