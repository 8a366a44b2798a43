"""Time as the vault sees it: canonical UTC stamps and "3 days ago"."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

Clock = Callable[[], dt.datetime]


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def humanize_age(then: str, now: dt.datetime) -> str:
    """"3 days ago": how long since a canonical UTC timestamp."""
    try:
        seconds = (now - dt.datetime.fromisoformat(then)).total_seconds()
    except ValueError:
        return ""
    if seconds < 0:
        return "in the future"
    for unit, size in (("year", 365 * 86400), ("month", 30 * 86400), ("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n != 1 else ''} ago"
    return "just now"


# --------------------------------------------------------------------------- editing


