"""The MCP server through the real SDK client, in memory: every tool, prompt and
resource, every library error as text the model sees, and the tool contract."""

from __future__ import annotations

import contextlib
import json
import re
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import PromptReference, ResourceTemplateReference

from agent_memory import errors, limits
from agent_memory.disk import locking
from agent_memory.trust import approvals
from agent_memory.index import db as index_module
from agent_memory.index.db import QueryInterrupted
from agent_memory.note.tags import split_tags as as_tags
from agent_memory.server.app import build_server
from agent_memory.server.instructions import INSTRUCTIONS
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, person_saves_before_the_swap, deadline
from conftest import tool_error as fails, tool_ok as ok

pytestmark = pytest.mark.anyio

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"


# ----------------------------------------------------------------------------- the contract

# name: (parameters in order, required ones, (readOnly, destructive, idempotent, openWorld))
CONTRACT: dict[str, tuple[list[str], set[str], tuple[bool, bool, bool, bool]]] = {
    "remember": (["content", "namespace", "tags", "title", "source", "ttl_days", "type", "importance"], {"content"}, (False, False, True, False)),
    "remember_many": (["items"], {"items"}, (False, False, True, False)),
    "recall": (["query", "namespace", "tags", "limit", "match", "since", "until", "path_prefix", "offset", "profile", "depth",
                "type", "min_importance", "max_importance", "semantic", "where"], {"query"}, (True, False, True, False)),
    "get_memory": (["memory_id"], {"memory_id"}, (True, False, True, False)),
    "update_memory": (
        ["memory_id", "content", "append", "replace_old", "replace_new", "tags", "add_tags", "remove_tags",
         "namespace", "title", "source", "ttl_days", "type", "importance", "expected_version", "prepend",
         "replace_section", "section_content"],
        {"memory_id"}, (False, True, False, False),
    ),
    "forget": (["memory_id", "memory_ids", "expected_version", "dry_run"], set(), (False, True, True, False)),
    "list_memories": (["namespace", "tags", "limit", "offset", "path_prefix", "type", "min_importance", "max_importance",
                       "since", "until", "where"], set(), (True, False, True, False)),
    "recent_activity": (["timeframe", "namespace", "type", "limit", "offset"], set(), (True, False, True, False)),
    "link_memories": (["memory_id", "target_id", "relation"], {"memory_id", "target_id"}, (False, False, True, False)),
    "unlink_memories": (["memory_id", "target_id", "relation"], {"memory_id", "target_id"}, (False, True, True, False)),
    "move_memory": (["memory_id", "new_path"], {"memory_id", "new_path"}, (False, True, False, False)),
    "related": (["memory_id", "depth", "direction", "limit"], {"memory_id"}, (True, False, True, False)),
    "memory_history": (["memory_id", "limit"], {"memory_id"}, (True, False, True, False)),
    "retrieve_context": (["query", "token_budget", "strategy", "namespace", "tags", "type", "min_importance",
                          "max_importance"], {"query"}, (True, False, True, False)),
    "memory_stats": ([], set(), (True, False, True, False)),
    "export_memories": (["namespace", "limit", "offset"], set(), (True, False, True, False)),
    "import_memories": (["items", "format"], {"items"}, (False, True, True, False)),
    "read_file": (["path"], {"path"}, (True, False, True, False)),
    "reindex": ([], set(), (False, False, True, False)),
}


async def test_tool_contract_names_parameters_and_all_four_hints(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == set(CONTRACT)
    for name, (params, required, hints) in CONTRACT.items():
        tool = tools[name]
        schema = tool.input_schema
        assert list(schema.get("properties", {})) == params, name
        assert set(schema.get("required", [])) == required, name
        a = tool.annotations
        assert (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint) == hints, name
        assert tool.title and len(tool.description) > 40 and "\n" not in tool.description, name
        assert tool.output_schema and tool.output_schema["type"] == "object", name
        for param, spec in schema.get("properties", {}).items():
            assert len(spec.get("description", "")) > 10, f"{name}.{param} has no description"


async def test_bounds_are_in_the_schema(client: Client) -> None:
    tools = {t.name: t.input_schema["properties"] for t in (await client.list_tools()).tools}
    assert (tools["recall"]["limit"]["minimum"], tools["recall"]["limit"]["maximum"]) == (1, 100)
    assert tools["recall"]["query"]["maxLength"] == 1000
    assert tools["remember"]["content"]["maxLength"] == 100_000
    assert (tools["related"]["depth"]["minimum"], tools["related"]["depth"]["maximum"]) == (0, 3)
    assert tools["import_memories"]["items"]["maxItems"] == 500
    assert tools["related"]["direction"]["enum"] == ["out", "in", "both"]
    # tags take a list or a string, and may be left out
    assert {t.get("type") for t in tools["remember"]["tags"]["anyOf"]} == {"array", "string", "null"}


async def test_server_instructions_say_when_to_remember_how_to_recall_and_to_update(client: Client) -> None:
    assert client.instructions == INSTRUCTIONS
    for word in ("remember", "recall", "update_memory", "forget", "ttl_days", "duplicate"):
        assert word in client.instructions


# ----------------------------------------------------------------------------- each tool


async def test_remember_then_recall_returns_exactly_what_search_json_prints(client: Client, vault: Vault) -> None:
    stored = await ok(client, "remember", content="Customer ACME prefers deploys on Fridays", tags="customer, deploy")
    assert stored["deduplicated"] is False
    assert stored["memory"]["namespace"] == "default" and stored["memory"]["tags"] == ["customer", "deploy"]
    assert (vault.root / stored["memory"]["path"]).read_text().endswith("Customer ACME prefers deploys on Fridays\n")

    found = await ok(client, "recall", query="When does ACME prefer to deploy?")
    assert found == json.loads(json.dumps(vault.search("When does ACME prefer to deploy?")))
    assert found["count"] == 1 and found["hits"][0]["id"] == stored["memory"]["id"]
    assert set(found) >= {"terms", "match_mode", "count", "hits"}

    again = await ok(client, "remember", content="customer acme prefers deploys on fridays", tags=["urgent"])
    assert again["deduplicated"] is True and again["memory"]["id"] == stored["memory"]["id"]
    assert again["memory"]["tags"] == ["customer", "deploy", "urgent"]
    assert_index_matches_files(vault)


@pytest.mark.parametrize(
    ("sent", "expected"),
    [(["a", "b"], ["a", "b"]), ("a, b", ["a", "b"]), ('["a", "b"]', ["a", "b"]), ("[a, b]", ["a", "b"]),
     ("a", ["a"]), ("", []), (None, [])],
)
async def test_tags_as_models_send_them(client: Client, sent: Any, expected: list[str]) -> None:
    arguments = {"content": f"tag test {sent!r}"} | ({} if sent is None else {"tags": sent})
    stored = await ok(client, "remember", **arguments)
    assert stored["memory"]["tags"] == expected
    assert as_tags(sent) == expected


async def test_recall_filters_and_partial_matches(client: Client) -> None:
    await ok(client, "remember", content="Priya owns the billing service", namespace="people", tags=["owner"])
    await ok(client, "remember", content="The billing service runs on Stripe", namespace="systems")
    only_people = await ok(client, "recall", query="billing service", namespace="people")
    assert [h["namespace"] for h in only_people["hits"]] == ["people"]
    partial = await ok(client, "recall", query="billing zebra")
    assert partial["match_mode"] == "any" and "note" in partial and partial["count"] == 2
    none = await ok(client, "recall", query="zebra", tags="owner")
    assert none["count"] == 0 and "hint" in none


async def test_get_update_forget_with_versions(client: Client, vault: Vault) -> None:
    made = (await ok(client, "remember", content="Staging resets on Sundays", tags=["staging"]))["memory"]
    memory = await ok(client, "get_memory", memory_id=made["path"])
    assert memory["id"] == made["id"] and memory["content"] == "Staging resets on Sundays\n"

    updated = await ok(client, "update_memory", memory_id=made["id"], content="Staging resets on Saturdays",
                       add_tags="infra", expected_version=memory["version"])
    assert updated["changed"] is True and updated["memory"]["tags"] == ["staging", "infra"]
    assert "Saturdays" in (vault.root / made["path"]).read_text()

    path = vault.root / made["path"]
    path.write_text(path.read_text() + "Edited by a human.\n")
    stale = await fails(client, "forget", memory_id=made["id"], expected_version=updated["memory"]["version"])
    assert "changed on disk since you read it" in stale and path.exists()

    fresh = await ok(client, "get_memory", memory_id=made["id"])
    gone = await ok(client, "forget", memory_id=made["id"], expected_version=fresh["version"])
    assert gone["trashed_to"].startswith(".trash/") and (vault.root / gone["trashed_to"]).exists()
    assert "not found" in await fails(client, "get_memory", memory_id=made["id"])
    assert_index_matches_files(vault)


async def test_list_memories_pages(client: Client) -> None:
    for n in range(3):
        await ok(client, "remember", content=f"Fact number {n}", namespace="facts")
    first = await ok(client, "list_memories", namespace="facts", limit=2)
    assert (first["total"], first["count"], first["next_offset"]) == (3, 2, 2)
    rest = await ok(client, "list_memories", namespace="facts", limit=2, offset=first["next_offset"])
    assert rest["count"] == 1 and "next_offset" not in rest


async def test_link_memories_and_related(client: Client, vault: Vault) -> None:
    a = (await ok(client, "remember", content="ACME prefers Friday deploys"))["memory"]
    b = (await ok(client, "remember", content="ACME billing runs on Stripe", title="acme billing"))["memory"]
    linked = await ok(client, "link_memories", memory_id=a["id"], target_id=b["id"], relation="depends_on")
    assert linked["changed"] is True and linked["link"] == "[[acme-billing]]"
    assert 'depends_on: ["[[acme-billing]]"]' in (vault.root / a["path"]).read_text()
    assert (await ok(client, "link_memories", memory_id=a["id"], target_id=b["path"], relation="depends_on"))["changed"] is False

    backlinks = await ok(client, "related", memory_id=b["id"], direction="in")
    assert [(n["id"], n["distance"]) for n in backlinks["nodes"]] == [(b["id"], 0), (a["id"], 1)]
    assert backlinks["edges"] == [{"source": a["id"], "relation": "depends_on", "target": b["id"]}]
    assert backlinks["aborted"] is False
    assert "relation must be one word" in await fails(client, "link_memories", memory_id=a["id"], target_id=b["id"], relation="two words")
    assert "itself" in await fails(client, "link_memories", memory_id=a["id"], target_id=a["path"])
    assert_index_matches_files(vault)


async def test_retrieve_context(client: Client) -> None:
    await ok(client, "remember", content="ACME deploys on Fridays.")
    await ok(client, "remember", content="ACME runbook: " + "check the queue. " * 100)
    context = await ok(client, "retrieve_context", query="ACME", token_budget=60)
    assert context["count"] == 1 and context["truncated"] is True
    assert context["memories"][0]["content"].startswith("ACME deploys") and context["estimated_tokens"] <= 60
    roomy = await ok(client, "retrieve_context", query="ACME", strategy="recency")
    assert roomy["count"] == 2 and roomy["truncated"] is False


async def test_stats_export_import_and_reindex(client: Client, vault: Vault, tmp_path: Path) -> None:
    for n in range(3):
        await ok(client, "remember", content=f"Exported fact {n}", namespace="ops", tags=["export"])
    stats = await ok(client, "memory_stats")
    assert stats["total"] == 3 and stats["namespaces"] == {"ops": 3}

    page = await ok(client, "export_memories", limit=2)
    assert (page["total"], page["count"], page["next_offset"]) == (3, 2, 2)
    rest = await ok(client, "export_memories", offset=2)
    items = page["memories"] + rest["memories"]
    assert {i["content"] for i in items} == {f"Exported fact {n}\n" for n in range(3)}

    again = await ok(client, "import_memories", items=items)
    assert (again["imported"], again["duplicates"]) == (0, 3)
    other = Vault.init(tmp_path / "other", clock=vault.clock)
    try:
        async with Client(build_server(other)) as second:
            moved = await ok(second, "import_memories", items=items)
            assert moved["imported"] == 3 and sorted(moved["ids"]) == sorted(i["id"] for i in items)
            assert (await ok(second, "recall", query="exported fact"))["count"] == 3
    finally:
        other.close()

    (vault.root / "hand.md").write_text("Written by hand, found after reindex\n")
    report = await ok(client, "reindex")
    assert report["added"] == 4
    assert (await ok(client, "recall", query="written by hand"))["count"] == 1
    assert_index_matches_files(vault)


async def test_read_file_tool(client: Client, vault: Vault, tmp_path: Path) -> None:
    made = (await ok(client, "remember", content="Readable fact"))["memory"]
    whole = await ok(client, "read_file", path=made["path"])
    assert whole["content"] == (vault.root / made["path"]).read_text() and whole["memory_id"] == made["id"]
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    (vault.root / "escape.md").symlink_to(outside)
    assert "leads outside the vault through a symlink" in await fails(client, "read_file", path="escape.md")
    (vault.root / "loop.md").symlink_to("loop.md")
    refusals = [await fails(client, "read_file", path=typed)
                for typed in ("escape.md", "../../etc/passwd", str(outside), "loop.md")]
    for refusal in refusals:  # the model hears vault-relative paths, never where the vault is on this disk
        assert str(vault.root) not in refusal and str(vault.root.resolve()) not in refusal, refusal
    assert "give a path relative to the vault folder" in refusals[1]
    assert "hidden folder" in await fails(client, "read_file", path=".index/index.sqlite3")
    missing = await ok(client, "read_file", path="people/nobody.md")
    assert missing == {"path": "people/nobody.md", "exists": False, "size": 0, "version": "", "memory_id": None,
                       "content": ""}
    assert whole["exists"] is True


# ----------------------------------------------------------------------------- errors the model sees


async def test_every_library_error_reaches_the_model_as_its_text(client: Client, vault: Vault) -> None:
    a = (await ok(client, "remember", content="First fact"))["memory"]
    await ok(client, "remember", content="Second fact")
    (vault.root / "2026" / "07" / "21").write_text("a file where a folder should be")
    cases: dict[type[errors.AgentMemoryError], tuple[str, dict[str, Any], str]] = {
        errors.NotFound: ("get_memory", {"memory_id": "01nope"},
                          "Memory '01nope' not found — it may have expired or been forgotten; use recall or list_memories to find valid ids."),
        errors.InvalidInput: ("remember", {"content": "x", "tags": ["two words"]}, "use '-' or '_' instead"),
        errors.VersionConflict: ("update_memory", {"memory_id": a["id"], "content": "New", "expected_version": "0" * 64},
                                 "Read it again with get_memory and retry with the new version."),
        errors.Duplicate: ("update_memory", {"memory_id": a["id"], "content": "second FACT",
                                             "expected_version": a["version"]}, "would duplicate memory"),
        errors.PathRefused: ("read_file", {"path": "../../etc/passwd"}, "is outside the vault"),
        errors.VaultError: ("remember", {"content": "Tomorrow's fact"}, "Nothing was changed"),
        errors.StillSaving: ("update_memory", {"memory_id": "emptied.md", "add_tags": ["x"]},
                             "emptied.md is empty, as a file looks while an editor is saving it"),
        errors.SavedMeanwhile: ("update_memory", {"memory_id": a["id"], "add_tags": ["raced"]},
                                "while you were changing it; their save was kept"),
        QueryInterrupted: ("recall", {"query": "fact"}, "was stopped; narrow it"),
        errors.VaultGone: ("recall", {"query": "fact"}, "was moved or deleted while agent-memory was running"),
        errors.ReadOnlyFile: ("update_memory", {"memory_id": "locked.md", "add_tags": ["x"]},
                              "locked.md is read-only (its permissions let no one write it)"),
    }
    assert set(cases) == set(errors.AgentMemoryError.__subclasses__()) | {QueryInterrupted}, \
        "add a case for every new error class"
    (vault.root / "locked.md").write_text("A note its owner made read-only.\n")
    (vault.root / "locked.md").chmod(0o444)
    (vault.root / "emptied.md").write_text("")  # an editor truncated it and never wrote it back
    an_hour_ago = time.time() - 3600
    os.utime(vault.root / "emptied.md", (an_hour_ago, an_hour_ago))
    vault.clock.advance(days=1)  # today's folder 2026/07/21 is a file: writing there fails

    for error, (tool, arguments, text) in cases.items():
        with contextlib.ExitStack() as stack:
            patch = stack.enter_context(pytest.MonkeyPatch.context())
            if error is errors.SavedMeanwhile:
                patch.setattr(locking, "swap", person_saves_before_the_swap())
            if error is QueryInterrupted:  # every query past its (zero) deadline at its first check
                patch.setattr(limits, "MAX_QUERY_SECONDS", 0.0)
                patch.setattr(index_module, "PROGRESS_STEPS", 1)
            if error is errors.VaultGone:
                vault.root.rename(vault.root.with_name("moved"))
                stack.callback(lambda: vault.root.with_name("moved").rename(vault.root))
            message = await fails(client, tool, **arguments)
        assert message.startswith(f"Error executing tool {tool}: ") and text in message, (error, message)
    assert (vault.root / a["path"]).read_text().endswith("First fact\nA line a person just typed.\n")
    assert (vault.root / "emptied.md").read_text() == ""
    assert_index_matches_files(vault)


async def test_replacing_a_body_needs_a_version_this_connection_saw(vault: Vault) -> None:
    made = vault.remember("Staging resets on Sundays")["memory"]
    (vault.root / made["path"]).write_text((vault.root / made["path"]).read_text() + "A line a person added.\n")
    async with Client(build_server(vault), mode="legacy") as connection:  # one connection, many calls
        refused = await fails(connection, "update_memory", memory_id=made["id"], content="Staging resets on Mondays")
        assert "needs the version you read: call get_memory first" in refused
        assert "A line a person added." in (vault.root / made["path"]).read_text()
        seen = await ok(connection, "get_memory", memory_id=made["id"])
        changed = await ok(connection, "update_memory", memory_id=made["id"], content="Staging resets on Mondays")
        assert changed["memory"]["content"] == "Staging resets on Mondays\n"
        # What it saw is the version it can replace: a person's save after that is not overwritten.
        (vault.root / made["path"]).write_text((vault.root / made["path"]).read_text() + "Another line.\n")
        assert "changed on disk since you read it" in await fails(
            connection, "update_memory", memory_id=made["id"], content="Staging resets on Tuesdays")
        assert seen["content"] in [e["source"] and (vault.root / e["trash"]).read_text().split("---\n")[-1]
                                   for e in vault.trash_list() if e["reason"] == "replaced"]
    async with Client(build_server(vault)) as stateless:  # 2026-07-28: every request stands alone
        assert "needs the version you read" in await fails(
            stateless, "update_memory", memory_id=made["id"], content="Staging resets on Fridays")
        appended = await ok(stateless, "update_memory", memory_id=made["id"], append="Ask Priya first.")
        assert appended["memory"]["content"].endswith("Another line.\nAsk Priya first.\n")
    assert_index_matches_files(vault)


async def test_bad_arguments_are_tool_errors_naming_the_argument(client: Client) -> None:
    assert "limit" in await fails(client, "recall", query="x", limit=0)
    assert "depth" in await fails(client, "related", memory_id="x", depth=4)
    assert "Unknown tool" in await fails(client, "no_such_tool")


async def test_errors_over_json_rpc_too(vault: Vault) -> None:
    async with Client(build_server(vault), mode="legacy") as legacy:
        assert "not found" in await fails(legacy, "get_memory", memory_id="nope")
        assert (await ok(legacy, "remember", content="legacy handshake works"))["deduplicated"] is False


# ----------------------------------------------------------------------------- prompts


REQUIRED_PROMPTS = {"capture_fact", "capture_procedure", "capture_troubleshooting_case", "documentation_session",
                    "generate_analogy_memory", "recall_before_task", "consolidate", "get_help"}


async def test_bundled_prompts_are_listed_with_their_arguments(client: Client) -> None:
    prompts = {p.name: p for p in (await client.list_prompts()).prompts}
    assert REQUIRED_PROMPTS <= set(prompts)
    assert set(prompts) == {p.stem for p in PROMPTS_DIR.glob("*.md")}
    for prompt in prompts.values():
        assert prompt.title and prompt.description
        for argument in prompt.arguments or []:
            assert argument.description, f"{prompt.name}.{argument.name}"


async def test_every_prompt_fills_its_placeholders(client: Client) -> None:
    for prompt in (await client.list_prompts()).prompts:
        values = {a.name: f"<<{a.name}-value>>" for a in prompt.arguments or []}
        result = await client.get_prompt(prompt.name, values)
        text = result.messages[0].content.text
        assert "{{" not in text, prompt.name
        for value in values.values():
            assert value in text, (prompt.name, value)
        if prompt.name.startswith(("capture", "generate", "documentation")):
            assert "remember" in text and "tags" in text and "JSON" in text, prompt.name


async def test_optional_prompt_arguments_may_be_left_out(client: Client) -> None:
    prompt = next(p for p in (await client.list_prompts()).prompts if p.name == "capture_fact")
    required = {a.name: "Priya owns billing" for a in prompt.arguments if a.required}
    text = (await client.get_prompt("capture_fact", required)).messages[0].content.text
    assert "Priya owns billing" in text and "{{" not in text


async def test_vault_prompts_add_and_override_and_broken_ones_are_skipped(vault: Vault, tmp_path: Path) -> None:
    folder = vault.root / ".prompts"
    folder.mkdir()
    (folder / "mine.md").write_text(
        "---\nname: standup\ntitle: Standup notes\ndescription: Record a standup.\narguments:\n"
        "  - name: notes\n    description: What was said\n    required: true\n---\nStore these: {{notes}} ({{unknown}})\n"
    )
    (folder / "override.md").write_text("---\nname: capture_fact\ndescription: Ours.\n---\nOur own capture prompt.\n")
    (folder / "broken.md").write_text("---\nname: [unclosed\n---\nbody\n")
    (tmp_path / "elsewhere.md").write_text("---\nname: sneaky\n---\nfrom outside\n")
    (folder / "sneaky.md").symlink_to(tmp_path / "elsewhere.md")
    approvals.approve(vault.root, [".prompts"])  # this clone trusts them (a symlink out is never offered)
    async with Client(build_server(vault)) as client:
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        assert "standup" in prompts and "sneaky" not in prompts and REQUIRED_PROMPTS <= set(prompts)
        assert prompts["capture_fact"].description == "Ours."
        text = (await client.get_prompt("standup", {"notes": "ship it"})).messages[0].content.text
        assert text == "Store these: ship it ({{unknown}})\n"
        assert (await client.get_prompt("capture_fact", {})).messages[0].content.text == "Our own capture prompt.\n"


async def test_memory_mcps_prompt_name_works_and_an_unknown_one_is_a_clear_error(client: Client) -> None:
    assert (await client.get_prompt("get-help", {})).messages == (await client.get_prompt("get_help", {})).messages
    with pytest.raises(MCPError) as unknown:
        await client.get_prompt("get-halp", {})
    assert unknown.value.error.code == -32602 and "Unknown prompt 'get-halp'" in unknown.value.error.message
    assert "get_help" in unknown.value.error.message


async def test_get_help_explains_every_tool_the_server_has(client: Client) -> None:
    help_prompt = next(p for p in (await client.list_prompts()).prompts if p.name == "get_help")
    assert not help_prompt.arguments  # memory-mcp's get-help takes none either
    text = (await client.get_prompt("get_help", {})).messages[0].content.text
    tools = {tool.name for tool in (await client.list_tools()).tools}
    named = set(re.findall(r"`([a-z_]+)(?:\(|`)", text))
    assert tools <= named, f"get_help does not explain {sorted(tools - named)}"
    prompts = {p.name for p in (await client.list_prompts()).prompts} - {"get_help"}
    assert prompts <= named, f"get_help does not name the prompts {sorted(prompts - named)}"
    assert "expected_version" in text and "recall" in text


# AgentMemory's prompts and their placeholders (its seed), sent to ours of the same name.
AGENTMEMORY_PROMPTS = {
    "documentation_session": {"goal": "ship the billing service", "context_notes": "notes from Tuesday",
                              "tool_calls_json": '[{"tool": "deploy"}]'},
    "capture_fact": {"source_type": "meeting", "source_ref": "standup 2026-07-20", "text": "Priya owns billing"},
    "capture_procedure": {"narrative": "First run make build, then make deploy"},
    "capture_troubleshooting_case": {"case_log": "ERR_42 on deploy; fixed by clearing the cache"},
    "generate_analogy_memory": {"current_case": "eventual consistency", "related_memories_json": '[{"id": "x"}]'},
}


@pytest.mark.parametrize("name", sorted(AGENTMEMORY_PROMPTS))
async def test_agentmemory_prompt_arguments_are_accepted_by_the_prompts_of_the_same_name(client: Client, name: str) -> None:
    sent = AGENTMEMORY_PROMPTS[name]
    text = (await client.get_prompt(name, sent)).messages[0].content.text
    assert "{{" not in text
    for key, value in sent.items():
        assert value in text, (name, key)
    if len(sent) > 1 and name != "generate_analogy_memory":  # several aliases of one argument: each labelled
        assert any(f"{key}: {value}" in text for key, value in sent.items())


async def test_a_prompt_alias_never_hides_the_argument_itself(client: Client) -> None:
    text = (await client.get_prompt("capture_fact", {"fact": "Priya owns billing", "context": "from the wiki"}))
    assert "Fact: Priya owns billing" in text.messages[0].content.text
    assert "Context (may be empty): from the wiki" in text.messages[0].content.text
    both = (await client.get_prompt("capture_fact", {"fact": "Priya owns billing", "text": "Bo owns ops"}))
    body = both.messages[0].content.text
    assert "fact: Priya owns billing" in body and "text: Bo owns ops" in body


def test_a_prompt_whose_alias_repeats_a_name_is_refused() -> None:
    from agent_memory.server.prompts import parse_prompt

    clash = ("---\nname: p\narguments:\n  - name: a\n    aliases: [b]\n  - name: b\n---\n{{a}} {{b}}\n")
    with pytest.raises(ValueError, match="given twice"):
        parse_prompt(clash, "clash.md")
    with pytest.raises(ValueError, match="aliases"):
        parse_prompt("---\nname: p\narguments:\n  - name: a\n    aliases: b\n---\n{{a}}\n", "bad.md")


async def test_missing_required_prompt_argument_is_an_error(client: Client) -> None:
    with pytest.raises(MCPError):
        await client.get_prompt("capture_fact", {})


# ----------------------------------------------------------------------------- resources


async def test_static_resources(client: Client, vault: Vault) -> None:
    listed = {str(r.uri) for r in (await client.list_resources()).resources}
    assert listed == {"memory://instructions", "memory://stats", "memory://schema"}
    await ok(client, "remember", content="Counted fact", namespace="ops")

    async def text(uri: str) -> str:
        return (await client.read_resource(uri)).contents[0].text

    assert await text("memory://instructions") == INSTRUCTIONS
    assert json.loads(await text("memory://stats"))["namespaces"] == {"ops": 1}
    schema = await text("memory://schema")
    assert "CREATE TABLE memories" in schema and "related_to" in schema


async def test_memory_template_reads_files_by_id_or_path_with_slashes(client: Client, vault: Vault) -> None:
    templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
    assert templates == ["memory://{+id}"]
    made = (await ok(client, "remember", content="Template fact"))["memory"]
    (vault.root / "people").mkdir()
    (vault.root / "people" / "priya.md").write_text("Priya, by hand\n")
    file_bytes = (vault.root / made["path"]).read_text()
    assert (await client.read_resource(f"memory://{made['id']}")).contents[0].text == file_bytes
    assert (await client.read_resource(f"memory://{made['path']}")).contents[0].text == file_bytes
    assert (await client.read_resource("memory://people/priya.md")).contents[0].text == "Priya, by hand\n"
    with pytest.raises(MCPError, match="not found"):
        await client.read_resource("memory://people/nobody.md")
    with pytest.raises(MCPError):
        await client.read_resource("memory://../outside.md")


async def test_completion_offers_ids_and_paths(client: Client, vault: Vault) -> None:
    made = (await ok(client, "remember", content="Completable fact"))["memory"]
    (vault.root / "people").mkdir()
    (vault.root / "people" / "priya.md").write_text("Priya\n")
    vault.reconcile()  # what the watcher does while `serve` runs
    ref = ResourceTemplateReference(type="ref/resource", uri="memory://{+id}")
    by_path = await client.complete(ref, {"name": "id", "value": "peo"})
    assert by_path.completion.values == ["people/priya.md"]
    by_id = await client.complete(ref, {"name": "id", "value": made["id"][:8]})
    assert made["id"] in by_id.completion.values
    none = await client.complete(PromptReference(type="ref/prompt", name="capture_fact"), {"name": "fact", "value": "x"})
    assert none.completion.values == []


# ----------------------------------------------------------------------------- no globals, lazy import


async def test_each_server_is_its_own(vault: Vault, tmp_path: Path) -> None:
    other = Vault.init(tmp_path / "second")
    try:
        async with Client(build_server(vault)) as one, Client(build_server(other)) as two:
            await ok(one, "remember", content="Only in the first vault")
            assert (await ok(two, "recall", query="first vault"))["count"] == 0
            assert (await ok(one, "recall", query="first vault"))["count"] == 1
    finally:
        other.close()


def test_cli_search_does_not_import_mcp_or_watchdog() -> None:
    code = "import sys, agent_memory.cli; print(sorted(m for m in ('mcp', 'watchdog') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ), timeout=deadline(120))
    assert done.returncode == 0 and done.stdout.strip() == "[]"


@pytest.mark.parametrize("text, message", [
    ("---\nname: standup\narguments: notes\n---\nStore: {{notes}}\n", "`arguments` must be a list of {name, description"),
    ("---\nname: standup\narguments:\n  - description: no name\n---\nStore it\n", "every argument needs a `name`"),
    ("---\nname: standup\n---\n\n", "the prompt has no text after its front matter"),
    ("---\nname: standup\narguments:\n  - name: notes\n    aliases: notes_text\n---\nStore\n", "`aliases` of 'notes' must be a list"),
    ("---\nname: standup\narguments:\n  - name: a\n  - name: a\n---\nStore {{a}}\n", "an argument name or alias is given twice"),
])
def test_a_broken_prompt_file_is_named_with_what_is_wrong(text: str, message: str) -> None:
    """What the server logs when it skips a person's .prompts/ file."""
    from agent_memory.server.prompts import parse_prompt

    with pytest.raises(ValueError, match=re.escape(message)):
        parse_prompt(text, ".prompts/standup.md")
