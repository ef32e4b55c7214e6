"""Valid values of each named format of the OpenAPI document (``zerg.api.docs.FORMATS``), for the
fuzz run: schemathesis generates a field with a format it knows from these, so a request its
positive phase calls valid really is, and the API must accept it. Each strategy yields a subset of
what the format allows (the API may accept more), never a value outside it."""

from __future__ import annotations

import base64
import functools
import string
from datetime import date

from hypothesis import strategies as st


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@functools.cache
def _keys() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(private keys, public key lines): Ed25519 and ECDSA P-256, made once."""
    from cryptography.hazmat.primitives import serialization as ser
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    made = [ed25519.Ed25519PrivateKey.generate() for _ in range(2)] + [ec.generate_private_key(ec.SECP256R1())]
    private = tuple(k.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.OpenSSH, ser.NoEncryption()).decode()
                    for k in made)
    public = tuple(k.public_key().public_bytes(ser.Encoding.OpenSSH, ser.PublicFormat.OpenSSH).decode() for k in made)
    return private, public


@functools.cache
def _points() -> tuple[str, ...]:
    from cryptography.hazmat.primitives import serialization as ser
    from cryptography.hazmat.primitives.asymmetric import ec

    return tuple(_b64url(ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        ser.Encoding.X962, ser.PublicFormat.UncompressedPoint)) for _ in range(3))


def _zones() -> list[str]:
    from zerg.timezones import known_timezones

    return sorted(known_timezones())


WORD = string.ascii_lowercase + string.digits
_segment = st.text(WORD + "éж_-", min_size=1, max_size=12)
_path = st.lists(_segment, min_size=1, max_size=4).map("/".join)
_artifact_name = st.from_regex(r"[a-z0-9_][a-z0-9_.-]{0,20}", fullmatch=True)
_tag = st.text(WORD + "é_.:-", min_size=1, max_size=20)
_printable = st.text(st.characters(categories=("L", "N", "P", "S")) | st.just(" "), max_size=60)
_future = st.builds("{:04d}-{:02d}-{:02d}T{:02d}:{:02d}".format, st.integers(2100, 2199), st.integers(1, 12),
                    st.integers(1, 28), st.integers(0, 23), st.integers(0, 59))


def _clock(h: int, m: int) -> str:
    return f"{h:02d}:{m:02d}"


STRATEGIES = {
    "openssh-private-key": st.deferred(lambda: st.sampled_from(_keys()[0])),
    "openssh-public-key": st.deferred(lambda: st.sampled_from(_keys()[1])),
    "device-name": st.text(WORD + " -.'", min_size=1, max_size=64).filter(str.strip),
    "model-id": st.text(WORD + "-.:/", min_size=1, max_size=40),
    "memory-path": _path,
    "memory-prefix": st.one_of(st.just(""), _path, _path.map(lambda p: p + "/")),
    "memory-content": st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=300),
    "memory-title": st.text(st.characters(exclude_categories=("Cc", "Cf", "Cs", "Co", "Cn")), max_size=80),
    "memory-tag": _tag,
    "memory-tag-list": st.lists(_tag, max_size=5).map(",".join),
    "artifact-path": st.lists(_artifact_name, min_size=1, max_size=3).map("/".join),
    "artifact-name": _artifact_name,
    "iana-time-zone": st.deferred(lambda: st.sampled_from(_zones())),
    "quiet-hours": st.one_of(st.just("off"), st.tuples(st.integers(0, 23), st.integers(0, 59), st.integers(0, 23),
                                                       st.integers(0, 59)).filter(lambda t: t[:2] != t[2:]).map(
        lambda t: f"{_clock(*t[:2])}-{_clock(*t[2:])}")),
    "schedule-name": _printable.filter(lambda s: s.strip() and not (s.strip().isascii() and s.strip().isdigit())),
    "cron-expression": st.sampled_from(["0 6 * * 1", "*/15 * * * *", "30 7 1 * *", "0 0 * * 0-4"]),
    "rate-expression": st.builds("{} {}".format, st.integers(1, 300), st.sampled_from(["minutes", "hours"])),
    "schedule-time": _future,
    "ledger-day": st.dates(min_value=date(2000, 1, 1), max_value=date(2099, 12, 31)).map(date.isoformat),
    "email-address": st.builds("{}@{}.example.org".format, st.text(WORD, min_size=1, max_size=12),
                               st.text(WORD, min_size=1, max_size=12)),
    "e164-phone": st.from_regex(r"\+[1-9][0-9]{6,14}", fullmatch=True),
    "push-endpoint": st.text(WORD, min_size=1, max_size=20).map(lambda p: f"https://8.8.8.8/push/{p}"),
    "p256dh": st.deferred(lambda: st.sampled_from(_points())),
    "push-auth": st.binary(min_size=16, max_size=16).map(_b64url),
    "ssh-allow-host": st.one_of(st.just("*"), st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True)),
    "ssh-command-pattern": st.builds(
        " ".join, st.tuples(st.sampled_from(["df", "systemctl", "tail", "docker", "apt", "journalctl"]),
                            st.sampled_from(["-h", "restart nginx", "-n * /var/log/*.log", "ps", "list --upgradable",
                                             "-u web -n 50", "**"]))),
}


def register() -> None:
    """Tell schemathesis how to generate each format."""
    import schemathesis

    for name, strategy in STRATEGIES.items():
        schemathesis.openapi.format(name, strategy)
