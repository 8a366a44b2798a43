"""Reading a source the importers share: a file's text, JSON, times (pure)."""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

from ...note.render import to_utc
from ...errors import InvalidInput
from ...limits import load_json


def read_text(source: Any, what: str) -> str | None:
    """The text of ``source`` when it is a path, else None (it is parsed data)."""
    if not isinstance(source, os.PathLike):
        return None
    try:
        with open(source, encoding="utf-8-sig") as handle:
            return handle.read()
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{os.fspath(source)} is not UTF-8 text (byte {exc.start}), so it cannot be read as {what}; "
                           "save it as UTF-8 and import it again. Nothing was imported.") from None
    except OSError as exc:
        raise InvalidInput(f"Cannot read {os.fspath(source)} as {what}: {exc.strerror or exc}; "
                           "nothing was imported.") from exc


def read_json(source: Any) -> Any:
    """``source`` parsed when it is a path to a JSON file, else as it is."""
    text = read_text(source, "JSON")
    if text is None:
        return source
    return load_json(text, os.fspath(source))


def millis(value: Any, what: str) -> int:
    """A source's time as milliseconds since the epoch (UTC), to date a derived id."""
    try:
        return int(dt.datetime.fromisoformat(to_utc(value)).timestamp() * 1000)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{what} {value!r} is not a time; nothing was imported.") from exc
