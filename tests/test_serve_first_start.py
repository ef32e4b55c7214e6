"""``zerg serve`` from a checkout set up by the README (``./dev.sh`` builds web/dist): the assistant's
face is at ``/``, and the very first start says how to sign in, with a secret that works."""

from __future__ import annotations

import os
import re
from pathlib import Path

import httpx

from tests.support.parts import need
from tests.support.serve import ROOT, Served

BUILT = ROOT / "web" / "dist" / "index.html"


def _env(database_url: str, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZERG_", "OPENAI_"))}
    return env | {"DATABASE_URL": database_url, "ZERG_DATA_DIR": str(tmp_path / "data"),
                  "ZERG_ARTIFACT_DIR": str(tmp_path / "artifacts"), "PYTHONUNBUFFERED": "1"}


def test_zerg_serve_from_the_checkout_serves_the_built_app_and_says_once_how_to_sign_in(make_database, tmp_path):
    database_url = make_database()  # a database of its own: its first start is this test's (serve migrates it)
    need(None if BUILT.is_file() else "web/dist is not built (./dev.sh run, serve or test builds it when npm "
         "is there)", "the built app's serve test")
    first = Served(_env(database_url, tmp_path), tmp_path / "serve.log")
    try:
        page = httpx.get(first.url + "/", timeout=30)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert page.text == BUILT.read_text()  # the build's own index.html, not the 503 hint
        assert re.search(r'<script[^>]+src="/assets/[^"]+\.js"', page.text)
        said = "\n".join(first.lines)
        found = re.search(r"first start: sign in at (\S+) as 'local' with this device secret "
                          r"\(shown once, store it now\): (zd_\S+)", said)
        assert found and found.group(1) == first.url + "/", said
        signed_in = httpx.post(first.url + "/api/jarvis/auth", json={"device_secret": found.group(2)}, timeout=30)
        assert signed_in.status_code == 200, signed_in.text
    finally:
        first.stop()
    again = Served(_env(database_url, tmp_path), tmp_path / "serve.log")
    try:
        said = "\n".join(again.lines)
        assert "zd_" not in said and "the device secret shown at the first start" in said, said
        assert "zerg owners rotate local --device browser" in said
    finally:
        again.stop()


def test_without_a_built_app_the_page_says_in_one_sentence_how_to_get_it(database_url, tmp_path):
    env = _env(database_url, tmp_path) | {"ZERG_WEB_DIR": str(tmp_path / "no-app")}
    served = Served(env, tmp_path / "serve.log")
    try:
        page = httpx.get(served.url + "/", timeout=30)
        api = httpx.get(served.url + "/api/openapi.json", timeout=30)
    finally:
        served.stop()
    assert page.status_code == 503
    message = page.json()["message"]
    assert "install Node.js" in message and "./dev.sh serve" in message and message.count(". ") == 0
    assert api.status_code == 200 and api.json()["paths"]  # the API itself runs
