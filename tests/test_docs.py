"""The documentation is part of the product: every tool, command and setting a user can
reach is documented, every link in the guides leads somewhere, the quickstart works as
written on the bundled vault, and CI runs exactly the install and test lines the README
gives."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import click
import pytest

from agent_memory import settings
from agent_memory.cli.app import cli
from conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = ROOT / "docs"
# Every markdown page a user or contributor is sent to.
PAGES = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", *DOCS.rglob("*.md"), *(ROOT / "benchmarks").glob("*.md")])
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^<>\n]+>|[^()\s<>]+)(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.MULTILINE)


def text_of(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def section(text: str, heading: str) -> str:
    """The body of the ``## heading`` section, up to the next heading of level 2."""
    after = text.split(f"\n## {heading}\n", 1)
    assert len(after) == 2, f"no '## {heading}' section"
    return after[1].split("\n## ", 1)[0]


def table_rows(text: str) -> list[str]:
    """The first cell of every table row that starts with a code span: ``| `x y` |`` -> ``x y``."""
    return re.findall(r"^\| `([^`]+)`", text, flags=re.MULTILINE)


# --------------------------------------------------------------------------- set up and prompts


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


def test_the_readme_stays_short_and_leads_with_a_working_client_config() -> None:
    assert len(README.encode("utf-8")) <= 20_000, "README.md is over 20 KB: move detail to docs/"
    lines = README.splitlines()
    desktop = lines.index("### Claude Desktop")
    assert desktop < 150 and '"command": "agent-memory"' in "\n".join(lines[desktop:desktop + 15])
    toc = README.split("\n## ", 1)[0]
    assert all(f"(#{slug(h)})" in toc for h in re.findall(r"^## (.+)$", README, flags=re.MULTILINE))


def test_the_quickstart_vault_is_shipped() -> None:
    assert (ROOT / ".memory.example" / ".gitignore").read_text().strip().endswith(".index/")
    assert len(list((ROOT / ".memory.example").rglob("*.md"))) >= 10


# --------------------------------------------------------------------------- tools, commands, settings


@pytest.mark.anyio
async def test_every_mcp_tool_is_documented_with_its_arguments(client: Any) -> None:
    """The README's tool table names every tool the server offers, and the MCP guide's
    table gives each one with exactly the arguments the server takes: an argument added to
    a tool and not to its documentation fails here, as does a documented tool that is gone."""
    tools = {t.name: sorted(t.input_schema.get("properties", {})) for t in (await client.list_tools()).tools}
    assert len(tools) >= 17
    assert sorted(table_rows(section(README, "MCP tools"))) == sorted(tools)

    guide = text_of(DOCS / "mcp-server.md")
    documented: dict[str, list[str]] = {}
    for signature in table_rows(guide):
        called = re.fullmatch(r"([a-z_]+)\(([^)]*)\)", signature)
        if called:
            documented[called[1]] = sorted(a.strip() for a in called[2].split(",") if a.strip())
    assert sorted(documented) == sorted(tools), "docs/mcp-server.md's table and the server's tools differ"
    wrong = {name: (documented[name], args) for name, args in tools.items() if documented[name] != args}
    assert not wrong, f"documented arguments differ from the server's (documented, real): {wrong}"


def command_paths(group: click.Group = cli, prefix: str = "") -> list[str]:
    """Every command a user can type, subcommands of groups included (``git setup``)."""
    paths = []
    context = click.Context(group)  # the public way to a lazy group's commands (each imported on request)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        path = f"{prefix}{name}"
        if isinstance(command, click.Group):
            paths += command_paths(command, f"{path} ")
        else:
            paths.append(path)
    return sorted(paths)


def documented_commands(text: str) -> set[str]:
    """The commands a CLI table documents: its first cell up to the first argument."""
    return {re.split(r" (?=[A-Z\[(-])", row, maxsplit=1)[0] for row in table_rows(text)}


def test_every_cli_command_is_in_the_readme_table() -> None:
    documented = documented_commands(section(README, "CLI commands"))
    assert sorted(set(command_paths()) - documented) == [], "commands without a row in README's CLI table"
    assert sorted(documented - set(command_paths())) == [], "README's CLI table names commands that do not exist"


def test_every_cli_command_and_subcommand_has_a_reference_row() -> None:
    documented = documented_commands(section(text_of(DOCS / "cli.md"), "Commands"))
    assert sorted(set(command_paths()) - documented) == [], "commands without a row in docs/cli.md"
    assert sorted(documented - set(command_paths())) == [], "docs/cli.md names commands that do not exist"
    assert "git setup" in command_paths()  # subcommands are really walked


def test_every_setting_is_documented_in_the_guarantees_guide() -> None:
    guide = section(text_of(DOCS / "guarantees.md"), "Settings: `.agent-memory.toml`")
    rows = set(table_rows(guide))
    assert sorted(set(settings.KEYS) - rows) == [], "settings without a row in docs/guarantees.md"
    assert sorted(rows - set(settings.KEYS)) == [], "docs/guarantees.md documents settings that do not exist"


def test_the_settings_example_is_a_valid_settings_file(tmp_path: Path) -> None:
    """The example in the guide is loaded as a vault's settings file would be: no key in it
    is misspelled or out of date."""
    guide = section(text_of(DOCS / "guarantees.md"), "Settings: `.agent-memory.toml`")
    example = re.search(r"```toml\n(.*?)```", guide, flags=re.DOTALL)
    assert example is not None
    (tmp_path / settings.SETTINGS_FILE).write_text(example[1], encoding="utf-8")
    loaded = settings.load_settings(tmp_path)
    assert loaded != settings.Settings()


# --------------------------------------------------------------------------- links


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: code and link markup dropped, lower case,
    punctuation removed, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for _level, heading in HEADING.findall(FENCE.sub("", text_of(page))):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> list[str]:
    """Every link target in a page's prose (code blocks and code spans are examples, not links)."""
    return link_targets(text_of(page))


def link_targets(text: str) -> list[str]:
    prose = CODE_SPAN.sub("", FENCE.sub("", text))
    return [target.strip("<>") for target in LINK.findall(prose)]


def test_the_link_parser_sees_what_a_reader_sees() -> None:
    assert slug("Settings: `.agent-memory.toml`") == "settings-agent-memorytoml"
    assert slug("2. The settled read (`core._settled`)") == "2-the-settled-read-core_settled"
    assert slug("Leaving: export to the reference server's format") == "leaving-export-to-the-reference-servers-format"
    sample = "[a](x.md#y) and `[b](no.md)` and [c](<with space.md>)\n```\n[d](no.md)\n```\n"
    assert link_targets(sample) == ["x.md#y", "with space.md"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not checked offline
            continue
        path, _, anchor = target.partition("#")
        goes_to = (page.parent / path).resolve() if path else page
        if not goes_to.is_relative_to(ROOT) or not goes_to.exists():
            broken.append(f"{target}: no such file")
        elif anchor and goes_to.suffix == ".md" and anchor not in anchors(goes_to):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{page.relative_to(ROOT)}: {broken}"


def test_every_guide_is_reachable_from_the_readme() -> None:
    """A guide nobody links to is a guide nobody reads."""
    reached = {(ROOT / t.partition("#")[0]).resolve() for t in links(ROOT / "README.md") if not t.startswith("#")}
    for page in PAGES:
        if page.parent != DOCS / "design":
            continue
        reached |= {(page.parent / t.partition("#")[0]).resolve() for t in links(page) if t.partition("#")[0]}
    guides = [p for p in DOCS.glob("*.md")] + [DOCS / "design" / "README.md", ROOT / "benchmarks" / "RESULTS.md"]
    assert sorted(str(g.relative_to(ROOT)) for g in guides if g.resolve() not in reached) == []


# --------------------------------------------------------------------------- the quickstart


def quickstart_blocks() -> list[str]:
    return re.findall(r"```bash\n(.*?)```", section(README, "Quickstart"), flags=re.DOTALL)


def age_free(line: str) -> str:
    """A line of human output without what changes with the day it runs: "(4 months ago)"."""
    return re.sub(r"\((?:just now|in the future|\d+ \w+ ago)\)", "(AGE)", line).rstrip()


def run_line(line: str, variables: dict[str, str], **options: Any) -> tuple[str | None, str]:
    """Run one quickstart line as a shell would, through the CLI: ``agent-memory ARGS`` or
    ``NAME=$(agent-memory ARGS)``, with ``"$NAME"`` taken from earlier lines. Returns the
    variable it sets (or None) and the command's stdout."""
    assigned = re.fullmatch(r"([A-Za-z_]\w*)=\$\((.*)\)", line)
    name, command = (assigned[1], assigned[2]) if assigned else (None, line)
    for var, value in variables.items():
        command = command.replace(f"${{{var}}}", value).replace(f"${var}", value)
    words = shlex.split(command, comments=True)
    assert words and words[0] == "agent-memory", f"the quickstart shows a line that is not an agent-memory command: {line}"
    result = run_cli(*words[1:], **options)
    assert result.returncode == 0, f"{line}\n{result.stdout}{result.stderr}"
    return name, result.stdout


def test_the_quickstart_on_the_bundled_vault_works_as_written(tmp_path: Path) -> None:
    example = tmp_path / "repo" / ".memory.example"
    shutil.copytree(ROOT / ".memory.example", example, ignore=shutil.ignore_patterns(".index"))
    lines = [line for line in quickstart_blocks()[0].splitlines() if line.strip()]
    assert len(lines) >= 4 and all(line.startswith("agent-memory --dir .memory.example ") for line in lines)
    outputs = [run_line(line, {}, cwd=example.parent)[1] for line in lines]

    shown = re.search(r"answer begins:\n\n```\n(.*?)```", section(README, "Quickstart"), flags=re.DOTALL)
    assert shown is not None, "the quickstart no longer shows the first command's answer"
    expected = [age_free(line) for line in shown[1].splitlines()]
    assert [age_free(line) for line in outputs[0].splitlines()[: len(expected)]] == expected


def test_the_quickstart_first_vault_works_as_written(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    variables: dict[str, str] = {}
    lines = [line for line in quickstart_blocks()[1].splitlines() if line.strip()]
    for line in lines:
        name, out = run_line(line, variables, cwd=project)
        if name:
            variables[name] = out.strip()
    assert (project / ".memory" / ".gitignore").exists()
    (memory_id,) = variables.values()
    assert re.fullmatch(r"[0-9a-z]{16}", memory_id), "add printed something other than the new id"
    # The edit the quickstart shows is in the memory at the end (after its forget and restore).
    (edit,) = [shlex.split(line) for line in lines if line.startswith("agent-memory edit ")]
    shown = run_cli("show", memory_id, "--json", cwd=project)
    assert shown.returncode == 0, shown.stderr
    memory = json.loads(shown.stdout)
    assert edit[edit.index("--add-tag") + 1] in memory["tags"]
    assert memory["content"].rstrip().endswith(edit[edit.index("--append") + 1])
