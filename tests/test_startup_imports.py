"""A command imports only what it uses: the CLI starts like a small tool. Checked by
the modules a fresh interpreter has loaded (how fast it starts is for
benchmarks/scale.py, against a bare interpreter measured in the same run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from agent_memory.vault.vault import Vault

# Never needed to parse a command line or print a version.
HEAVY = ("mcp", "numpy", "watchdog", "uvicorn", "starlette", "yaml", "frontmatter", "importlib.metadata",
         "agent_memory.vault", "agent_memory.server", "agent_memory.semantic", "agent_memory.git",
         "agent_memory.index", "agent_memory.recall", "agent_memory.trust")


def _modules_after(code: str, cwd: Path) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``, which ends by
    writing them as JSON to stderr's last line."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=300)
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def _loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


def _run_cli(args: list[str]) -> str:
    return (
        "import json, sys\n"
        "from agent_memory.cli import main\n"
        f"sys.argv = ['agent-memory', *{args!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )


def test_importing_the_cli_loads_no_part_of_the_library_or_its_heavy_dependencies(tmp_path: Path) -> None:
    modules = _modules_after("import json, sys, agent_memory.cli.app\n"
                             "print(json.dumps(sorted(sys.modules)), file=sys.stderr)", tmp_path)
    assert "click" in modules and "agent_memory.cli.app" in modules  # it did import the CLI
    assert _loaded(modules, HEAVY) == []


def test_version_loads_none_of_it_either(tmp_path: Path) -> None:
    """(``--help`` lists every command's help, so it imports every command's module.)"""
    modules = _modules_after(_run_cli(["--version"]), tmp_path)
    assert "agent_memory.cli.app" in modules
    assert _loaded(modules, HEAVY) == []


def test_search_loads_the_library_but_not_the_server_the_watcher_or_semantic_recall(tmp_path: Path) -> None:
    vault = Vault.init(tmp_path / "v")
    vault.remember("Customer ACME prefers deploys on Fridays")
    vault.close()
    modules = _modules_after(_run_cli(["--dir", str(tmp_path / "v"), "search", "deploys"]), tmp_path)
    assert "agent_memory.vault.vault" in modules  # it searched
    assert _loaded(modules, ("mcp", "numpy", "watchdog", "uvicorn", "agent_memory.server",
                             "agent_memory.watch.watcher")) == []


def test_the_version_printed_is_the_installed_packages(tmp_path: Path) -> None:
    """``--version`` prints ``__version__`` (the metadata is slow to read): the two must agree."""
    from importlib.metadata import version

    done = subprocess.run([sys.executable, "-m", "agent_memory", "--version"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    assert done.returncode == 0
    assert done.stdout.strip() == f"agent-memory, version {version('agent-memory')}"
