"""Bad input is a one-line error, on the CLI and over MCP, and loses nothing: nesting
past what is read (JSON imports, the settings file, records and tags a sync can plant),
files that are not UTF-8, names the file system cannot hold, NUL characters anywhere an
importer writes; and items sharing an id with different content are both kept."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, mcp_client, run_cli, tool_error, tool_ok

DEEP = "[" * 100_000 + "]" * 100_000


def md_files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md")
                  if not p.relative_to(root).parts[0].startswith("."))


def one_line_error(done) -> str:
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.startswith("Error: ") and done.stderr.count("\n") == 1, done.stderr
    return done.stderr


def nested(depth: int) -> object:
    value: object = "leaf"
    for _ in range(depth):
        value = [value]
    return value


# --------------------------------------------------------------------------- nesting


@pytest.mark.parametrize("source_format", [None, "mcp-knowledge-graph", "mcp-memory-vault", "memory-mcp"])
def test_a_deeply_nested_json_import_file_is_one_line(vault: Vault, tmp_path: Path, source_format: str | None) -> None:
    path = tmp_path / "deep.json"
    path.write_text(DEEP)
    done = run_cli("import", *(["--from", source_format] if source_format else []), str(path), vault=vault.root)
    assert "too deeply" in one_line_error(done) and md_files(vault.root) == []


def test_deeply_nested_json_on_standard_input_is_one_line(vault: Vault) -> None:
    assert "standard input nests lists or objects too deeply" in one_line_error(
        run_cli("import", "-", stdin=DEEP, vault=vault.root))


@pytest.mark.anyio
async def test_an_item_nested_past_the_limit_is_refused_over_mcp_and_the_cli(vault: Vault, tmp_path: Path) -> None:
    items = [{"content": "fine"}, {"path": "a.md", "front_matter": {"id": "x", "deep": nested(200)}, "content": "x"}]
    async with mcp_client(vault) as client:
        message = await tool_error(client, "import_memories", items=items)
    assert "Item 1" in message and "more than 32 levels deep" in message and "\n" not in message
    path = tmp_path / "items.json"
    path.write_text(json.dumps(items))
    assert "more than 32 levels deep" in one_line_error(run_cli("import", str(path), vault=vault.root))
    assert md_files(vault.root) == []


def test_a_settings_file_nested_too_deeply_is_one_line_for_every_command(vault: Vault) -> None:
    (vault.root / ".agent-memory.toml").write_text("[git]\ncommit = " + "[" * 5000 + "]" * 5000 + "\n")
    for command in (("list",), ("add", "A fact."), ("search", "fact"), ("trust",)):
        assert "nests arrays or tables too deeply" in one_line_error(run_cli(*command, vault=vault.root))
    doctor = run_cli("doctor", vault=vault.root)
    assert doctor.returncode == 1 and "too deeply" in doctor.stdout and "Traceback" not in doctor.stderr


def test_planted_deep_json_in_the_index_folder_and_a_deep_tags_value_stop_nothing(vault: Vault) -> None:
    (vault.root / ".index" / "writes.json").write_text(DEEP)
    (vault.root / ".index" / "git-pending.jsonl").write_text(DEEP + "\n")
    (vault.root / "note.md").write_text('---\ntags: "' + "[" * 5000 + '"\n---\nA note with odd tags.\n')
    assert run_cli("add", "Written beside the planted files.", vault=vault.root).returncode == 0
    assert "note.md" in run_cli("list", vault=vault.root).stdout
    with Vault(vault.root) as again:
        assert_index_matches_files(again)


def test_a_jwt_shaped_text_with_a_deeply_nested_header_is_no_crash(vault: Vault) -> None:
    header = base64.urlsafe_b64encode(b'{"a":' + b"[" * 1400).decode().rstrip("=")  # starts "eyJ", as a JWT does
    text = f"see {header}.eyJhbGciOiJub25lIn0.c2lnbmF0dXJlc2lnbmF0dXJl for the header"
    assert run_cli("add", text, vault=vault.root).returncode == 0


# --------------------------------------------------------------------------- encodings


@pytest.mark.parametrize("source_format", [None, "mcp-knowledge-graph", "mcp-memory-vault", "memory-mcp"])
def test_an_import_file_that_is_not_utf8_is_one_line(vault: Vault, tmp_path: Path, source_format: str | None) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes('[{"content": "Caf\xe9 on the corner"}]'.encode("latin-1"))
    done = run_cli("import", *(["--from", source_format] if source_format else []), str(path), vault=vault.root)
    assert "is not UTF-8 text" in one_line_error(done) and "save it as UTF-8" in done.stderr


def test_standard_input_that_is_not_utf8_is_one_line(vault: Vault) -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_MEMORY") or k == "AGENT_MEMORY_MODEL"}
    done = subprocess.run([sys.executable, "-m", "agent_memory", "--dir", str(vault.root), "import", "-"],
                          input='[{"content": "Caf\xe9"}]'.encode("latin-1"), capture_output=True, env=environ,
                          timeout=120, check=False)
    assert done.returncode == 1 and done.stderr.decode().count("\n") == 1
    assert b"standard input is not UTF-8 text" in done.stderr and md_files(vault.root) == []


# --------------------------------------------------------------------------- names too long


LONG = [("a" * 300, "a name of 303 bytes"), ("people/" + "é" * 200, "a name of 403 bytes"),
        ("b" * 253, "a name of 256 bytes")]  # .md is added: 256 bytes


@pytest.mark.parametrize(("new_path", "said"), LONG)
@pytest.mark.anyio
async def test_a_move_to_a_name_too_long_is_one_line(vault: Vault, new_path: str, said: str) -> None:
    memory = vault.remember("A note to move.")["memory"]
    assert said in one_line_error(run_cli("mv", memory["id"], new_path, vault=vault.root))
    async with mcp_client(vault) as client:
        message = await tool_error(client, "move_memory", memory_id=memory["id"], new_path=new_path)
    assert said in message and "\n" not in message
    assert vault.get(memory["id"])["path"] == memory["path"]  # nothing moved


@pytest.mark.anyio
async def test_read_file_of_a_name_or_path_too_long_is_an_error_not_a_traceback(vault: Vault) -> None:
    async with mcp_client(vault) as client:
        for path, said in (("a" * 300 + ".md", "a name of 303 bytes"), ("/".join(["c" * 200] * 20), "bytes long")):
            message = await tool_error(client, "read_file", path=path)
            assert said in message and "\n" not in message
        assert (await tool_ok(client, "read_file", path="a" * 250 + ".md"))["exists"] is False


def test_an_exported_path_with_a_name_too_long_is_laid_out_by_date(vault: Vault) -> None:
    result = vault.import_memories([{"path": "x/" + "n" * 300 + ".md", "content": "Kept, under a name that fits."}])
    assert result["imported"] == 1 and len(result["paths"][0].rsplit("/", 1)[1].encode()) <= 255


def test_a_knowledge_graph_entity_with_a_long_cjk_name_gets_a_name_that_fits(vault: Vault, tmp_path: Path) -> None:
    source = tmp_path / "memory.jsonl"
    source.write_text(json.dumps({"type": "entity", "name": "東" * 150, "entityType": "place",
                                  "observations": ["far"]}, ensure_ascii=False) + "\n")
    done = run_cli("import", "--from", "mcp-knowledge-graph", str(source), vault=vault.root)
    assert done.returncode == 0, done.stderr
    [name] = md_files(vault.root)
    assert len(name.encode()) <= 255


# --------------------------------------------------------------------------- NUL


KG_WITH_NUL = [
    ({"type": "relation", "from": "Ann", "to": "Acme", "relationType": "works\u0000at"}, "NUL"),
    ({"type": "entity", "name": "Bob", "entityType": "per\u0000son", "observations": []}, "NUL"),
    ({"type": "entity", "name": "Bo\u0000b", "entityType": "person", "observations": []}, "NUL"),
]


@pytest.mark.parametrize(("record", "said"), KG_WITH_NUL)
def test_nul_anywhere_a_knowledge_graph_import_writes_is_one_line(vault: Vault, tmp_path: Path, record: dict,
                                                                   said: str) -> None:
    base = [{"type": "entity", "name": "Ann", "entityType": "person", "observations": ["x"]},
            {"type": "entity", "name": "Acme", "entityType": "org", "observations": ["y"]}]
    source = tmp_path / "memory.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in [*base, record]))
    assert said in one_line_error(run_cli("import", "--from", "mcp-knowledge-graph", str(source), vault=vault.root))
    assert md_files(vault.root) == []


@pytest.mark.anyio
async def test_nul_in_a_key_or_value_of_an_item_is_refused_over_mcp(vault: Vault) -> None:
    async with mcp_client(vault) as client:
        for items in ([{"path": "a.md", "front_matter": {"id": "x", "ke\u0000y": "v"}, "content": "x"}],
                      [{"content": "fine", "source": "from\u0000here"}],
                      [{"type": "entity", "name": "A", "observations": ["a"]},
                       {"type": "entity", "name": "B", "observations": ["b"]},
                       {"type": "relation", "from": "A", "to": "B", "relationType": "r\u0000"}]):
            fmt = {"format": "mcp-knowledge-graph"} if items[0].get("type") else {}
            message = await tool_error(client, "import_memories", items=items, **fmt)
            assert "NUL" in message and "\n" not in message
    assert md_files(vault.root) == []


# --------------------------------------------------------------------------- one id, two contents


def test_two_memories_of_one_source_id_are_both_kept_and_a_reimport_adds_nothing(vault: Vault) -> None:
    export = {"memories": [
        {"id": 7, "namespace": "ops", "content": "The VPN moved to vpn2.", "created_at": "2026-07-01T00:00:00Z"},
        {"id": 7, "namespace": "ops", "content": "The VPN needs a token now.", "created_at": "2026-07-01T00:00:00Z"},
    ]}
    first = vault.import_memories(export, format="mcp-memory-vault")
    assert first["imported"] == 2 and len(set(first["ids"])) == 2
    assert {vault.get(i)["content"].strip() for i in first["ids"]} == {"The VPN moved to vpn2.",
                                                                       "The VPN needs a token now."}
    again = vault.import_memories(export, format="mcp-memory-vault")
    assert (again["imported"], again["updated"]) == (0, 0) and len(md_files(vault.root)) == 2
    assert_index_matches_files(vault)


def test_two_items_of_one_id_through_the_cli_are_both_kept(vault: Vault, tmp_path: Path) -> None:
    path = tmp_path / "backup.json"
    path.write_text(json.dumps([{"id": "note-1", "content": "Alpha version."},
                                {"id": "note-1", "content": "Beta version."}]))
    done = run_cli("import", str(path), vault=vault.root)
    assert done.returncode == 0 and "Imported 2" in done.stdout
    assert run_cli("import", str(path), vault=vault.root).stdout.startswith("Imported 0")
    assert len(md_files(vault.root)) == 2


@pytest.mark.parametrize("option, most", [("--title", 200), ("--source", 500)])
def test_a_title_or_source_too_long_is_refused_on_the_cli_and_nothing_is_written(
        vault: Vault, option: str, most: int) -> None:
    """Only the MCP tools' schemas bounded a title (200) and a source (500): the CLI and
    the library wrote a megabyte title into the front matter, a file the tool then
    refused to read the properties of. Every front end now meets the one bound."""
    result = run_cli("add", "Deploys go out on Fridays.", option, "x" * (most + 1), vault=vault.root)
    assert result.returncode != 0
    assert f"holds at most {most}" in result.stderr and "Shorten it" in result.stderr
    assert vault.list()["memories"] == []
    assert run_cli("add", "Deploys go out on Fridays.", option, "x" * most, vault=vault.root).returncode == 0


def test_an_edit_to_a_title_too_long_is_refused_and_the_file_kept(vault: Vault) -> None:
    made = vault.remember("Deploys go out on Fridays.")["memory"]
    before = (vault.root / made["path"]).read_bytes()
    with pytest.raises(Exception, match="holds at most 200"):
        vault.update(made["id"], title="t" * 1_000_000)
    assert (vault.root / made["path"]).read_bytes() == before


@pytest.mark.anyio
async def test_the_mcp_tools_state_the_same_bounds(vault: Vault) -> None:
    async with mcp_client(vault) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        schema = tools["remember"].input_schema["properties"]
        assert (schema["title"]["maxLength"], schema["source"]["maxLength"]) == (200, 500)
        error = await tool_error(client, "remember", content="A fact.", title="t" * 201)
        assert "200" in error
