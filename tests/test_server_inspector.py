"""The official MCP Inspector CLI as an independent client of `agent-memory serve`.

CI installs it first (`npm install --prefix .ci/node @modelcontextprotocol/inspector@2.12.0`);
npx run from that folder uses the local copy without the network. Elsewhere npx fetches
it once into the user's npm cache. Skipped only where npx itself is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent_memory.vault.vault import Vault
from conftest import deadline

INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"
SCRIPT = Path(sys.executable).with_name("agent-memory")
LOCAL_INSTALL = Path(__file__).resolve().parent.parent / ".ci" / "node"
# Read at import, before the autouse fixture points HOME at a temporary folder.
NPM_CACHE = os.environ.get("npm_config_cache") or str(Path.home() / ".npm")
NPX = shutil.which("npx")

pytestmark = pytest.mark.skipif(NPX is None, reason="npx (Node.js) is not installed, so the MCP Inspector CLI cannot run")


def inspector(vault_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    local = LOCAL_INSTALL / "node_modules" / "@modelcontextprotocol" / "inspector"
    env = {**os.environ, "npm_config_cache": NPM_CACHE, "npm_config_update_notifier": "false"}
    # The Inspector passes the server only the variables given with -e: PYTHONPATH, so
    # that the server runs the code under test.
    code = ["-e", f"PYTHONPATH={os.environ['PYTHONPATH']}"] if os.environ.get("PYTHONPATH") else []
    return subprocess.run(
        # The Inspector gives a server 15 s to connect; a busy machine can take longer to
        # start Node and Python both, so it gets the suite's (scaled) deadline instead.
        [str(NPX), "-y", INSPECTOR, "--cli", "--connect-timeout", str(int(deadline(120) * 1000)), *code, str(SCRIPT),
         "serve", "--dir", str(vault_dir), *args],
        cwd=LOCAL_INSTALL if local.is_dir() else cwd, env=env, capture_output=True, text=True, timeout=deadline(300),
    )


def test_inspector_lists_the_tools(vault: Vault, tmp_path: Path) -> None:
    done = inspector(vault.root, "--method", "tools/list", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    tools = {t["name"]: t for t in json.loads(done.stdout)["tools"]}
    assert len(tools) == 19 and {"remember", "recall", "read_file", "reindex", "move_memory", "unlink_memories",
                                 "memory_history", "remember_many", "recent_activity"} <= set(tools)
    assert tools["recall"]["annotations"] == {
        "readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False,
    }
    assert tools["remember"]["outputSchema"]["type"] == "object"


def test_inspector_calls_a_tool(vault: Vault, tmp_path: Path) -> None:
    done = inspector(vault.root, "--method", "tools/call", "--tool-name", "remember",
                     "--tool-arg", "content=The Inspector stored this", "--tool-arg", "tags=inspector,cli",
                     cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    memory = json.loads(done.stdout)["structuredContent"]["memory"]
    assert memory["tags"] == ["inspector", "cli"]
    assert (vault.root / memory["path"]).read_text().endswith("The Inspector stored this\n")
    vault.reconcile()
    assert vault.search("inspector stored")["hits"][0]["id"] == memory["id"]


def test_inspector_failing_call_exits_5_with_the_error_text(vault: Vault, tmp_path: Path) -> None:
    done = inspector(vault.root, "--method", "tools/call", "--tool-name", "get_memory",
                     "--tool-arg", "memory_id=01nosuchmemory", cwd=tmp_path)
    assert done.returncode == 5, (done.returncode, done.stderr)
    result = json.loads(done.stdout)
    assert result["isError"] is True
    assert "not found" in result["content"][0]["text"] and "list_memories" in result["content"][0]["text"]
