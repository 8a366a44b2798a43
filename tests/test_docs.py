"""The README is part of the product: every command is documented, and CI runs exactly
the install and test lines the README gives."""

from __future__ import annotations

import re
from pathlib import Path

from agent_memory.cli import cli

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_every_cli_command_is_in_the_readme_table() -> None:
    documented = set(re.findall(r"^\| `([a-z-]+)", README, flags=re.MULTILINE))
    missing = sorted(set(cli.commands) - documented)
    assert not missing, f"commands without a row in README's CLI table: {missing}"


def test_ci_runs_the_readme_install_test_and_check_lines() -> None:
    setup = README.split("## Set up", 1)[1].split("```", 2)[1]
    install, test, *checks = (line.split("#")[0].strip() for line in setup.strip().splitlines()[1:])
    assert install == 'pip install -e ".[dev]"' and test == "python -m pytest"
    assert checks == ["python -m ruff check agent_memory tests", "python -m mypy agent_memory"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert install in ci and test in ci
    assert all(check in ci and ci.index(check) < ci.index(test) for check in checks)  # checks first


def test_every_shipped_prompt_is_named_in_the_readme() -> None:
    prompts = sorted(p.stem for p in (ROOT / "prompts").glob("*.md"))
    assert len(prompts) >= 7
    assert [p for p in prompts if f"`{p}`" not in README] == []


def test_the_quickstart_vault_is_shipped() -> None:
    assert (ROOT / ".memory.example" / ".gitignore").read_text().strip().endswith(".index/")
    assert len(list((ROOT / ".memory.example").rglob("*.md"))) >= 10
