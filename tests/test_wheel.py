"""Prompts reach users who install the wheel: the top-level prompts/ folder is packed as
agent_memory/_prompts, and a server installed from the wheel serves them from there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from agent_memory.server.prompts import bundled_prompts_dir
from conftest import deadline

REPO = Path(__file__).resolve().parent.parent
# Read at import, before the autouse fixture points HOME at a temporary folder.
PIP_CACHE = os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip")


def pip(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", *args, "--quiet", "--disable-pip-version-check"],
                          env={**os.environ, "PIP_CACHE_DIR": PIP_CACHE}, capture_output=True, text=True, timeout=deadline(300))
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    pip("wheel", "--no-deps", "--wheel-dir", str(out), str(REPO))
    (built,) = out.glob("agent_memory-*.whl")
    return built


def test_the_wheel_holds_every_prompt_file(wheel: Path) -> None:
    sources = sorted((REPO / "prompts").glob("*.md"))
    assert len(sources) >= 7
    with zipfile.ZipFile(wheel) as archive:
        for source in sources:
            assert archive.read(f"agent_memory/_prompts/{source.name}") == source.read_bytes()


def test_a_server_installed_from_the_wheel_serves_the_prompts(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    pip("install", "--no-deps", "--target", str(target), str(wheel))
    probe = """
import json, sys, anyio
from mcp import Client
import agent_memory
from agent_memory.server.app import build_server
from agent_memory.server.prompts import bundled_prompts_dir
from agent_memory.vault.vault import Vault

async def main():
    with Vault.init(sys.argv[1]) as vault:
        async with Client(build_server(vault)) as client:
            names = sorted(p.name for p in (await client.list_prompts()).prompts)
    print(json.dumps({"package": agent_memory.__file__, "prompts_dir": str(bundled_prompts_dir()), "names": names}))

anyio.run(main)
"""
    env = {**os.environ, "PYTHONPATH": str(target)}  # ahead of the editable install's path entry
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "vault")], env=env,
                          capture_output=True, text=True, timeout=deadline(120), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["package"].startswith(str(target))
    assert seen["prompts_dir"] == str(target / "agent_memory" / "_prompts")
    assert seen["names"] == sorted(p.stem for p in (REPO / "prompts").glob("*.md"))


def test_a_source_checkout_serves_the_repository_prompts() -> None:
    assert bundled_prompts_dir() == REPO / "prompts"


def test_the_wheel_carries_the_licence_and_the_short_readme(wheel: Path) -> None:
    """What a package index shows: the README as the long description (short enough to
    read there), and the MIT licence the metadata declares, as a file."""
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        text = archive.read(metadata).decode("utf-8")
        licences = [n for n in archive.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
        assert licences and archive.read(licences[0]) == (REPO / "LICENSE").read_bytes()
    headers, _, description = text.partition("\n\n")
    assert "License-Expression: MIT" in headers.splitlines()
    assert "Description-Content-Type: text/markdown" in headers.splitlines()
    assert description.strip() == (REPO / "README.md").read_text(encoding="utf-8").strip()
    assert len(description.encode("utf-8")) <= 20_000
