"""What callers send, checked: through the real MCP client in memory (the text the model
sees) and the library. Every refusal is one sentence per problem, names the argument,
and leaves the vault's files exactly as they were."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from agent_memory import errors
from agent_memory.limits import MAX_OFFSET, MIN_TTL_DAYS
from agent_memory.server.app import build_server
from agent_memory.server.arguments import closest_name
from agent_memory.vault.vault import Vault

from conftest import Clock, mcp_client, tool_ok as ok

pytestmark = pytest.mark.anyio

NUL = "\x00"


def vault_files(root: Path) -> dict[str, bytes]:
    """Every file of the vault but the index (a cache): what a refusal must not change."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".index" not in p.relative_to(root).parts
    }


async def refused(client: Client, vault: Vault, tool: str, arguments: dict[str, Any]) -> str:
    """The error text the model gets; asserts that nothing in the vault changed."""
    before = vault_files(vault.root)
    result = await client.call_tool(tool, arguments)
    assert result.is_error is True, (tool, arguments, result.content[0].text[:200])
    assert result.structured_content is None
    assert vault_files(vault.root) == before, f"{tool} wrote to the vault although it refused"
    text = result.content[0].text
    assert text.startswith(f"Error executing tool {tool}: ")
    assert "\n" not in text and "validation error" not in text and "pydantic" not in text, text
    return text.removeprefix(f"Error executing tool {tool}: ")


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Vault]:
    """One vault and one server for the whole module: every call here is refused and
    leaves the vault as it was (``refused`` checks that each time), so the tests can
    share them; the few valid calls only add memories no test counts."""
    with Vault.init(tmp_path_factory.mktemp("validation") / ".memory", clock=Clock()) as shared:
        yield shared


@pytest.fixture(scope="module")
async def client(vault: Vault) -> AsyncIterator[Client]:
    async with mcp_client(vault) as connected:
        yield connected


@pytest.fixture(scope="module")
async def ids(client: Client) -> dict[str, str]:
    a = (await ok(client, "remember", content="ACME deploys on Fridays", tags=["acme"]))["memory"]
    b = (await ok(client, "remember", content="ACME billing runs monthly"))["memory"]
    return {"a": a["id"], "b": b["id"], "version": a["version"]}


def base_arguments(ids: dict[str, str]) -> dict[str, dict[str, Any]]:
    """A valid call of every tool, to which each test adds one bad argument."""
    return {
        "remember": {"content": "A brand new fact"},
        "remember_many": {"items": [{"content": "A fact of a batch"}]},
        "recall": {"query": "acme"},
        "get_memory": {"memory_id": ids["a"]},
        "update_memory": {"memory_id": ids["a"], "content": "ACME deploys on Thursdays"},
        "forget": {"memory_id": ids["a"]},
        "list_memories": {},
        "recent_activity": {},
        "link_memories": {"memory_id": ids["a"], "target_id": ids["b"]},
        "related": {"memory_id": ids["a"]},
        "retrieve_context": {"query": "acme"},
        "memory_stats": {},
        "export_memories": {},
        "import_memories": {"items": [{"content": "An imported fact"}]},
        "read_file": {"path": "README.md"},
        "reindex": {},
        "move_memory": {"memory_id": ids["a"], "new_path": "people/acme.md"},
        "unlink_memories": {"memory_id": ids["a"], "target_id": ids["b"]},
        "memory_history": {"memory_id": ids["a"]},
    }


def _takes_text(schema: dict[str, Any]) -> bool:
    options = schema.get("anyOf", [schema])
    return any(o.get("type") == "string" for o in options)


# ----------------------------------------------------------------------------- NUL characters


async def test_a_nul_character_in_any_text_argument_of_any_tool_is_refused(
    client: Client, vault: Vault, ids: dict[str, str]
) -> None:
    calls = base_arguments(ids)
    checked = 0
    for tool in (await client.list_tools()).tools:
        assert tool.name in calls, f"add a valid call of {tool.name} to base_arguments"
        for name, schema in tool.input_schema.get("properties", {}).items():
            if _takes_text(schema):
                bad, where = f"bad{NUL}value", name
            elif name == "items":
                bad, where = [{"content": "fine"}, {"content": f"evil{NUL}"}], "items[1].content"
            else:
                continue
            text = await refused(client, vault, tool.name, {**calls[tool.name], name: bad})
            assert text == f"{where} contains a NUL character (\\x00); remove it.", (tool.name, text)
            checked += 1
    assert checked >= 30


async def test_a_nul_character_inside_imported_items_is_refused(client: Client, vault: Vault, ids: dict[str, str]) -> None:
    items = [
        {"path": f"people/a{NUL}.md", "front_matter": {"title": "A"}, "content": "A person"},
        {"path": "people/b.md", "front_matter": {"title": f"B{NUL}"}, "content": "B person"},
        {"content": "fine", "tags": ["ok", f"t{NUL}"]},
    ]
    assert await refused(client, vault, "import_memories", {"items": items}) == (
        "items[0].path contains a NUL character (\\x00); remove it. "
        "items[1].front_matter.title contains a NUL character (\\x00); remove it. "
        "items[2].tags[1] contains a NUL character (\\x00); remove it."
    )


# ----------------------------------------------------------------------------- offsets


@pytest.mark.parametrize("tool", ["list_memories", "export_memories"])
@pytest.mark.parametrize("offset", [2**63, 2**64, MAX_OFFSET + 1])
async def test_an_offset_beyond_any_vault_is_a_validation_error(client: Client, vault: Vault, ids: dict[str, str],
                                                                tool: str, offset: int) -> None:
    assert await refused(client, vault, tool, {"offset": offset}) == (
        f"offset must be at most {MAX_OFFSET:,}; got {offset}."
    )
    assert (await ok(client, tool, offset=MAX_OFFSET))["count"] == 0


# ----------------------------------------------------------------------------- namespaces


DOT_NAMES = [".", "..", ".git", ".obsidian", ".trash"]


@pytest.mark.parametrize("namespace", DOT_NAMES)
async def test_dot_namespaces_are_refused_by_every_tool_that_takes_one(
    client: Client, vault: Vault, ids: dict[str, str], namespace: str
) -> None:
    message = f"Namespace {namespace!r} is not valid: a namespace may not start with '.'; use a word such as 'project-x'."
    calls = {
        "remember": {"content": "A fact for a dot folder", "namespace": namespace},
        "update_memory": {"memory_id": ids["a"], "namespace": namespace},
        "recall": {"query": "acme", "namespace": namespace},
        "list_memories": {"namespace": namespace},
        "recent_activity": {"namespace": namespace},
        "retrieve_context": {"query": "acme", "namespace": namespace},
        "export_memories": {"namespace": namespace},
    }
    for tool, arguments in calls.items():
        assert await refused(client, vault, tool, arguments) == message, tool
    text = await refused(client, vault, "import_memories", {"items": [{"content": "x", "namespace": namespace}]})
    assert message in text
    for tool in (await client.list_tools()).tools:
        if "namespace" in tool.input_schema.get("properties", {}):
            assert tool.name in calls or tool.name == "import_memories", f"check {tool.name}'s namespace here"


def test_the_library_refuses_dot_namespaces_and_nul_in_content_and_tags(vault: Vault) -> None:
    before = vault_files(vault.root)
    for namespace in DOT_NAMES:
        with pytest.raises(errors.InvalidInput, match="may not start with '.'"):
            vault.remember("A fact", namespace=namespace)
    with pytest.raises(errors.InvalidInput, match=r"Content contains a NUL character \(\\x00\)"):
        vault.remember(f"nul{NUL}inside")
    with pytest.raises(errors.InvalidInput, match=r"contains a NUL character"):
        vault.remember("A fact", tags=[f"a{NUL}b"])
    with pytest.raises(errors.InvalidInput, match=r"contains a NUL character"):
        vault.remember("A fact", namespace=f"ns{NUL}")
    assert vault_files(vault.root) == before


# ----------------------------------------------------------------------------- TTLs


@pytest.mark.parametrize("ttl", [1e-9, 0.0001, MIN_TTL_DAYS * 0.99])
async def test_a_ttl_under_a_minute_is_refused_before_anything_is_written(
    client: Client, vault: Vault, ids: dict[str, str], ttl: float
) -> None:
    message = (f"ttl_days {ttl!r} is under a minute: the memory would expire before it could be read; "
               "use 0 (no expiry) or at least one minute (0.0007 days).")
    assert await refused(client, vault, "remember", {"content": "Short-lived", "ttl_days": ttl}) == message
    assert await refused(client, vault, "update_memory", {"memory_id": ids["a"], "ttl_days": ttl}) == message
    before = vault_files(vault.root)
    with pytest.raises(errors.InvalidInput, match="under a minute"):
        vault.remember("Short-lived", ttl_days=ttl)
    assert vault_files(vault.root) == before
    # 0 still means no TTL, and one minute is the shortest one
    never = (await ok(client, "remember", content="Forever", ttl_days=0))["memory"]
    assert never["expires"] is None
    minute = (await ok(client, "remember", content="Soon gone", ttl_days=MIN_TTL_DAYS))["memory"]
    assert minute["expires"] is not None
    assert (await ok(client, "get_memory", memory_id=minute["id"]))["id"] == minute["id"]


# ----------------------------------------------------------------------------- unknown arguments


@pytest.mark.parametrize(("tool", "sent", "meant"), [
    ("recall", "limt", "limit"),
    ("recall", "top_k", "limit"),
    ("recall", "q", "query"),
    ("get_memory", "memoryId", "memory_id"),
    ("get_memory", "id", "memory_id"),
    ("remember", "text", "content"),
    ("remember", "tgas", "tags"),
    ("remember", "ttl", "ttl_days"),
    ("update_memory", "expectedVersion", "expected_version"),
    ("update_memory", "addTags", "add_tags"),
    ("link_memories", "target", "target_id"),
    ("list_memories", "pathPrefix", "path_prefix"),
])
async def test_an_unknown_argument_is_refused_with_the_closest_real_name(
    client: Client, vault: Vault, ids: dict[str, str], tool: str, sent: str, meant: str
) -> None:
    arguments = {**base_arguments(ids)[tool], sent: "value"}
    arguments.pop(meant, None)  # as a model sends it: the wrong name instead of the right one
    text = await refused(client, vault, tool, arguments)
    assert text.startswith(f"Unknown argument {sent!r}: did you mean {meant!r}?"), text


async def test_an_unknown_argument_of_any_tool_is_refused_and_the_tool_does_not_run(
    client: Client, vault: Vault, ids: dict[str, str]
) -> None:
    calls = base_arguments(ids)
    for tool in (await client.list_tools()).tools:
        names = list(tool.input_schema.get("properties", {}))
        text = await refused(client, vault, tool.name, {**calls[tool.name], "zzqx": 1})
        takes = f"{tool.name} takes {', '.join(names)}." if names else f"{tool.name} takes no arguments."
        assert text == f"Unknown argument 'zzqx': {takes}", text


def test_closest_name_prefers_the_same_word_then_known_aliases_then_spelling() -> None:
    names = ["memory_id", "target_id", "relation"]
    assert closest_name("MemoryID", names) == "memory_id"
    assert closest_name("target", names) == "target_id"
    assert closest_name("relaton", names) == "relation"
    assert closest_name("id", ["query"]) is None
    assert closest_name("colour", names) is None


# ----------------------------------------------------------------------------- one sentence per problem


@pytest.mark.parametrize(("tool", "arguments", "expected"), [
    ("recall", {"query": "x", "limit": 0}, "limit must be at least 1; got 0."),
    ("recall", {"query": "x", "limit": 101}, "limit must be at most 100; got 101."),
    ("recall", {"query": "x", "limit": "many"}, 'limit must be a whole number; got "many".'),
    ("recall", {"query": "x", "limit": 2.5}, "limit must be a whole number; got 2.5."),
    ("recall", {"query": "x", "match": "some"}, "match must be one of 'auto', 'all' or 'any'; got \"some\"."),
    ("recall", {}, "query is required."),
    ("recall", {"query": "x" * 1001}, "query is 1,001 characters; the limit is 1,000."),
    ("remember", {"content": ""}, "content must not be empty."),
    ("remember", {"content": "x" * 100_001}, "content is 100,001 characters; the limit is 100,000."),
    ("remember", {"content": "x", "tags": 5}, "tags must be a list of text or text; got 5."),
    ("remember", {"content": "x", "ttl_days": -1}, "ttl_days must be at least 0; got -1."),
    ("related", {"memory_id": "x", "depth": 4}, "depth must be at most 3; got 4."),
    ("related", {"memory_id": "x", "direction": "up"}, "direction must be one of 'out', 'in' or 'both'; got \"up\"."),
    ("get_memory", {"memory_id": 7.5}, "memory_id must be text; got 7.5."),
    ("get_memory", {"memory_id": True}, "memory_id must be text; got true."),
    ("link_memories", {"memory_id": "a", "target_id": "b", "relation": "two words"},
     ("relation must be one word of letters, digits, '_' or '-' that starts with a letter "
      "(e.g. related_to, depends_on); got \"two words\".")),
    ("import_memories", {"items": []}, "items needs at least 1 item; got none."),
    ("forget", {"memory_ids": []}, "memory_ids needs at least 1 item; got none."),
    ("import_memories", {"items": [{"content": "x"}] * 501}, "items has 501 items; the limit is 500."),
    ("import_memories", {"items": ["just text"]}, 'items[0] must be an object; got "just text".'),
])
async def test_a_validation_error_is_one_sentence_naming_the_argument(
    client: Client, vault: Vault, tool: str, arguments: dict[str, Any], expected: str
) -> None:
    assert await refused(client, vault, tool, arguments) == expected


async def test_several_problems_are_one_sentence_each(client: Client, vault: Vault) -> None:
    text = await refused(client, vault, "remember",
                         {"content": "", "tags": 5, "ttl_days": -1, "colour": "red", "title": f"t{NUL}"})
    assert text == (
        "Unknown argument 'colour': remember takes content, namespace, tags, title, source, ttl_days, type, importance. "
        "title contains a NUL character (\\x00); remove it. "
        "content must not be empty. "
        "tags must be a list of text or text; got 5. "
        "ttl_days must be at least 0; got -1."
    )


async def test_the_same_checks_hold_over_the_handshake_protocol(vault: Vault) -> None:
    async with Client(build_server(vault), mode="legacy") as legacy:
        result = await legacy.call_tool("recall", {"query": "x", "limt": 3})
        assert result.is_error is True
        assert result.content[0].text == "Error executing tool recall: Unknown argument 'limt': did you mean 'limit'?"
        assert (await legacy.call_tool("recall", {"query": "x", "limit": 3})).is_error is False


# ----------------------------------------------------------------------------- library entries


def test_the_library_refuses_an_offset_sqlite_cannot_hold(vault: Vault) -> None:
    with pytest.raises(errors.InvalidInput, match="offset must be between 0 and"):
        vault.list(offset=2**63)
    with pytest.raises(errors.InvalidInput, match="offset must be between 0 and"):
        vault.export_page(offset=2**63)


def test_the_library_refuses_nul_in_ids_paths_titles_and_sources(vault: Vault) -> None:
    memory = vault.remember("A fact")["memory"]
    before = vault_files(vault.root)
    calls = [
        lambda: vault.get(f"{memory['id']}{NUL}"),
        lambda: vault.read_file(f"README.md{NUL}"),
        lambda: vault.remember("Another fact", title=f"t{NUL}"),
        lambda: vault.remember("A third fact", source=f"s{NUL}"),
        lambda: vault.forget(f"x{NUL}"),
        lambda: vault.search(f"fact{NUL}"),
        lambda: vault.list(path_prefix=f"2026{NUL}"),
        lambda: vault.import_memories([{"path": f"a{NUL}.md", "front_matter": {}, "content": "z"}]),
    ]
    for call in calls:
        with pytest.raises(errors.InvalidInput, match="contains a NUL character"):
            call()
    assert vault_files(vault.root) == before


def test_the_library_refuses_a_dot_namespace_filter(vault: Vault) -> None:
    with pytest.raises(errors.InvalidInput, match="may not start with '.'"):
        vault.search("fact", namespace="..")
    with pytest.raises(errors.InvalidInput, match="may not start with '.'"):
        vault.list(namespace=".git")


# ----------------------------------------------------------------------------- other servers' names

async def call(client: Client, tool: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A call that must succeed: its structured result and the text blocks after its JSON."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error is False, result.content[0].text
    return result.structured_content, [block.text for block in result.content[1:]]


async def test_the_seeds_argument_names_are_read_as_ours_and_the_reply_says_so(client: Client, vault: Vault) -> None:
    # AgentMemory's insert_memory: summary and keywords; memory-mcp's memory_type.
    made, said = await call(client, "remember", {"content": "Priya owns the billing service", "summary": "Billing owner",
                                                 "keywords": ["billing", "people"], "memory_type": "fact"})
    memory = made["memory"]
    assert memory["title"] == "Billing owner" and memory["tags"] == ["billing", "people"]
    assert vault.get(memory["id"])["front_matter"]["type"] == "fact"
    assert said == ["Note: read 'summary' as 'title', 'keywords' as 'tags', 'memory_type' as 'type', "
                    "this server's names; use them next time."]
    await ok(client, "remember", content="Deploys happen on Fridays", tags=["deploy"])
    # mcp-memory-vault's list_memories(tag=...): a filter, not ignored
    listed, said = await call(client, "list_memories", {"tag": "billing"})
    assert [m["id"] for m in listed["memories"]] == [memory["id"]]
    assert said == ["Note: read 'tag' as 'tags', this server's name; use it next time."]
    # memory-mcp's search filter
    found, _ = await call(client, "recall", {"query": "owns", "memory_type": "decision"})
    assert found["count"] == 0
    found, _ = await call(client, "recall", {"query": "owns", "memory_type": "fact"})
    assert [h["id"] for h in found["hits"]] == [memory["id"]]
    # AgentMemory's read_file(filePath=...)
    read, said = await call(client, "read_file", {"filePath": memory["path"]})
    assert read["memory_id"] == memory["id"] and said[0].startswith("Note: read 'filePath' as 'path'")
    # mcp-memory-vault's import_memories(memories=[...])
    imported, said = await call(client, "import_memories", {"memories": [{"content": "An imported fact"}]})
    assert imported["imported"] == 1 and said[0].startswith("Note: read 'memories' as 'items'")


async def test_a_seed_name_is_only_read_where_it_means_the_same(client: Client, vault: Vault) -> None:
    # AgentMemory's search keywords boost terms; they are not our tag filter
    assert await refused(client, vault, "recall", {"query": "x", "keywords": ["a"]}) == (
        "Unknown argument 'keywords': did you mean 'query'?")
    assert await refused(client, vault, "list_memories", {"tag": "a", "tags": ["b"]}) == (
        "Both 'tag' and 'tags' were sent; send only 'tags'.")
    assert await refused(client, vault, "recall", {"query": "x", "cursor": "abc"}) == (
        "Unknown argument 'cursor': did you mean 'offset'?")


async def test_unambiguous_values_are_read_as_meant(client: Client, vault: Vault, ids: dict[str, str]) -> None:
    # an id sent as a number (AgentMemory's ids are row numbers): looked up, not a type error
    text = await refused(client, vault, "get_memory", {"memory_id": 7})
    assert text.startswith("Memory '7' not found") and "list_memories" in text
    # ...but a tool that changes or forgets never acts on a number, which could also name a note ("7.md")
    assert await refused(client, vault, "forget", {"memory_id": 7}) == "memory_id must be text; got 7."
    before = vault.get(ids["a"])
    # update_memory: content "" and ttl_days -1 mean "keep", as the seeds' update tools read them
    updated, _ = await call(client, "update_memory", {"memory_id": ids["a"], "content": "", "ttl_days": -1,
                                                      "add_tags": ["kept"]})
    after = vault.get(ids["a"])
    assert updated["changed"] is True and updated["memory"]["tags"] == ["acme", "kept"]
    assert after["content"] == before["content"] and after["tags"] == ["acme", "kept"]
    assert after["front_matter"].get("expires") is None
    # ... but not where they would mean something else
    assert await refused(client, vault, "remember", {"content": "x", "ttl_days": -1}) == (
        "ttl_days must be at least 0; got -1.")
    assert await refused(client, vault, "update_memory", {"memory_id": ids["a"], "ttl_days": -2}) == (
        "ttl_days must be at least 0; got -2.")


async def test_an_mcp_memory_vault_export_without_its_format_is_refused_not_dated_today(
    client: Client, vault: Vault
) -> None:
    export = [{"id": 4, "content": "Old fact", "namespace": "", "tags": [], "created_at": "2025-01-02T03:04:05Z",
               "expires_at": "2025-02-01T00:00:00Z"}]
    text = await refused(client, vault, "import_memories", {"memories": export})
    assert "created_at, expires_at" in text and "format mcp-memory-vault" in text
    imported, _ = await call(client, "import_memories", {"memories": export, "format": "mcp-memory-vault"})
    assert imported["imported"] == 0 and imported["expired"] == 1
