"""The library's warnings go through ``logging``: shown on stderr where nobody configured
logging, handed to the program's own handlers where it did."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_memory import log
from agent_memory.vault.vault import Vault
from conftest import deadline

LOOSENING = '[secrets]\nmode = "warn"\n'  # a value this clone has not approved: a warning at open


@pytest.fixture
def shown() -> Iterator[None]:
    """``show_warnings_on_stderr`` for one test; its handler taken away after."""
    logger = logging.getLogger(log.LOGGER)
    before = list(logger.handlers)
    yield
    for handler in logger.handlers[:]:
        if handler not in before:
            logger.removeHandler(handler)


def test_a_warning_is_one_line_on_stderr_once_however_often_it_is_asked(
        shown: None, capsys: pytest.CaptureFixture[str]) -> None:
    log.show_warnings_on_stderr()
    log.show_warnings_on_stderr()
    logging.getLogger("agent_memory.disk").warning("skipped %s: %s", "a.md", "Permission denied")
    logging.getLogger("agent_memory.disk").info("not a warning")
    assert capsys.readouterr().err == "agent-memory: warning: skipped a.md: Permission denied\n"


def _open_in_a_fresh_process(vault: Path, setup: str = "") -> subprocess.CompletedProcess[str]:
    script = textwrap.dedent(f"""
        import logging, sys
        {setup}
        from agent_memory import Vault
        Vault(sys.argv[1]).close()
    """)
    return subprocess.run([sys.executable, "-c", script, str(vault)], capture_output=True, text=True,
                          timeout=deadline(60))


def test_a_vault_opened_where_nobody_configured_logging_shows_its_warnings_on_stderr(tmp_path: Path) -> None:
    Vault.init(tmp_path / "vault").close()
    (tmp_path / "vault" / ".agent-memory.toml").write_text(LOOSENING)
    done = _open_in_a_fresh_process(tmp_path / "vault")
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("agent-memory: warning: ") and "not approved" in done.stderr
    assert done.stderr.count("\n") == 1 and done.stdout == ""


def test_a_program_that_configured_logging_gets_the_records_and_nothing_is_printed(tmp_path: Path) -> None:
    Vault.init(tmp_path / "vault").close()
    (tmp_path / "vault" / ".agent-memory.toml").write_text(LOOSENING)
    done = _open_in_a_fresh_process(
        tmp_path / "vault", 'logging.basicConfig(stream=sys.stdout, format="%(levelname)s %(name)s: %(message)s")')
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.startswith("WARNING agent_memory.vault: ") and "not approved" in done.stdout
