"""A command imports only what it uses: the CLI starts like a small tool. Checked by
the modules a fresh interpreter has loaded (how fast it starts is for
benchmarks/scale.py, against a bare interpreter measured in the same run)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

from agent_memory.vault.vault import Vault

from conftest import deadline

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


# Loaded by writes, imports and other formats, never by reading an unchanged vault: the
# full YAML parser (the fast path reads the tool's own front matter; nothing is parsed
# when nothing changed), new file names, the other servers' formats and the knowledge
# graph's notes, ``sync``, and the HTTP server's protocol.
NOT_FOR_READS = ("yaml", "frontmatter", "slugify", "agent_memory.note.safe_yaml", "agent_memory.transfer.formats",
                 "agent_memory.transfer.importers", "agent_memory.vault.graph", "agent_memory.vault.graph_import",
                 "agent_memory.server.connections", "h11", "uvicorn.protocols.http.h11_impl")


def _report() -> str:
    """Code that writes, as stderr's last line, the modules loaded and the credential
    rules compiled (each rule is compiled the first time a text holds one of its literals)."""
    return (
        "import json, sys\n"
        "from agent_memory.trust import credentials\n"
        "compiled = [r.kind for r in credentials._RULES if r.pattern.cache_info().currsize]\n"
        "print(json.dumps([*sorted(sys.modules), *('rule:' + k for k in compiled)]), file=sys.stderr)\n"
    )


def _cli_then_report(args: list[str]) -> str:
    """The command, then the report; the process exits with the command's exit code."""
    return (
        "import sys\n"
        "from agent_memory.cli import main\n"
        f"sys.argv = ['agent-memory', *{args!r}]\n"
        "code = 0\n"
        "try:\n    main()\nexcept SystemExit as exit:\n    code = exit.code\n"
    ) + _report() + "sys.exit(code)\n"


def _unchanged_vault(tmp_path: Path) -> tuple[Path, str]:
    """A vault the library wrote and indexed: a command's open finds nothing to read."""
    root = tmp_path / "v"
    vault = Vault.init(root)
    memory_id = vault.remember("Rotate the API keys every 90 days", tags=["security"])["memory"]["id"]
    vault.remember("Customer ACME prefers deploys on Fridays")
    vault.close()
    return root, memory_id


def _cli(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    done = subprocess.run([sys.executable, "-c", _cli_then_report(args)], capture_output=True, text=True, cwd=cwd,
                          timeout=300)
    return done, set(json.loads(done.stderr.strip().splitlines()[-1]))


def test_reading_an_unchanged_vault_loads_no_yaml_no_write_path_and_compiles_no_credential_rule(tmp_path: Path) -> None:
    """``search``, ``list`` and ``show`` answer (the output is checked) without loading
    what only a write, an import or another format needs; a future top-level import of
    one of them into the read path fails here."""
    root, memory_id = _unchanged_vault(tmp_path)
    for args, expected in ((["search", "rotate"], "Rotate the API keys"), (["list"], "Customer ACME"),
                           (["show", memory_id], "Rotate the API keys every 90 days")):
        done, modules = _cli(["--dir", str(root), *args], tmp_path)
        assert done.returncode == 0 and expected in done.stdout, (args, done.stderr[-2000:])
        assert _loaded(modules, NOT_FOR_READS) == [], args
        assert sorted(m for m in modules if m.startswith("rule:")) == [], args


def test_a_write_still_loads_what_it_needs_and_refuses_a_credential(tmp_path: Path) -> None:
    """The deferred parts still run when needed: ``add`` names the new file (an ASCII
    title without slugify, whose import takes 10 ms; slugify for one it must
    transliterate), writes its front matter (without PyYAML: its id, namespace and
    times read as text by their first characters) and its credential scan compiles the
    rule that matches and refuses the token."""
    root, _ = _unchanged_vault(tmp_path)
    done, modules = _cli(["--dir", str(root), "add", "The staging deploys go out on Tuesdays"], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "slugify" not in modules and "yaml" not in modules
    written = [p for p in root.rglob("*.md") if p.read_text().endswith("The staging deploys go out on Tuesdays\n")]
    assert [p.name for p in written] == ["the-staging-deploys-go-out-on-tuesdays.md"]
    done, modules = _cli(["--dir", str(root), "add", "Café Ünïcödé opens at nine"], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "slugify" in modules
    written = [p for p in root.rglob("*.md") if p.read_text().endswith("Café Ünïcödé opens at nine\n")]
    assert [p.name for p in written] == ["cafe-unicode-opens-at-nine.md"]

    before = sorted(p.relative_to(root) for p in root.rglob("*.md"))
    token = "ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dF3hJ5"
    done, modules = _cli(["--dir", str(root), "add", f"The CI deploy token is {token}"], tmp_path)
    assert done.returncode == 1 and "GitHub token" in done.stderr and "Nothing was written" in done.stderr
    assert "rule:GitHub token" in modules
    assert sorted(p.relative_to(root) for p in root.rglob("*.md")) == before


def test_a_hand_written_note_with_full_yaml_is_read_through_the_parser_loaded_for_it(tmp_path: Path) -> None:
    """Front matter the fast path declines (a nested mapping, an anchor and its alias, a
    block scalar) is read by the full YAML parser, imported then, in a fresh process."""
    root, _ = _unchanged_vault(tmp_path)
    (root / "people").mkdir()
    (root / "people" / "priya.md").write_text(
        "---\ntitle: Priya\nowner: &who\n  name: Priya\n  team: billing\nbackup: *who\nsteps: |\n  one\n  two\n---\n"
        "Priya owns the billing service\n")
    done, modules = _cli(["--dir", str(root), "--json", "show", "people/priya.md"], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    shown = json.loads(done.stdout)
    assert shown["front_matter"] == {"title": "Priya", "owner": {"name": "Priya", "team": "billing"},
                                     "backup": {"name": "Priya", "team": "billing"}, "steps": "one\ntwo\n"}
    assert shown["problems"] == []
    assert {"yaml", "agent_memory.note.safe_yaml"} <= modules


def test_serving_reads_on_stdio_loads_neither_the_http_protocol_nor_the_write_path(tmp_path: Path) -> None:
    """``serve`` on stdio answers ``initialize`` and a ``recall`` without importing the HTTP
    server's protocol (h11), what only writes, imports and other formats need, or any
    credential rule. (The bundled prompts' front matter does need the full YAML parser.)"""
    root, memory_id = _unchanged_vault(tmp_path)
    server = subprocess.Popen([sys.executable, "-c", _cli_then_report(["serve", "--dir", str(root)])],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=tmp_path)
    assert server.stdin and server.stdout and server.stderr
    killer = threading.Timer(deadline(120), server.kill)  # a server that never answers is killed: the test fails
    killer.start()
    try:
        for message in ({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
                        {"jsonrpc": "2.0", "method": "notifications/initialized"},
                        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                         "params": {"name": "recall", "arguments": {"query": "rotate the keys"}}}):
            server.stdin.write(json.dumps(message) + "\n")
        server.stdin.flush()
        answers = {}
        while not {1, 2} <= answers.keys():  # (a notification, without an id, may come between)
            answer = json.loads(server.stdout.readline())
            answers[answer.get("id")] = answer
        server.stdin.close()
        err = server.stderr.read()
        assert server.wait(timeout=300) == 0
    finally:
        killer.cancel()
        server.kill()
    assert answers[1]["result"]["serverInfo"]["name"] == "agent-memory"
    assert memory_id in json.dumps(answers[2]["result"])
    modules = set(json.loads(err.strip().splitlines()[-1]))
    assert "agent_memory.server.app" in modules and "agent_memory.vault.vault" in modules  # it served
    full_yaml = ("yaml", "frontmatter", "agent_memory.note.safe_yaml")
    assert _loaded(modules, tuple(m for m in NOT_FOR_READS if m not in full_yaml)) == []
    assert sorted(m for m in modules if m.startswith("rule:")) == []
