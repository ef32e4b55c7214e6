"""Egress policy: which hosts and addresses ``http_request`` may reach, for supervisor and workers alike.

Invariants:
- An address is reachable only when it is globally routable. Python's ``is_global`` is not enough:
  it calls IPv6 forms that *embed* an IPv4 address global (``::127.0.0.1``, ``64:ff9b::7f00:1``,
  ``2002:7f00:1::1``) and it does not know every special-purpose range (site-local ``fec0::/10``,
  the documentation prefix ``3fff::/20``). So every IPv6 form that carries an IPv4 address is
  unpacked and the IPv4 address is checked too, and the ranges ``ipaddress`` misses are listed here.
- Forms that are never routable on the internet (IPv4-compatible ``::a.b.c.d``, IPv4-translated
  ``::ffff:0:a.b.c.d``, local-use NAT64 ``64:ff9b:1::/48``) are refused whatever they embed;
  IPv4-mapped, well-known NAT64 ``64:ff9b::/96`` and 6to4 ``2002::/16`` pass only when the IPv4
  address they carry would pass (a DNS64 resolver answers with NAT64 addresses for public hosts).
- A refusal always says which range the address is in, so the model (and the user) know why.
- The host allowlist (``ZERG_HTTP_ALLOW_HOSTS``) is checked on the URL's host name before any DNS
  lookup; unset, any host with a public address may be reached.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

METADATA = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}

_V4_RANGES = [(ipaddress.ip_network(net), why) for net, why in (
    ("0.0.0.0/8", "'this network' (unspecified)"),
    ("127.0.0.0/8", "loopback"),
    ("10.0.0.0/8", "private"),
    ("172.16.0.0/12", "private"),
    ("192.168.0.0/16", "private"),
    ("169.254.0.0/16", "link-local"),
    ("100.64.0.0/10", "shared address space (carrier-grade NAT)"),
    ("192.0.0.0/24", "IETF protocol assignments"),
    ("192.0.2.0/24", "documentation"),
    ("198.51.100.0/24", "documentation"),
    ("203.0.113.0/24", "documentation"),
    ("198.18.0.0/15", "benchmarking"),
    ("192.88.99.0/24", "deprecated 6to4 relay anycast"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),
)]

_V6_RANGES = [(ipaddress.ip_network(net), why) for net, why in (
    ("ff00::/8", "multicast"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local"),
    ("fc00::/7", "unique local (ULA)"),
    ("2001:db8::/32", "documentation"),
    ("3fff::/20", "documentation"),
    ("5f00::/16", "segment routing (SRv6) SIDs"),
    ("100::/64", "discard-only"),
)]
_GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")

# IPv6 forms that carry an IPv4 address: (range, name, refused whatever it embeds)
_MAPPED = ipaddress.ip_network("::ffff:0:0/96")
_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
_COMPATIBLE = ipaddress.ip_network("::/96")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_SIXTOFOUR = ipaddress.ip_network("2002::/16")
_TEREDO = ipaddress.ip_network("2001::/32")


def _low32(addr: ipaddress.IPv6Address) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)


def _a(what: str) -> str:
    return f"{'an' if what[0] in 'aeioAEIO' else 'a'} {what}"


def _v4_refusal(addr: ipaddress.IPv4Address) -> str | None:
    for net, why in _V4_RANGES:
        if addr in net:
            return why
    if addr.is_multicast or addr.is_reserved or addr.is_unspecified:
        return "reserved"
    if not addr.is_global:
        return "not globally routable"
    return None


def _embedded(addr: ipaddress.IPv6Address) -> tuple[str, list[ipaddress.IPv4Address], bool] | None:
    """(form name, the IPv4 addresses it carries, refused whatever they are) or None."""
    if addr in _MAPPED:
        return "IPv4-mapped", [_low32(addr)], False
    if addr in _TRANSLATED:
        return "IPv4-translated", [_low32(addr)], True
    if addr in _COMPATIBLE:  # ::/96 minus :: and ::1, which the caller names first
        return "IPv4-compatible (deprecated)", [_low32(addr)], True
    if addr in _NAT64:
        return "NAT64", [_low32(addr)], False
    if addr in _NAT64_LOCAL:  # RFC 8215: local use only; the IPv4 position depends on the prefix length
        return "local-use NAT64 (64:ff9b:1::/48)", [_low32(addr)], True
    if addr in _SIXTOFOUR:
        return "6to4", [addr.sixtofour], False
    if addr in _TEREDO:
        server, client = addr.teredo
        return "Teredo", [server, client], False
    return None


def refusal(addr: IPAddress) -> str | None:
    """Why ``addr`` must not be contacted (the range it is in), or None when it is globally routable."""
    if isinstance(addr, ipaddress.IPv4Address):
        why = _v4_refusal(addr)
        return _a(f"{why} address") if why else None
    if addr.is_unspecified:
        return "the unspecified address"
    if addr.is_loopback:
        return "a loopback address"
    if form := _embedded(addr):
        name, carried, always = form
        for v4 in carried:
            if v4 in METADATA:
                return f"{_a(name)} address carrying {v4}, the cloud metadata address"
            if why := _v4_refusal(v4):
                return f"{_a(name)} address carrying {v4}, {_a(why)} address"
        if always:
            return f"{_a(name)} address, not globally routable"
        if name in ("IPv4-mapped", "NAT64"):  # its IPv4 address passed: it is what gets reached
            return None
    for net, why in _V6_RANGES:
        if addr in net:
            return _a(f"{why} address")
    if addr not in _GLOBAL_UNICAST:
        return "an address outside the global unicast range 2000::/3"
    if addr.is_site_local or not addr.is_global:
        return "a special-purpose address, not globally routable"
    return None


def _idna(host: str) -> str | None:
    host = host.lower().rstrip(".")
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return None


def host_allowed(host: str, patterns: Iterable[str]) -> bool:
    """Whether ``host`` matches one of ``patterns`` (``api.github.com``, ``*.example.org``: any
    subdomain of example.org, not example.org itself; an IP address matches itself). Names compare
    case-insensitively, without a trailing dot, internationalised names in their ASCII (IDNA) form."""
    try:
        literal: IPAddress | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    name = None if literal else _idna(host)
    for pattern in patterns:
        if literal is not None:
            try:
                if ipaddress.ip_address(pattern) == literal:
                    return True
            except ValueError:
                continue
        elif name and (name.endswith(pattern[1:]) if pattern.startswith("*.") else name == pattern):
            return True
    return False
