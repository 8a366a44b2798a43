"""Attacks on `agent-memory serve --http` that the transport's other tests do not cover.

- The token file is the only guard a loopback server has against other users of the same
  machine (loopback is reachable by every local account). A token file they can read, or
  one another account owns (planted, or a link to a file elsewhere), is refused before
  anything opens, with the command that fixes it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_memory.errors import InvalidInput
from agent_memory.server.transport import read_token

from conftest import run_cli

TOKEN = "t0k3n-for-tests-0123456789abcdef"
POSIX = pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")


@POSIX
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o622])
def test_a_token_file_other_users_can_read_or_write_is_refused(tmp_path: Path, mode: int) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(mode)
    with pytest.raises(InvalidInput, match=r"other users.*chmod 600"):
        read_token(None, token_file)
    token_file.chmod(0o600)
    assert read_token(None, token_file) == TOKEN


@POSIX
def test_a_token_file_linked_to_a_readable_file_is_refused(tmp_path: Path) -> None:
    """A link is followed: what counts is who can read the file it points to."""
    target = tmp_path / "elsewhere"
    target.write_text(TOKEN + "\n")
    target.chmod(0o644)
    link = tmp_path / "token"
    link.symlink_to(target)
    with pytest.raises(InvalidInput, match="other users"):
        read_token(None, link)
    target.chmod(0o600)
    assert read_token(None, link) == TOKEN


@POSIX
def test_a_token_file_owned_by_another_account_is_refused(tmp_path: Path) -> None:
    """Root can hand a file to another account; anyone else finds one root owns."""
    theirs = Path("/etc/passwd")
    if os.geteuid() == 0:
        theirs = tmp_path / "token"
        theirs.write_text(TOKEN + "\n")
        theirs.chmod(0o600)
        os.chown(theirs, 65534, 65534)
    with pytest.raises(InvalidInput, match="belongs to another user"):
        read_token(None, theirs)


@POSIX
def test_serve_refuses_a_readable_token_file_before_anything_opens(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o644)
    vault_dir = tmp_path / ".memory"
    done = run_cli("serve", "--http", "--port", "0", "--token-file", str(token_file), "--dir", str(vault_dir),
                   cwd=tmp_path, spawn=True, timeout=60)  # a subprocess: were it not refused, it would serve
    assert done.returncode != 0
    assert "chmod 600" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.stdout == ""
    assert not vault_dir.exists()
