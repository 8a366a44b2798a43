"""How many HTTP connections, for how long: the numbers ``connections`` enforces, sized
under the process's open-file limit. Apart from the protocol, so that ``transport`` (and
``serve`` on stdio) can name the defaults without importing uvicorn's protocol and h11.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_REQUEST_TIMEOUT = 20.0
DEFAULT_KEEP_ALIVE = 75
CONNECTIONS_CEILING = 1000


ACCEPT_BATCH = 2048
"""uvicorn's listen backlog, which asyncio also takes as the most connections it accepts
at once, before any of them can be closed to make room."""
SPARE_FILES = 128
"""Open files kept for everything else: the vault, its index, the watcher, logs."""


def open_file_limit(wanted: int = CONNECTIONS_CEILING + 2 * ACCEPT_BATCH + SPARE_FILES) -> int | None:
    """This process's open-file limit, raised toward ``wanted`` as far as the hard limit
    allows (each connection is a file; running out makes ``accept`` itself fail, and
    asyncio then stops accepting anyone for a second). None where there is no such limit."""
    try:
        import resource
    except ImportError:  # not POSIX
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    if soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):  # not allowed here: live with the limit as it is
            pass
    return soft


def default_max_connections(files: int | None) -> int:
    """1,000, or fewer under a low open-file limit ``files``: half of what the spare files
    leave, the other half being for the accept batches (:func:`accept_batch`)."""
    return CONNECTIONS_CEILING if files is None else max(16, min(CONNECTIONS_CEILING, (files - SPARE_FILES) // 2))


def accept_batch(files: int | None, max_connections: int) -> int:
    """The listen backlog, so that a cap's worth of connections and two batches accepted
    before the first could be closed still fit in the open-file limit."""
    if files is None:
        return ACCEPT_BATCH
    return max(16, min(ACCEPT_BATCH, (files - max_connections - SPARE_FILES) // 2))


@dataclass(frozen=True)
class ConnectionLimits:
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    keep_alive: int = DEFAULT_KEEP_ALIVE
    max_connections: int = CONNECTIONS_CEILING
    backlog: int = ACCEPT_BATCH
