"""What http_request may reach: every non-global address (IPv6 forms carrying an IPv4 address
included) and, with ZERG_HTTP_ALLOW_HOSTS, every host outside the allowlist — for the supervisor
and the workers alike, on every redirect hop. Nothing here sends traffic beyond loopback."""

from __future__ import annotations

import ipaddress
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from zerg.config import ConfigError, load_settings
from zerg.egress import host_allowed, refusal
from zerg.loop.tool import ToolContext, invoke
from zerg.supervisor.turn import supervisor_tools
from zerg.tools.catalog import worker_tools
from zerg.tools.http import HTTPRequestArgs, make_http_request


def ctx_for(**env) -> ToolContext:
    return ToolContext(settings=load_settings(env))


def why(text: str) -> str | None:
    return refusal(ipaddress.ip_address(text))


EMBEDDED_FORMS = [  # (address, words the refusal must contain)
    ("::127.0.0.1", ["IPv4-compatible", "127.0.0.1", "loopback"]),
    ("::10.1.2.3", ["IPv4-compatible", "10.1.2.3", "private"]),
    ("::ffff:127.0.0.1", ["IPv4-mapped", "127.0.0.1", "loopback"]),
    ("::ffff:192.168.1.1", ["IPv4-mapped", "192.168.1.1", "private"]),
    ("::ffff:169.254.169.254", ["IPv4-mapped", "cloud metadata"]),
    ("::ffff:0:127.0.0.1", ["IPv4-translated", "127.0.0.1", "loopback"]),
    ("64:ff9b::7f00:1", ["NAT64", "127.0.0.1", "loopback"]),
    ("64:ff9b::a9fe:a9fe", ["NAT64", "cloud metadata"]),
    ("64:ff9b::a00:1", ["NAT64", "10.0.0.1", "private"]),
    ("64:ff9b:1::7f00:1", ["local-use NAT64", "127.0.0.1", "loopback"]),
    ("64:ff9b:1::808:808", ["local-use NAT64", "not globally routable"]),
    ("2002:7f00:1::1", ["6to4", "127.0.0.1", "loopback"]),
    ("2002:a9fe:a9fe::1", ["6to4", "cloud metadata"]),
    ("2002:c0a8:101::1", ["6to4", "192.168.1.1", "private"]),
    ("2001:0:7f00:1::1", ["Teredo", "127.0.0.1", "loopback"]),  # the Teredo server is 127.0.0.1
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", ["Teredo", "192.0.2.45", "documentation"]),  # the client
]

OTHER_NON_GLOBAL = [
    ("::", "unspecified"), ("0.0.0.0", "unspecified"), ("::1", "loopback"), ("127.0.0.5", "loopback"),
    ("ff02::1", "multicast"), ("ff0e::1", "multicast"), ("224.0.0.251", "multicast"),
    ("fe80::1", "link-local"), ("169.254.10.10", "link-local"), ("fec0::1", "site-local"),
    ("fc00::1", "unique local"), ("fd12:3456::1", "unique local"), ("fd00:ec2::254", "unique local"),
    ("2001:db8::1", "documentation"), ("3fff::1", "documentation"), ("192.0.2.1", "documentation"),
    ("198.51.100.7", "documentation"), ("203.0.113.9", "documentation"), ("10.0.0.1", "private"),
    ("172.16.5.4", "private"), ("192.168.0.1", "private"), ("100.64.0.1", "carrier-grade NAT"),
    ("198.18.0.1", "benchmarking"), ("240.0.0.1", "reserved"), ("255.255.255.255", "reserved"),
    ("5f00::1", "SRv6"), ("100::1", "discard-only"), ("4000::1", "outside the global unicast range"),
    ("2001:2::1", "not globally routable"),
]


@pytest.mark.parametrize(("address", "words"), EMBEDDED_FORMS)
def test_ipv6_forms_embedding_a_non_global_ipv4_are_refused_naming_the_form_and_the_ipv4(address, words):
    reason = why(address)
    assert reason is not None, f"{address} was let through"
    for word in words:
        assert word in reason, (address, reason)


@pytest.mark.parametrize(("address", "word"), OTHER_NON_GLOBAL)
def test_every_other_non_global_range_is_refused_with_its_name(address, word):
    reason = why(address)
    assert reason is not None and word in reason, (address, reason)


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "2a00:1450:4001::1",
                                     "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"])
def test_public_addresses_and_forms_carrying_a_public_ipv4_pass(address):
    assert why(address) is None  # DNS64 answers NAT64 addresses for public hosts: those must work


@pytest.mark.parametrize(("address", "words"), EMBEDDED_FORMS[::2] + [("fec0::1", ["site-local"])])
def test_http_request_refuses_the_ipv6_forms_before_connecting(address, words):
    tool = worker_tools()["http_request"]
    out = invoke({"http_request": tool}, "http_request", json.dumps({"url": f"http://[{address}]:9/x"}), ctx_for())
    assert not out.ok and out.text.startswith("ERROR: ") and "refused" in out.text
    assert all(word in out.text for word in words), out.text


def test_an_allowed_network_still_admits_its_ipv4_mapped_form():
    """ZERG_HTTP_ALLOW_NETWORKS=127.0.0.0/8 covers ::ffff:127.0.0.1 (the same connection), not the
    NAT64 or 6to4 forms of it, which would go elsewhere."""
    from zerg.tools.http import check_destination

    ctx = ctx_for(ZERG_HTTP_ALLOW_NETWORKS="127.0.0.0/8")
    for address, ok in (("::ffff:127.0.0.1", True), ("64:ff9b::7f00:1", False), ("2002:7f00:1::1", False)):
        reason, target = check_destination("http://h.example/", ctx, lambda h, p, a=address: [a])
        assert (reason is None) is ok, (address, reason)


# --- ZERG_HTTP_ALLOW_HOSTS --------------------------------------------------------------------

def test_host_patterns_match_names_subdomains_and_addresses_only():
    patterns = ("api.github.com", "*.example.org", "203.0.113.7", "2001:db8::1")
    assert host_allowed("api.github.com", patterns) and host_allowed("API.GitHub.com.", patterns)
    assert host_allowed("a.example.org", patterns) and host_allowed("b.a.example.org", patterns)
    assert not host_allowed("example.org", patterns)  # a wildcard means subdomains
    assert not host_allowed("github.com", patterns) and not host_allowed("api.github.com.evil.net", patterns)
    assert not host_allowed("evilexample.org", patterns) and not host_allowed("example.org.evil.net", patterns)
    assert host_allowed("203.0.113.7", patterns) and host_allowed("2001:0db8::0001", patterns)
    assert not host_allowed("203.0.113.8", patterns)


@pytest.mark.parametrize("bad", ["*", "*.org", "https://api.github.com", "a..b", "exa mple.com", "api.github.com/x"])
def test_a_bad_host_pattern_fails_at_start_naming_the_variable(bad):
    with pytest.raises(ConfigError, match=r"invalid ZERG_HTTP_ALLOW_HOSTS=.*is not a host pattern"):
        load_settings({"ZERG_HTTP_ALLOW_HOSTS": bad})


def test_unset_allow_hosts_means_any_public_host():
    assert load_settings({}).http_allow_hosts == ()
    assert load_settings({"ZERG_HTTP_ALLOW_HOSTS": "API.github.com, *.Example.org."}).http_allow_hosts == (
        "api.github.com", "*.example.org")


SEEN: list[tuple[str, str | None]] = []  # (path, Host header) of each request the web fixture got


@pytest.fixture
def web():
    """A loopback server: /ok answers, /away redirects to another host."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):  # noqa: N802
            SEEN.append((self.path, self.headers.get("Host")))
            if self.path == "/host":
                body = f"host={self.headers.get('Host')}".encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            if self.path == "/credentials":
                self.send_response(302)
                self.send_header("Location", f"http://user:hunter2@localhost:{self.server.server_address[1]}/host")
                self.end_headers()
                return
            if self.path == "/away":
                self.send_response(302)
                self.send_header("Location", f"http://elsewhere.example:{self.server.server_address[1]}/ok")
                self.end_headers()
                return
            body = b"reached"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    SEEN.clear()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


@pytest.mark.parametrize("toolset", ["supervisor", "worker"])
def test_allow_hosts_applies_to_supervisor_and_workers_alike(web, toolset):
    tools = supervisor_tools() if toolset == "supervisor" else worker_tools()
    ctx = ctx_for(ZERG_HTTP_ALLOW_HOSTS="localhost", ZERG_HTTP_ALLOW_NETWORKS="127.0.0.0/8,::1/128")
    ok = invoke(tools, "http_request", json.dumps({"url": f"http://localhost:{web}/ok"}), ctx)
    assert ok.ok and "reached" in ok.text
    refused = invoke(tools, "http_request", json.dumps({"url": f"http://127.0.0.1:{web}/ok"}), ctx)
    assert not refused.ok
    assert refused.text == "ERROR: host 127.0.0.1 is not in ZERG_HTTP_ALLOW_HOSTS (localhost): refused"


def test_allow_hosts_is_checked_again_on_every_redirect_hop(web):
    ctx = ctx_for(ZERG_HTTP_ALLOW_HOSTS="*.allowed.example", ZERG_HTTP_ALLOW_NETWORKS="127.0.0.0/8")
    looked_up = []

    def resolve(host, port):
        looked_up.append(host)
        return ["127.0.0.1"]

    out = make_http_request(resolve=resolve)(HTTPRequestArgs(url=f"http://api.allowed.example:{web}/away"), ctx)
    assert not out.ok
    assert out.text == (f"ERROR: redirect to http://elsewhere.example:{web}/ok: host elsewhere.example is not in "
                        "ZERG_HTTP_ALLOW_HOSTS (*.allowed.example): refused")
    assert looked_up == ["api.allowed.example"]  # the refused host was never even resolved


def test_an_allowed_host_resolving_to_a_private_address_is_still_refused():
    ctx = ctx_for(ZERG_HTTP_ALLOW_HOSTS="intranet.example")
    out = make_http_request(resolve=lambda h, p: ["10.0.0.8"])(HTTPRequestArgs(url="http://intranet.example/"), ctx)
    assert not out.ok and "10.0.0.8, a private address: refused" in out.text


LOOPBACK = {"ZERG_HTTP_ALLOW_NETWORKS": "127.0.0.0/8"}


@pytest.mark.parametrize(("host", "expected"), [
    ("API.Example.test", "api.example.test:{port}"),
    ("[2001:db8::5]", "[2001:db8::5]:{port}"),
    ("user:hunter2@api.example.test", None),
])
def test_the_host_header_is_the_host_name_and_port_never_url_credentials(web, host, expected):
    out = make_http_request(resolve=lambda h, p: ["127.0.0.1"])(
        HTTPRequestArgs(url=f"http://{host}:{web}/host"), ctx_for(**LOOPBACK))
    if expected is None:
        assert not out.ok and out.text == ("ERROR: URLs with credentials (user:password@host) are refused: "
                                           "send them in an Authorization header instead")
        assert SEEN == [] and "hunter2" not in out.text  # nothing was sent
    else:
        assert out.ok and f"host={expected.format(port=web)}" in out.text


def test_a_redirect_to_a_url_with_credentials_is_refused_without_echoing_them(web):
    out = make_http_request()(HTTPRequestArgs(url=f"http://localhost:{web}/credentials"),
                              ctx_for(ZERG_HTTP_ALLOW_NETWORKS="127.0.0.0/8,::1/128"))
    assert not out.ok and "hunter2" not in out.text
    assert out.text.startswith(f"ERROR: redirect to http://localhost:{web}/host: URLs with credentials")
    assert [path for path, _ in SEEN] == ["/credentials"]


def test_a_default_port_stays_out_of_the_host_header():
    from zerg.tools.http import _pinned

    assert _pinned("https://api.example.test:443/x", "192.0.2.1")[1] == {"Host": "api.example.test"}
    assert _pinned("http://[2001:db8::1]:80/", "2001:db8::1") == (
        "http://[2001:db8::1]:80/", {"Host": "[2001:db8::1]"}, {})
