"""``zerg serve`` on uvicorn: live SSE, HTTPS, and the HTTP edge cases a raw socket can send."""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time

import httpx
import pytest
from httpx_sse import connect_sse

from tests.support.factories import unique_name
from zerg.owners import create_owner
from zerg.runs import store as runs
from zerg.runs.events import emit


@pytest.fixture
def served(runtime_env):
    """The server object itself (the api_server fixture only yields its URL)."""
    from zerg.local.server import make_server

    runtime_env(ZERG_HEARTBEAT_S="30")
    server = make_server("127.0.0.1", 0).start()
    yield server
    server.stop()


@pytest.fixture
def alice(pool):
    with pool.connection() as conn:
        return create_owner(conn, unique_name("alice"))


def login(base: str, owner, **kwargs) -> httpx.Client:
    client = httpx.Client(base_url=base, timeout=30, **kwargs)
    resp = client.post("/api/jarvis/auth", json={"device_secret": owner.device_secret})
    assert resp.status_code == 200, resp.text
    client.headers["Authorization"] = f"Bearer {resp.json()['token']}"
    return client


def raw_exchange(port: int, data: bytes, timeout: float = 5.0) -> bytes:
    """Send raw bytes, then read until the server closes (or ``timeout``: a hang fails the caller)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        received = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                raise AssertionError(f"no close after {timeout} s; got {received[:300]!r}") from None
            if not chunk:
                return received
            received += chunk


def status_lines(response: bytes) -> list[str]:
    return [line for line in response.decode("latin-1").split("\r\n") if line.startswith("HTTP/1.1 ")]


def test_sse_streams_live_and_a_leaving_client_frees_its_thread(served, alice, pool):
    with pool.connection() as conn:
        run = runs.start_run(conn, alice.owner_id, "live")  # event 1: supervisor_started
    client = login(served.url, alice)
    url = f"/api/jarvis/supervisor/events?run_id={run.run_id}"
    got: list[tuple[str, float]] = []

    with connect_sse(client, "GET", url) as source:
        assert source.response.headers["content-type"].startswith("text/event-stream")
        assert "server" not in source.response.headers
        events = (e for e in source.iter_sse() if e.id)  # not the leading retry: frame
        assert next(events).event == "supervisor_started"

        def produce():
            for i in range(3):
                time.sleep(0.3)
                with pool.connection() as conn:
                    emit(conn, run.run_id, alice.owner_id, "supervisor_thinking", {"message": f"step {i}"})
                    got.append(("emitted", time.monotonic()))

        threading.Thread(target=produce).start()
        for sse in events:
            got.append((sse.event, time.monotonic()))
            if len([g for g in got if g[0] == "supervisor_thinking"]) == 3:
                break
    thinking = [t for kind, t in got if kind == "supervisor_thinking"]
    emitted = [t for kind, t in got if kind == "emitted"]
    # Live: each event arrives within a poll or two of its write, not at the end of a long-poll.
    assert len(thinking) == 3 and all(0 <= t - e < 1.0 for t, e in zip(thinking, emitted))

    deadline = time.monotonic() + 5
    while served.app.live_streams and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not served.app.live_streams, "the stream of a client that left is still running"

    with pool.connection() as conn:
        emit(conn, run.run_id, alice.owner_id, "supervisor_complete", {"run_id": run.run_id, "result": "ok"})
    with connect_sse(client, "GET", url, headers={"Last-Event-ID": "0"}) as source:
        kinds = [s.event for s in source.iter_sse() if s.id]
    assert kinds[-1] == "supervisor_complete" and len(kinds) == 5  # the stream ends at the final event


def test_sse_checks_auth_and_ownership_before_streaming(served, alice, pool):
    with pool.connection() as conn:
        run = runs.start_run(conn, alice.owner_id, "mine")
        bob = create_owner(conn, unique_name("bob"))
    url = f"/api/jarvis/supervisor/events?run_id={run.run_id}"
    assert httpx.get(served.url + url).status_code == 401
    resp = login(served.url, bob).get(url)
    assert resp.status_code == 404 and resp.json()["error"] == "not_found"


def test_https_with_a_self_signed_certificate(runtime_env, tmp_path):
    from tests.support.tls import write_self_signed
    from zerg.local.server import make_server

    runtime_env()
    cert, key = write_self_signed(tmp_path, "127.0.0.1")
    server = make_server("127.0.0.1", 0, tls_cert=str(cert), tls_key=str(key)).start()
    try:
        assert server.url.startswith("https://127.0.0.1:")
        trust = ssl.create_default_context(cafile=str(cert))
        resp = httpx.get(f"{server.url}/api/openapi.json", verify=trust, timeout=10)
        assert resp.status_code == 200 and "/api/jarvis/supervisor" in resp.json()["paths"]
        with pytest.raises(httpx.HTTPError):  # plain HTTP on the TLS port is no way in
            httpx.get(f"http://127.0.0.1:{server.port}/api/openapi.json", timeout=5).raise_for_status()
    finally:
        server.stop()


def test_serve_refuses_a_missing_tls_key_in_one_line(tmp_path, capsys):
    from tests.support.tls import write_self_signed
    from zerg.cli import main

    cert, _ = write_self_signed(tmp_path, "127.0.0.1")
    code = main(["serve", "--port", "0", "--tls-cert", str(cert), "--tls-key", str(tmp_path / "missing.pem")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "--tls-key" in err and "missing.pem" in err and "Traceback" not in err
    assert main(["serve", "--port", "0", "--tls-cert", str(cert)]) == 2
    assert "both --tls-cert and --tls-key" in capsys.readouterr().err
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a key")
    assert main(["serve", "--port", "0", "--tls-cert", str(cert), "--tls-key", str(garbage)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--tls-key" in err
    assert not (tmp_path / "zerg-data" / "pg").exists()  # refused before any database was started


def test_an_oversized_body_gets_one_413_and_smuggles_nothing(served, alice):
    token = login(served.url, alice).headers["Authorization"]
    hidden = (f"GET /api/jarvis/thread HTTP/1.1\r\nHost: x\r\nAuthorization: {token}\r\n\r\n").encode()
    head = (b"POST /api/jarvis/supervisor HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 2000000\r\n\r\n")
    response = raw_exchange(served.port, head + hidden * 50)
    assert [line[:12] for line in status_lines(response)] == ["HTTP/1.1 413"], response[:500]
    body = response.split(b"\r\n\r\n", 1)[1]
    assert json.loads(body)["error"] == "payload_too_large"


def test_a_bad_content_length_is_a_400_not_a_hang(served):
    response = raw_exchange(served.port, b"POST /api/jarvis/auth HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}")
    assert status_lines(response)[0].startswith("HTTP/1.1 400")


def test_a_chunked_body_is_a_body_not_a_next_request(served, alice):
    payload = json.dumps({"device_secret": alice.device_secret}).encode()
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (payload[:10], payload[10:])) + b"0\r\n\r\n"
    request = (b"POST /api/jarvis/auth HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
    response = raw_exchange(served.port, request + chunked)
    assert status_lines(response) == ["HTTP/1.1 200 OK"] and b'"token"' in response

    hidden = b"GET /api/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n"
    smuggle = b"%x\r\n%s\r\n0\r\n\r\n" % (len(hidden), hidden)
    response = raw_exchange(served.port, request + smuggle)
    lines = status_lines(response)
    assert len(lines) == 1 and lines[0].startswith("HTTP/1.1 4"), response[:500]  # the auth route's own 4xx


def test_a_chunked_body_over_the_cap_is_refused(served):
    # A real client (httpx sends a generator chunked): it reads the 413 even though the server
    # closes the connection before the rest of the body arrives.
    def body():
        for _ in range(32):
            yield b"x" * 65536  # 2 MiB, no Content-Length

    resp = httpx.post(f"{served.url}/api/jarvis/auth", content=body(), timeout=10)
    assert resp.status_code == 413 and resp.json()["error"] == "payload_too_large"
    assert resp.headers["connection"] == "close"


def test_stopping_the_server_ends_live_streams_promptly(runtime_env, alice, pool):
    from zerg.local.server import make_server

    runtime_env()
    server = make_server("127.0.0.1", 0).start()
    with pool.connection() as conn:
        run = runs.start_run(conn, alice.owner_id, "never ends")
    client = login(server.url, alice)
    with connect_sse(client, "GET", f"/api/jarvis/supervisor/events?run_id={run.run_id}") as source:
        assert next(e for e in source.iter_sse() if e.id).event == "supervisor_started"
        start = time.monotonic()
        server.stop()
        assert time.monotonic() - start < 3  # not the 5 s graceful timeout, not the 30 s heartbeat
        assert server.app.live_streams == 0


def test_headers_over_the_cap_are_refused_without_a_hang(served):
    start = b"GET /api/openapi.json HTTP/1.1\r\nHost: x\r\n"
    big = b"X-Filler: " + b"a" * 40_000 + b"\r\n"
    response = raw_exchange(served.port, start + big + b"\r\n")  # one read: a complete head
    assert status_lines(response)[0].startswith("HTTP/1.1 431"), response[:300]

    with socket.create_connection(("127.0.0.1", served.port), timeout=5) as sock:  # a head that drips in
        sock.sendall(start + big[:20_000])
        time.sleep(0.2)
        try:
            sock.sendall(big[20_000:])
        except OSError:
            pass  # already refused
        try:
            response = sock.recv(65536)
        except ConnectionResetError:
            response = b"(reset)"
    assert response.startswith(b"HTTP/1.1 400") or response == b"(reset)", response[:300]
