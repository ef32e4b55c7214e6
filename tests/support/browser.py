"""The browser tests' real parts: ``zerg serve`` as a subprocess, Debian's Chromium driven by
Playwright, the scripted model that plays a whole run (with a gate to hold workers mid-run), and
screenshots as test artifacts.

What a browser test needs is checked once (:func:`missing`): the ``playwright`` package, Chromium
at ``/usr/bin/chromium`` and the built web app (``web/dist``). With ``CI=true`` a missing piece
fails the test with the reason; otherwise the test skips with it (``./dev.sh test`` installs all
three). Never ``playwright install``: its CDN is not reachable.

Screenshots go to ``.zerg/test-artifacts/screenshots/`` in the checkout (git-ignored with ``.zerg/``).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests.support.parts import need
from tests.support.scripts import has_tool_results, role_of, worker_task

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
WEB_DIST = ROOT / "web" / "dist"
SCREENSHOTS = ROOT / ".zerg" / "test-artifacts" / "screenshots"
# Headless in a container: no sandbox (we run as root there), no GPU, nothing phoning home.
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--no-first-run"]
# Generous: a shared 2-core machine runs eight suites; expectations wait on page state, never on time.
WAIT_MS = 60_000
GATE_S = 120  # how long a held worker waits for the test to release it (a hang guard)


def missing() -> str | None:
    """Why the browser tests cannot run here (what to install), or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the Python package playwright is missing (./dev.sh test installs the dev extras)"
    if not os.access(CHROMIUM, os.X_OK):
        return f"no Chromium at {CHROMIUM}: sudo apt-get install chromium (./dev.sh test does it when run as root)"
    if not (WEB_DIST / "index.html").is_file():
        return (f"the web app is not built ({WEB_DIST / 'index.html'} is missing): ./dev.sh test builds it, "
                "or cd web && npm ci && npm run build")
    return None


def require_browser() -> None:
    """Fail (CI) or skip (elsewhere) the calling test when :func:`missing` names something."""
    need(missing(), "browser tests")


def launch(playwright):
    """Debian's Chromium, headless, with a fresh temporary profile (Playwright's launch makes one)."""
    return playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS, headless=True)


def screenshot(page, name: str) -> Path:
    """Save a full-page screenshot as a test artifact; returns its path."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', name)}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


class ServedZerg:
    """``zerg serve --port 0`` in a subprocess on the test database and the scripted model."""

    def __init__(self, database_url: str, llm_base_url: str, workdir: Path, **env: str) -> None:
        from bench._common import mcp_stdio_paths

        workdir.mkdir(parents=True, exist_ok=True)
        self.log = workdir / "serve.log"
        self.out = workdir / "serve.out"
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("ZERG_", "OPENAI_"))} | {
            "DATABASE_URL": database_url, "OPENAI_BASE_URL": llm_base_url, "ZERG_LLM_MAX_RETRIES": "0",
            "ZERG_ARTIFACT_DIR": str(workdir / "artifacts"), "ZERG_DATA_DIR": str(workdir / "data"),
            "ZERG_CONFIG_DIR": str(workdir / "config"), "ZERG_HEARTBEAT_S": "5", "PYTHONUNBUFFERED": "1",
            "ZERG_MCP_STDIO_PATHS": mcp_stdio_paths(),  # the MCP servers from PyPI, where the sandbox can read them
            "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT / "layers" / "core" / "python"), str(ROOT),
                                                      os.environ.get("PYTHONPATH", "")) if p),
        } | env
        self.artifact_dir = Path(environ["ZERG_ARTIFACT_DIR"])
        with open(self.out, "w") as out, open(self.log, "w") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "zerg.cli", "serve", "--port", "0"], env=environ,
                                         stdout=out, stderr=log, cwd=ROOT)
        self.url = self._wait_for_url(120)

    def _wait_for_url(self, limit_s: float) -> str:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            found = re.search(r"Zerg API on (http://\S+)", self.out.read_text())
            if found:
                return found.group(1)
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"zerg serve did not start: {self.tail()}")

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


class Conductor:
    """The scripted model for a whole run, answering by request content (concurrent callers): the
    supervisor spawns ``tasks`` (two by default), each worker runs ``echo`` in the local sandbox and,
    once :attr:`gate` is set, reports; summaries and the answer follow. Any other call (intent,
    quick, memory) gets :attr:`plain`.

    ``hold()`` clears the gate so the workers stay ``running`` (reload, cancel, SSE drop mid-run);
    ``release()`` lets them finish. A held call gives up after ``GATE_S``."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.gate.set()
        self.tasks = ["Check disk usage", "Check memory"]
        self.answer = "Disk is **78%** full; 2 GB of memory free."
        self.plain = "It is a quick answer."
        self.commands: dict[str, str] = {}  # a task's own command instead of the echo
        self.held = 0  # worker calls waiting at the gate right now
        self._lock = threading.Lock()

    def hold(self) -> None:
        self.gate.clear()

    def release(self) -> None:
        self.gate.set()

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        role = role_of(request)
        if role == "supervisor":
            if has_tool_results(request):
                return {"content": self.answer}
            return {"tool_calls": [("spawn_worker", {"task": t}) for t in self.tasks]}
        if role == "worker":
            task = worker_task(request)
            if not has_tool_results(request):
                default = f"echo EVIDENCE-{abs(hash(task)) % 10_000}; echo {task!r}"
                return {"tool_calls": [("container_exec", {"command": self.commands.get(task, default)})]}
            with self._lock:
                self.held += 1
            try:
                self.gate.wait(GATE_S)
            finally:
                with self._lock:
                    self.held -= 1
            return {"content": f"Finished: {task}"}
        if role == "supervisor-final":
            return {"content": self.answer}
        if role == "summary" and _is_summary(request):
            task = re.search(r"Task: (.*)", worker_task(request))
            return {"content": f"summary of {task.group(1).strip() if task else 'the task'}"}
        return {"content": self.plain}


def _is_summary(request: dict[str, Any]) -> bool:
    first = (request.get("messages") or [{}])[0]
    return first.get("role") == "system" and (first.get("content") or "").startswith("You summarise the result")


# --- the page, by the UI contract's roles and labels --------------------------------------------

def sign_in(page, owner) -> None:
    """Open the app and sign in with ``owner``'s device secret (the session cookie follows)."""
    from playwright.sync_api import expect

    page.goto("/")
    page.get_by_label("Device secret").fill(owner.device_secret)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()


def open_settings(page):
    """Open the chat's one settings menu (preferences, voice, read aloud, push); returns its popover."""
    from playwright.sync_api import expect

    button = page.get_by_role("button", name="Settings")
    if button.get_attribute("aria-expanded") != "true":
        button.click()
    menu = page.get_by_role("group", name="Settings")
    expect(menu).to_be_visible()
    return menu


def message_box(page):
    return page.get_by_label("Message Jarvis")


def ask(page, text: str) -> None:
    """Type ``text`` into the chat box and send it with Enter (the keyboard path)."""
    box = message_box(page)
    box.fill(text)
    box.press("Enter")


def conversation(page):
    return page.get_by_role("log", name="Conversation")


def workers_region(page):
    """The progress block of the latest run's turn (each turn keeps its own)."""
    return conversation(page).get_by_role("status", name="Workers").last


def worker_rows(page):
    return workers_region(page).locator("li[data-job-id]")


def turn(page, run_id: int):
    """The assistant turn of a run: its steps, its approvals, its answer (or how it ended)."""
    return conversation(page).locator(f"article[data-role='assistant'][data-run-id='{run_id}']")


def answers(page, run_id: int | None = None):
    """The answers of runs (one per run that answered), each inside its run's turn."""
    selector = "article[data-role='assistant'][data-run-id] .answer" if run_id is None else \
        f"article[data-role='assistant'][data-run-id='{run_id}'] .answer"
    return conversation(page).locator(selector)


def supervisor_run_id(response) -> int:
    """The run id of a ``POST /api/jarvis/supervisor`` response the page made."""
    assert response.status == 202, response.text()
    return int(response.json()["run_id"])


def is_supervisor_post(response) -> bool:
    return response.request.method == "POST" and response.url.split("?")[0].endswith("/api/jarvis/supervisor")


def api_client(base_url: str, owner):
    """An httpx client signed in as ``owner`` (bearer), for seeding data the page then shows."""
    import httpx

    client = httpx.Client(base_url=base_url, timeout=60)
    resp = client.post("/api/jarvis/auth", json={"device_secret": owner.device_secret})
    assert resp.status_code == 200, resp.text
    client.headers["Authorization"] = f"Bearer {resp.json()['token']}"
    return client


def owner_runs(pool, owner_id: int) -> list[dict]:
    with pool.connection() as conn:
        return conn.execute("SELECT id, task, status FROM runs WHERE owner_id = %s ORDER BY id", (owner_id,)).fetchall()


def complete_run(page, task: str) -> int:
    """Ask ``task`` through the page (the scripted two-worker run) and wait for its answer; the run id."""
    from playwright.sync_api import expect

    with page.expect_response(is_supervisor_post) as posted:
        ask(page, task)
    run_id = supervisor_run_id(posted.value)
    expect(answers(page, run_id)).to_have_count(1)
    expect(answers(page, run_id).locator(".md[data-streaming]")).to_have_count(0)  # the whole answer, not its draft
    return run_id


class CuttableProxy:
    """A TCP proxy on loopback in front of ``zerg serve``: :meth:`cut` drops every open connection
    (an open event stream included) and refuses new ones until :meth:`restore` — a network loss the
    page cannot tell from a real one (Chromium's offline emulation leaves open streams alone)."""

    def __init__(self, target_url: str) -> None:
        import socket

        host, port = target_url.split("//", 1)[1].rsplit(":", 1)
        self.target = (host, int(port))
        self.down = False
        self._conns: set = set()
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket

        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.down:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source, sink) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                self._close(s)

    def _close(self, sock) -> None:
        import socket

        with self._lock:
            self._conns.discard(sock)
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()

    def cut(self) -> None:
        self.down = True
        with self._lock:
            conns = list(self._conns)
        for sock in conns:
            self._close(sock)

    def restore(self) -> None:
        self.down = False

    def close(self) -> None:
        self.cut()
        self._listener.close()
