"""Display names of owners and devices: what a person typed, cleaned once, checked the same way.

Invariants:
- A name is NFC-normalised and trimmed, then must be non-empty, printable (no control, format or
  unassigned characters; the only space allowed is U+0020) and within its length bound. A name
  that fails is refused with a message saying exactly why; nothing is silently dropped from inside.
- Uniqueness is the database's rule (unique indexes ignoring case); the table modules turn its
  violation into :class:`NameTaken`.
"""

from __future__ import annotations

import unicodedata

OWNER_NAME_MAX = 200
DEVICE_NAME_MAX = 64
_KINDS = {"Cc": "a control character", "Cf": "a format character", "Cs": "a surrogate",
          "Co": "a private-use character", "Cn": "an unassigned code point"}


class InvalidName(ValueError):
    """A name that cannot be stored; the message says why, for a human."""


class NameTaken(InvalidName):
    """The name is already used (ignoring case) where it must be unique."""


def clean_name(value: str, what: str, limit: int) -> str:
    """``value`` NFC-normalised and trimmed, or :class:`InvalidName` naming the problem."""
    name = unicodedata.normalize("NFC", value).strip()
    if not name:
        raise InvalidName(f"{what} must not be empty or only whitespace")
    if len(name) > limit:
        raise InvalidName(f"{what} is {len(name)} characters; the limit is {limit}")
    bad = next((c for c in name if not c.isprintable()), None)
    if bad is not None:
        kind = unicodedata.name(bad, "") or _KINDS.get(unicodedata.category(bad), "unprintable")
        raise InvalidName(f"{what} must be printable: it contains U+{ord(bad):04X} ({kind})")
    return name


def owner_name(value: str) -> str:
    return clean_name(value, "an owner name", OWNER_NAME_MAX)


def device_name(value: str) -> str:
    return clean_name(value, "a device name", DEVICE_NAME_MAX)
