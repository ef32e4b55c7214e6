"""``zerg serve`` on uvicorn: live SSE, HTTPS, and the HTTP edge cases a raw socket can send."""

from __future__ import annotations

import json
import re
import socket
import ssl
import threading
import time

import httpx
import pytest
from httpx_sse import connect_sse

from tests.support.api import http_login
from tests.support.factories import unique_name
from tests.support.waiting import wait_for
from zerg.owners import create_owner
from zerg.runs import store as runs
from zerg.runs.events import emit


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
    """Every status line in the bytes, also one that follows a body directly (a body has no final CRLF)."""
    return re.findall(r"HTTP/1\.1 \d{3}[^\r\n]*", response.decode("latin-1"))


def json_body(response: bytes) -> dict:
    """The JSON body of the one response in ``response`` (its head says so)."""
    head, _, body = response.partition(b"\r\n\r\n")
    assert b"content-type: application/json" in head.lower(), head
    return json.loads(body)


def test_sse_streams_live_and_a_leaving_client_frees_its_thread(zerg_server, alice, pool):
    with pool.connection() as conn:
        run = runs.start_run(conn, alice.owner_id, "live")  # event 1: supervisor_started
    client = http_login(zerg_server.url, alice)
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
    # Live: each event arrives soon after its write, not at the end of a long-poll (ZERG_SSE_POLL_S,
    # 25 s) nor with the next heartbeat (30 s). Soon is a poll or two when idle; the bound leaves
    # room for a loaded machine and stays well under both.
    assert len(thinking) == 3 and all(0 <= t - e < 10.0 for t, e in zip(thinking, emitted))

    wait_for(lambda: not zerg_server.app.live_streams, "the stream of a client that left to end", limit_s=30)

    with pool.connection() as conn:
        emit(conn, run.run_id, alice.owner_id, "supervisor_complete", {"run_id": run.run_id, "result": "ok"})
    with connect_sse(client, "GET", url, headers={"Last-Event-ID": "0"}) as source:
        kinds = [s.event for s in source.iter_sse() if s.id]
    assert kinds[-1] == "supervisor_complete" and len(kinds) == 5  # the stream ends at the final event


def test_sse_checks_auth_and_ownership_before_streaming(zerg_server, alice, pool):
    with pool.connection() as conn:
        run = runs.start_run(conn, alice.owner_id, "mine")
        bob = create_owner(conn, unique_name("bob"))
    url = f"/api/jarvis/supervisor/events?run_id={run.run_id}"
    assert httpx.get(zerg_server.url + url).status_code == 401
    resp = http_login(zerg_server.url, bob).get(url)
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
    from zerg.cli.main import main

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


def test_an_oversized_body_gets_one_413_and_smuggles_nothing(zerg_server, alice):
    token = http_login(zerg_server.url, alice).headers["Authorization"]
    hidden = (f"GET /api/jarvis/thread HTTP/1.1\r\nHost: x\r\nAuthorization: {token}\r\n\r\n").encode()
    head = (b"POST /api/jarvis/supervisor HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 2000000\r\n\r\n")
    response = raw_exchange(zerg_server.port, head + hidden * 50)
    assert [line[:12] for line in status_lines(response)] == ["HTTP/1.1 413"], response[:500]
    body = response.split(b"\r\n\r\n", 1)[1]
    assert json.loads(body)["error"] == "payload_too_large"


def test_a_chunked_body_is_a_body_not_a_next_request(zerg_server, alice):
    payload = json.dumps({"device_secret": alice.device_secret}).encode()
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (payload[:10], payload[10:])) + b"0\r\n\r\n"
    request = (b"POST /api/jarvis/auth HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
    response = raw_exchange(zerg_server.port, request + chunked)
    assert status_lines(response) == ["HTTP/1.1 200 OK"] and b'"token"' in response

    hidden = b"GET /api/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n"
    smuggle = b"%x\r\n%s\r\n0\r\n\r\n" % (len(hidden), hidden)
    response = raw_exchange(zerg_server.port, request + smuggle)
    lines = status_lines(response)
    assert len(lines) == 1 and lines[0].startswith("HTTP/1.1 4"), response[:500]  # the auth route's own 4xx


def test_a_chunked_body_over_the_cap_is_refused(zerg_server):
    # A real client (httpx sends a generator chunked): it reads the 413 even though the server
    # closes the connection before the rest of the body arrives.
    def body():
        for _ in range(32):
            yield b"x" * 65536  # 2 MiB, no Content-Length

    resp = httpx.post(f"{zerg_server.url}/api/jarvis/auth", content=body(), timeout=10)
    assert resp.status_code == 413 and resp.json()["error"] == "payload_too_large"
    assert resp.headers["connection"] == "close"


def test_stopping_the_server_ends_live_streams_promptly(runtime_env, alice, pool):
    from zerg.local.server import make_server

    runtime_env()
    server = make_server("127.0.0.1", 0).start()
    with pool.connection() as conn:
        run = runs.start_run(conn, alice.owner_id, "never ends")
    client = http_login(server.url, alice)
    with connect_sse(client, "GET", f"/api/jarvis/supervisor/events?run_id={run.run_id}") as source:
        assert next(e for e in source.iter_sse() if e.id).event == "supervisor_started"
        start = time.monotonic()
        server.stop()
        assert time.monotonic() - start < 3  # not the 5 s graceful timeout, not the 30 s heartbeat
        assert server.app.live_streams == 0


def test_headers_over_the_cap_are_refused_without_a_hang(zerg_server):
    start = b"GET /api/openapi.json HTTP/1.1\r\nHost: x\r\n"
    big = b"X-Filler: " + b"a" * 40_000 + b"\r\n"
    response = raw_exchange(zerg_server.port, start + big + b"\r\n")  # one read: a complete head
    assert status_lines(response)[0].startswith("HTTP/1.1 431"), response[:300]

    with socket.create_connection(("127.0.0.1", zerg_server.port), timeout=5) as sock:  # a head that drips in
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
    assert response.startswith(b"HTTP/1.1 431") or response == b"(reset)", response[:300]
    if response != b"(reset)":
        assert json_body(response) == {"error": "headers_too_large", "message": "request line and headers over 32768 bytes"}


# --- what the server answers by itself ---------------------------------------------------------

HIDDEN = b"GET /api/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n"  # answered 200 if ever parsed as a request


@pytest.mark.parametrize(("head", "status", "fragment"), [
    (b"POST /api/jarvis/auth HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}", 400, "bad Content-Length"),
    (b"POST /api/jarvis/auth HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400, "bad Content-Length"),
    (b"POST /api/jarvis/auth HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 40\r\n\r\n{}", 400,
     "conflicting Content-Length"),
    (b"POST /api/jarvis/auth HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n", 501,
     "Only Transfer-Encoding: chunked is supported"),
    # h11 would follow the chunks (an empty body) and answer HIDDEN; a proxy in front could follow the length.
    (b"POST /api/jarvis/auth HTTP/1.1\r\nHost: x\r\nContent-Length: 48\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
     400, "must not declare both Content-Length and Transfer-Encoding"),
    (b"POST /api/jarvis/auth HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", 400,
     "malformed HTTP request"),
    (b"GET /api/jarvis/thread HTTP/1.1\r\nHost: x\r\nX-Note: a\x00b\r\n\r\n", 400, "malformed HTTP request"),
    (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400, "illegal request line"),  # TLS on the plain port
    (b"GET /api/openapi.json HTTP/1.1\r\nHost: x\r\n" + b"X-A: b\r\n" * 6000 + b"\r\n", 431, "request line and headers"),
], ids=["content-length-abc", "content-length-negative", "two-content-lengths", "unknown-transfer-encoding",
        "content-length-and-chunked", "bad-chunk-size", "nul-in-a-header", "tls-hello", "head-over-the-cap"])
def test_a_malformed_request_gets_one_json_error_and_nothing_after_it_is_read(zerg_server, head, status, fragment, caplog):
    response = raw_exchange(zerg_server.port, head + HIDDEN)  # returns once the server closes
    assert [line[:12] for line in status_lines(response)] == [f"HTTP/1.1 {status}"], response[:600]
    body = json_body(response)
    assert set(body) == {"error", "message"} and fragment in body["message"], body
    assert "Traceback" not in caplog.text


@pytest.fixture
def quick_deadlines(monkeypatch):
    """Short head, body and keep-alive deadlines, set before the server is made."""
    from zerg.local import http11, server

    monkeypatch.setattr(http11, "HEAD_TIMEOUT_S", 0.5)
    monkeypatch.setattr(server, "BODY_TIMEOUT_S", 0.5)
    monkeypatch.setattr(server, "KEEP_ALIVE_S", 0.5)


@pytest.fixture
def quick(runtime_env, quick_deadlines):
    from zerg.local.server import make_server

    runtime_env()
    server = make_server("127.0.0.1", 0).start()
    yield server
    server.stop()


def test_a_silent_or_slow_client_is_cut_off_at_the_head_and_body_deadlines(quick):
    # Connects and says nothing: closed without a word.
    assert raw_exchange(quick.port, b"") == b""
    # Half a head: 408.
    response = raw_exchange(quick.port, b"GET /api/jarvis/thread HTTP/1.1\r\nHost: x\r\n")
    assert status_lines(response) == ["HTTP/1.1 408 Request Timeout"]
    assert json_body(response) == {"error": "request_timeout", "message": "the request head did not arrive within 0.5 s"}
    # Half a body: 408, and the connection closes (its remaining bytes are never a request).
    response = raw_exchange(quick.port, b"POST /api/jarvis/auth HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                        b"Content-Length: 100\r\n\r\n{\"device_secret\": ")
    assert status_lines(response)[0].startswith("HTTP/1.1 408")
    assert json_body(response)["message"] == "the request body did not arrive within 0.5 s"


def test_a_head_dripped_a_byte_at_a_time_does_not_hold_the_connection(quick):
    # Every byte restarts uvicorn's keep-alive timer; the head deadline does not move.
    head = b"GET /api/jarvis/thread HTTP/1.1\r\nHost: x\r\n" + b"X-Drip: " + b"a" * 400
    with socket.create_connection(("127.0.0.1", quick.port), timeout=10) as sock:
        sent = 0
        for byte in head:
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                break
            sent += 1
            time.sleep(0.01)
        response = b""
        while chunk := sock.recv(65536):
            response += chunk
    assert sent < len(head), "the server read the whole dripped head"
    assert status_lines(response) == ["HTTP/1.1 408 Request Timeout"]


def test_keep_alive_answers_pipelined_requests_in_order_then_closes_an_idle_connection(quick):
    requests = (b"GET /api/jarvis/thread HTTP/1.1\r\nHost: x\r\n\r\n"
                b"GET /api/jarvis/nothing HTTP/1.1\r\nHost: x\r\n\r\n"
                b"DELETE /api/jarvis/thread HTTP/1.1\r\nHost: x\r\n\r\n")
    # No request asked to close: raw_exchange returns because the server closed the connection once
    # it idled after the last answer (a connection left open would fail it at its 5 s bound).
    response = raw_exchange(quick.port, requests)
    assert [line[:12] for line in status_lines(response)] == ["HTTP/1.1 401", "HTTP/1.1 404", "HTTP/1.1 405"]
    assert b"connection: close" not in response.lower()


def test_expect_100_continue_with_an_oversized_body_gets_413_and_no_continue(zerg_server):
    response = raw_exchange(zerg_server.port, b"POST /api/jarvis/supervisor HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                         b"Content-Length: 5000000\r\nExpect: 100-continue\r\n\r\n")
    assert [line[:12] for line in status_lines(response)] == ["HTTP/1.1 413"], response[:300]
    assert b"100 Continue" not in response and json_body(response)["error"] == "payload_too_large"


def test_past_the_connection_cap_a_request_gets_503_json_with_retry_after(runtime_env, monkeypatch):
    from zerg.local import server as local_server

    runtime_env()
    monkeypatch.setattr(local_server, "MAX_CONNECTIONS", 2)
    server = local_server.make_server("127.0.0.1", 0).start()
    held = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(2)]
    try:
        for sock in held:  # answered, then idle on keep-alive: each still counts
            sock.sendall(b"GET /api/jarvis/nothing HTTP/1.1\r\nHost: x\r\n\r\n")
            assert status_lines(sock.recv(65536))[0].startswith("HTTP/1.1 404")
        resp = httpx.get(f"{server.url}/api/jarvis/thread", timeout=10)
        assert (resp.status_code, resp.headers["retry-after"], resp.headers["connection"]) == (503, "1", "close")
        assert resp.json() == {"error": "unavailable", "message": "the server is at its limit of 2 connections; retry shortly"}
    finally:
        for sock in held:
            sock.close()
    status = wait_for(lambda: (code := httpx.get(f"{server.url}/api/jarvis/thread", timeout=30).status_code) != 503
                      and code, "the held connections to leave the count", limit_s=60)
    assert status == 401
    server.stop()


def test_a_bug_in_the_adapter_is_a_json_500_without_a_trace(zerg_server, monkeypatch, caplog):
    from zerg.local import server as local_server

    def broken(*args, **kwargs):
        raise KeyError("a bug")

    monkeypatch.setattr(local_server, "to_apigw_event", broken)
    resp = httpx.get(f"{zerg_server.url}/api/jarvis/thread", timeout=10)
    assert (resp.status_code, resp.json()) == (500, {"error": "internal_error", "message": "internal error"})
    assert "Traceback" not in resp.text and "a bug" not in resp.text
    assert "the local server failed a request" in caplog.text  # the bug is in the log, for us


def test_the_deadlines_never_cut_a_live_stream_or_a_keep_alive_client_that_keeps_asking(quick, alice, pool):
    with pool.connection() as conn:
        run = runs.start_run(conn, alice.owner_id, "long")
    client = http_login(quick.url, alice)
    with connect_sse(client, "GET", f"/api/jarvis/supervisor/events?run_id={run.run_id}") as source:
        events = (e for e in source.iter_sse() if e.id)
        assert next(events).event == "supervisor_started"
        time.sleep(1.5)  # three head deadlines: the stream is a request in progress, not an idle connection
        with pool.connection() as conn:
            emit(conn, run.run_id, alice.owner_id, "supervisor_complete", {"run_id": run.run_id, "result": "ok"})
        assert next(events).event == "supervisor_complete"
    with httpx.Client(base_url=quick.url, timeout=10) as keep:  # one connection, a request every 0.2 s
        for _ in range(8):
            assert keep.get("/api/jarvis/thread").status_code == 401
            time.sleep(0.2)


def test_keep_alive_responses_are_not_held_back_by_nagle(zerg_server):
    """Every accepted connection has TCP_NODELAY: uvicorn writes a response's head and body
    separately, and with Nagle on each keep-alive response after the first waited for the client's
    delayed ACK (~40 ms per request, measured)."""
    with socket.create_connection(("127.0.0.1", zerg_server.port)) as client:
        client.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n")
        client.recv(65536)  # answered: uvicorn has made the connection
        connections = list(zerg_server.server.server_state.connections)
        assert connections
        for protocol in connections:
            sock = protocol.transport.get_extra_info("socket")
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
