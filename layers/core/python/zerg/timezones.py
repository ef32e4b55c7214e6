"""Owner-given time zones: the one check every reader of one uses (schedules, the notification
policy, the spending cap's day).

Invariants:
- A name is accepted only if it is in tzdata's list of zones (:func:`zoneinfo.available_timezones`),
  never by a file lookup: ``America`` is a directory there and ``../x`` a path.
- ``localtime``, ``posixrules`` and ``Factory`` are refused although some systems list them: the
  first two are whatever the machine is set to (a Lambda and a laptop differ), and ``Factory`` is
  tzdata's "zone not set" placeholder, so none names a place the owner lives in. EventBridge
  Scheduler refuses them too.
- The list is read once per process (it walks the tzdata directory).
"""

from __future__ import annotations

from functools import lru_cache
from zoneinfo import ZoneInfo

NOT_PLACES = frozenset({"localtime", "posixrules", "Factory"})
SHOWN_MAX = 64  # how much of a bad name an error repeats


@lru_cache(maxsize=1)
def known_timezones() -> frozenset[str]:
    """The IANA zones an owner may give."""
    from zoneinfo import available_timezones

    return frozenset(available_timezones()) - NOT_PLACES


def check_timezone(name: object) -> ZoneInfo:
    """The zone ``name``; ValueError saying why otherwise."""
    if not isinstance(name, str) or name not in known_timezones():
        shown = name[:SHOWN_MAX] if isinstance(name, str) else name
        raise ValueError(f"{shown!r} is not an IANA time zone (e.g. Europe/Berlin, America/New_York, UTC)")
    return ZoneInfo(name)
