"""The library's warnings: records on the ``agent_memory`` loggers, shown on stderr.

A module warns through ``logging.getLogger("agent_memory.<area>")``, so a program
using the library can capture, filter or silence them. Front ends (the CLI, the
server) call ``show_warnings_on_stderr``; a ``Vault`` opened where nobody configured
logging calls it too, so a warning is never lost. Never stdout: the stdio server
speaks the protocol there.
"""

from __future__ import annotations

import logging
import sys
import threading

LOGGER = "agent_memory"
FORMAT = "agent-memory: warning: %(message)s"
_installing = threading.Lock()


class _Stderr(logging.Handler):
    """Writes to whatever ``sys.stderr`` is when a record comes (a test's capture, a
    redirected stream), not the one there when the handler was made."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 - logging's own rule: a failing handler reports, never raises
            self.handleError(record)


def show_warnings_on_stderr() -> None:
    """Show the library's warnings on stderr as ``agent-memory: warning: …`` (once,
    however often it is called); records still reach any other handler too."""
    logger = logging.getLogger(LOGGER)
    with _installing:
        if any(isinstance(handler, _Stderr) for handler in logger.handlers):
            return
        handler = _Stderr(logging.WARNING)
        handler.setFormatter(logging.Formatter(FORMAT))
        logger.addHandler(handler)


def configured() -> bool:
    """Whether a handler is set on the library's logger or the root logger (then the
    program decides where warnings go)."""
    return bool(logging.getLogger(LOGGER).handlers or logging.getLogger().handlers)
