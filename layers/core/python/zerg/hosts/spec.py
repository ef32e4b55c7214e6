"""What an owner may register as an SSH host, checked before anything is stored or sealed.

Invariants:
- An alias is 1-64 of ``[A-Za-z0-9._-]``, starting with a letter or digit (the database checks the
  same pattern); it is a path segment of the API and a word the model uses.
- A hostname is a name or an IP address the owner chose (private addresses included: home servers
  are the point); no spaces, control characters or a leading ``-``.
- The private key is an unencrypted Ed25519, ECDSA or RSA (2048-4096 bits) key that paramiko reads.
  An encrypted key is refused rather than stored with its passphrase: the passphrase would sit
  next to the key under the same protection, adding nothing but a second secret to leak.
- The pinned host key is one public key in OpenSSH (``ssh-ed25519 AAAA...``) or known_hosts
  (``host ssh-ed25519 AAAA...``) form; it is stored as ``type base64``. The pin is required:
  no trust on first use unless the operator asks for a scan (``zerg hosts add --scan-host-key``).
- No message raised here quotes the private key.
"""

from __future__ import annotations

import base64
import binascii
import io
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from zerg.validation import json_int

ALIAS_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
_ALIAS = re.compile(ALIAS_PATTERN)
HOSTNAME_PATTERN = r"^(?!.*\.\.)[A-Za-z0-9_.:][A-Za-z0-9_.:-]{0,252}$"  # no ".." anywhere
USER_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$"
_HOSTNAME = re.compile(HOSTNAME_PATTERN)
_USER = re.compile(USER_PATTERN)
PRIVATE_KEY_MAX_BYTES = 4096  # an RSA-4096 key in OpenSSH form is ~3.4 KB; KMS encrypts ≤ 4096 bytes
HOST_KEY_MAX_CHARS = 8192
HOST_KEY_TYPES = ("ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "ssh-rsa")
RSA_BITS = (2048, 4096)


class HostInputError(ValueError):
    """A field of a host is invalid; the message names the rule, never the key."""


def check_alias(alias: str) -> str:
    if not isinstance(alias, str) or not _ALIAS.fullmatch(alias):
        raise HostInputError("an alias is 1-64 characters of letters, digits, '.', '_' and '-', "
                             "starting with a letter or digit")
    return alias


def check_hostname(hostname: str) -> str:
    if not _HOSTNAME.fullmatch(hostname):
        raise HostInputError("a hostname is a DNS name or an IP address: letters, digits, '.', '-', '_' "
                             "and ':' only (no spaces or control characters), not starting with '-'")
    return hostname


def check_user(user: str) -> str:
    if not _USER.fullmatch(user):
        raise HostInputError("a user name is 1-64 characters of letters, digits, '.', '_' and '-', "
                             "not starting with '.' or '-'")
    return user


@dataclass(frozen=True)
class ClientKey:
    pkey: Any  # paramiko.PKey
    key_type: str  # "ssh-ed25519", "ecdsa-sha2-nistp256", "ssh-rsa"
    fingerprint: str  # "SHA256:..." as ssh-keygen -l prints it


def parse_private_key(text: str) -> ClientKey:
    """The key, if it is an unencrypted Ed25519, ECDSA or RSA private key (else HostInputError)."""
    import paramiko

    if len(text.encode()) > PRIVATE_KEY_MAX_BYTES:
        raise HostInputError(f"a private key is at most {PRIVATE_KEY_MAX_BYTES} bytes (RSA keys up to 4096 bits)")
    if "PRIVATE KEY-----" not in text:
        raise HostInputError("not a private key: expected a PEM/OpenSSH block "
                             "('-----BEGIN OPENSSH PRIVATE KEY-----'); give the private key, not the .pub")
    for cls in (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey):
        try:
            key = cls.from_private_key(io.StringIO(text))
        except paramiko.PasswordRequiredException:
            raise HostInputError("the private key is encrypted with a passphrase; Zerg stores keys sealed "
                                 "and refuses passphrases: give a decrypted copy "
                                 "(cp KEY COPY && ssh-keygen -p -N '' -f COPY)") from None
        except (paramiko.SSHException, ValueError, TypeError, IndexError, binascii.Error):
            continue
        if isinstance(key, paramiko.RSAKey) and not RSA_BITS[0] <= key.get_bits() <= RSA_BITS[1]:
            raise HostInputError(f"an RSA key must have {RSA_BITS[0]}-{RSA_BITS[1]} bits, this one has {key.get_bits()}")
        return ClientKey(key, key.get_name(), key.fingerprint)
    raise HostInputError("not a readable Ed25519, ECDSA or RSA private key in OpenSSH or traditional PEM form "
                         "(ssh-keygen -p -f COPY rewrites a key as OpenSSH; DSA and security keys are not supported)")


@dataclass(frozen=True)
class PinnedHostKey:
    line: str  # "ssh-ed25519 AAAA..."
    key_type: str
    fingerprint: str


def parse_host_key(text: str) -> PinnedHostKey:
    """One public host key from an OpenSSH public key or a known_hosts line."""
    import paramiko

    if len(text) > HOST_KEY_MAX_CHARS:
        raise HostInputError(f"a host key is at most {HOST_KEY_MAX_CHARS} characters")
    lines = [line for line in text.strip().splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if len(lines) != 1:
        raise HostInputError("give exactly one host key line ('ssh-ed25519 AAAA...'), "
                             f"got {len(lines)} (ssh-keyscan -t ed25519 HOST prints one)")
    tokens = lines[0].split()
    if tokens and tokens[0].startswith("@"):
        raise HostInputError(f"known_hosts markers ({tokens[0]}) are not supported: pin the host's own key")
    where = next((i for i, t in enumerate(tokens) if t in HOST_KEY_TYPES), None)
    if where is None or where + 1 >= len(tokens):
        raise HostInputError(f"not an OpenSSH public key line: expected one of {', '.join(HOST_KEY_TYPES)} "
                             "followed by the base64 key")
    key_type, b64 = tokens[where], tokens[where + 1]
    try:
        key = paramiko.PKey.from_type_string(key_type, base64.b64decode(b64, validate=True))
    except (binascii.Error, ValueError, paramiko.SSHException, TypeError, IndexError):
        raise HostInputError(f"the {key_type} host key does not decode (base64 of an SSH public key expected)") from None
    if key.get_name() != key_type:
        raise HostInputError(f"the host key says {key_type} but holds a {key.get_name()} key")
    return PinnedHostKey(f"{key_type} {key.get_base64()}", key_type, key.fingerprint)


def host_key_fingerprint(line: str | None) -> str | None:
    """The fingerprint of a pin, or None when there is none or it does not parse."""
    if not line:
        return None
    try:
        return parse_host_key(line).fingerprint
    except HostInputError:
        return None


def scan_host_key(hostname: str, port: int, timeout: float = 5.0) -> PinnedHostKey:
    """The key the server presents now (trust on first use, done only when the operator asks)."""
    import socket

    import paramiko

    try:
        sock = socket.create_connection((hostname, port), timeout=timeout)
    except OSError as exc:
        raise HostInputError(f"cannot reach {hostname}:{port} to read its host key ({exc.strerror or exc})") from None
    transport = paramiko.Transport(sock)
    try:
        transport.start_client(timeout=timeout)
        key = transport.get_remote_server_key()
    except (paramiko.SSHException, EOFError, OSError) as exc:
        raise HostInputError(f"{hostname}:{port} did not complete an SSH handshake ({exc})") from None
    finally:
        transport.close()
    return PinnedHostKey(f"{key.get_name()} {key.get_base64()}", key.get_name(), key.fingerprint)


class HostSpec(BaseModel):
    """A host's fields as the API body and ``zerg hosts add`` give them (the alias is separate)."""

    model_config = ConfigDict(extra="forbid")

    # The document states each check below (pattern, format) without pydantic enforcing it a second
    # time: the validators' messages name the rule.
    hostname: str = Field(min_length=1, max_length=253, description="DNS name or IP address",
                          json_schema_extra={"pattern": HOSTNAME_PATTERN})
    port: json_int(ge=1, le=65535) = 22
    user: str = Field(min_length=1, max_length=64, description="The login name on the server",
                      json_schema_extra={"pattern": USER_PATTERN})
    private_key: SecretStr = Field(
        min_length=1, max_length=PRIVATE_KEY_MAX_BYTES,
        description=f"Unencrypted OpenSSH/PEM Ed25519, ECDSA or RSA (2048-4096 bit) private key, at most "
                    f"{PRIVATE_KEY_MAX_BYTES} bytes; sealed at rest, never returned",
        json_schema_extra={"format": "openssh-private-key"})
    host_key: str = Field(min_length=1, max_length=HOST_KEY_MAX_CHARS,
                          description="The server's public host key to pin: one 'ssh-ed25519 AAAA...' line "
                                      f"({', '.join(HOST_KEY_TYPES)}) or a known_hosts line",
                          json_schema_extra={"format": "openssh-public-key"})

    @field_validator("hostname")
    @classmethod
    def _hostname(cls, value: str) -> str:
        return check_hostname(value)

    @field_validator("user")
    @classmethod
    def _user(cls, value: str) -> str:
        return check_user(value)

    @field_validator("private_key")
    @classmethod
    def _private_key(cls, value: SecretStr) -> SecretStr:
        parse_private_key(value.get_secret_value())
        return value

    @field_validator("host_key")
    @classmethod
    def _host_key(cls, value: str) -> str:
        return parse_host_key(value).line
