"""import_memories: what an export, a backup or a hand-made batch may hold, and what the
vault does with it. All or nothing: a refused batch writes no file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agent_memory.note.render import render_new
from agent_memory.transfer.items import twin_id
from agent_memory.note.parse import is_tool_id
from agent_memory.errors import InvalidInput
from agent_memory.vault.vault import Vault

from conftest import CliResult, assert_index_matches_files, mcp_client, run_cli


def _files(vault: Vault) -> list[str]:
    return sorted(rel for rel, _ in vault.store.walk())


def test_an_old_export_does_not_take_back_an_edited_memory(vault: Vault) -> None:
    memory = vault.remember("The release train leaves on Thursdays")["memory"]
    exported = vault.export_memories()
    vault.update(memory["id"], expected_version=vault.get(memory["id"])["version"], content="The release train leaves on Wednesdays")

    result = vault.import_memories(json.loads(json.dumps(exported)))
    assert (result["imported"], result["duplicates"]) == (0, 1)
    assert _files(vault) == [memory["path"]]
    assert vault.get(memory["id"])["content"] == "The release train leaves on Wednesdays\n"
    assert vault.stats()["duplicate_ids"] == {}
    assert_index_matches_files(vault)


def test_two_items_with_one_id_and_different_content_are_both_kept(vault: Vault) -> None:
    """The second gets an id derived from the id and its content; importing the same data
    again adds nothing (once silently dropped as a duplicate)."""
    items = [
        {"path": "a.md", "front_matter": {"id": "abc123"}, "content": "First copy\n"},
        {"path": "b.md", "front_matter": {"id": "abc123"}, "content": "Second copy, edited\n"},
        {"path": "c.md", "front_matter": {"id": "abc123"}, "content": "First copy\n"},  # the same again: a duplicate
    ]
    result = vault.import_memories(items)
    twin = twin_id("abc123", "Second copy, edited\n")
    assert (result["imported"], result["duplicates"], result["ids"]) == (2, 1, ["abc123", twin])
    assert twin.startswith("abc123-") and _files(vault) == ["a.md", "b.md"]
    assert vault.get(twin)["content"] == "Second copy, edited\n" and vault.get("abc123")["path"] == "a.md"
    assert "id: " + twin in (vault.root / "b.md").read_text()
    again = vault.import_memories(items)
    assert (again["imported"], again["duplicates"]) == (0, 3) and _files(vault) == ["a.md", "b.md"]
    assert_index_matches_files(vault)


def test_a_twin_of_a_tool_id_keeps_the_tool_format_and_its_time(vault: Vault) -> None:
    first = vault.remember("The original.")["memory"]["id"]
    twin = twin_id(first, "Another text.")
    assert twin != first and twin[:10] == first[:10] and is_tool_id(twin)
    assert twin_id(first, "Another text.") == twin  # the same every time


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"content": "x", "tags": 5}, "Item 1: Tags must be a list"),
        ({"content": "x", "tags": {"a": 1}}, "Item 1: Tags must be a list"),
        ({"content": "x", "tags": [["nested"]]}, "Item 1: Tags must be a list"),
        ({"content": "x", "namespace": 5}, "Item 1: Namespace must be one word"),
        ({"content": "x", "namespace": ["a"]}, "Item 1: Namespace must be one word"),
        ({"content": "x", "front_matter": {"namespace": ["a"]}}, "Item 1: Namespace must be one word"),
        ({"content": "x", "front_matter": {"namespace": {"team": "a"}}}, "Item 1: Namespace must be one word"),
    ],
)
def test_import_of_a_wrong_type_is_refused_naming_the_item(vault: Vault, bad: dict, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        vault.import_memories([{"content": "a good one"}, bad])
    assert _files(vault) == []


def test_a_number_as_front_matter_namespace_is_read_as_the_reader_reads_it(vault: Vault) -> None:
    result = vault.import_memories([{"path": "n.md", "front_matter": {"namespace": 5}, "content": "Numbered\n"}])
    assert result["imported"] == 1
    assert vault.get("n.md")["namespace"] == "5"
    assert_index_matches_files(vault)


@pytest.mark.parametrize("bad", [5, {"a": 1}, [["a"]], [None]])
def test_library_calls_refuse_tags_of_a_wrong_type(vault: Vault, bad: object) -> None:
    with pytest.raises(InvalidInput, match="Tags must be a list"):
        vault.remember("x", tags=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="Namespace must be one word"):
        vault.remember("x", namespace=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("key", ["a: b\nid", "x\nid: stolen", "-x", "a #b", "", " lead", "trail ", "[x]", "<<", "a: b"])
def test_a_front_matter_key_that_is_not_a_plain_name_is_refused(vault: Vault, key: str) -> None:
    item = {"path": "k.md", "front_matter": {"title": "ok", key: "value"}, "content": "Keys\n"}
    with pytest.raises(InvalidInput, match=r"Item 0: .*key") as refused:
        vault.import_memories([item])
    assert repr(key) in str(refused.value)
    assert _files(vault) == []


@pytest.mark.parametrize("key", ["on", "2024", "Date created", "título", "related_to", "e-mail", "a/b", "v1.2"])
def test_plain_front_matter_keys_survive_export_and_import(vault: Vault, key: str) -> None:
    vault.import_memories([{"path": "k.md", "front_matter": {key: "value"}, "content": "Keys\n"}])
    assert vault.get("k.md")["front_matter"] == {key: "value"}
    assert_index_matches_files(vault)


def test_import_never_writes_through_a_symlinked_folder(vault: Vault, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (vault.root / "imps").mkdir()
    (vault.root / "imps/shared").symlink_to(outside, target_is_directory=True)
    (vault.root / "notes").symlink_to(vault.root / ".git", target_is_directory=True)
    (vault.root / ".git").mkdir()
    items = [
        {"path": "imps/shared/evil.md", "front_matter": {"created": "2026-07-01T10:00:00Z"}, "content": "Escaped\n"},
        {"path": "notes/hidden.md", "front_matter": {"created": "2026-07-02T10:00:00Z"}, "content": "Into a dot-folder\n"},
    ]
    result = vault.import_memories(items)
    assert result["imported"] == 2
    assert list(outside.iterdir()) == [] and list((vault.root / ".git").iterdir()) == []
    assert _files(vault) == ["2026/07/01/escaped.md", "2026/07/02/into-a-dot-folder.md"]
    assert vault.search("escaped")["count"] == 1
    assert_index_matches_files(vault)


def _without_id(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("id: "))


def test_a_hand_made_item_becomes_the_file_remember_writes(tmp_path: Path, clock) -> None:
    import datetime as dt

    clock.now = dt.datetime(2031, 3, 4, 5, 6, 7, tzinfo=dt.timezone.utc)  # not today: the vault's clock decides
    fields = {"content": "Customer ACME prefers deploys on Fridays\r\n", "namespace": "support",
              "tags": ["Customer", "deploy"], "title": "ACME deploys", "source": "call with Priya"}
    with Vault.init(tmp_path / "remembered", clock=clock) as remembered, Vault.init(tmp_path / "imported", clock=clock) as imported:
        made = remembered.remember(**fields)["memory"]
        result = imported.import_memories([fields, {"content": "A second fact, no fields"}])
        assert result["imported"] == 2
        memory = imported.get(result["ids"][0])
        assert memory["path"] == made["path"] == "2031/03/04/acme-deploys.md"
        assert _without_id((imported.root / memory["path"]).read_text()) == _without_id((remembered.root / made["path"]).read_text())
        assert memory["id"][:10] == made["id"][:10]  # the id's time part comes from the vault's clock
        assert (memory["created"], memory["updated"]) == ("2031-03-04T05:06:07Z", "2031-03-04T05:06:07Z")
        second = imported.get(result["ids"][1])
        assert second["path"].startswith("2031/03/04/")
        text = (imported.root / second["path"]).read_text()
        assert text == render_new({"id": second["id"], "namespace": "default", "tags": [],
                                         "created": "2031-03-04T05:06:07Z", "updated": "2031-03-04T05:06:07Z"},
                                        "A second fact, no fields")
        assert_index_matches_files(imported)


def test_a_hand_made_item_keeps_its_own_dates(vault: Vault) -> None:
    result = vault.import_memories([
        {"content": "Written long ago", "created": "2024-01-02T03:04:05+01:00"},
        {"content": "Written and edited", "created": "2024-01-02", "updated": "2024-02-03T00:00:00Z", "expires": "2099-01-01"},
    ])
    old, edited = (vault.get(i) for i in result["ids"])
    assert (old["path"], old["created"], old["updated"]) == ("2024/01/02/written-long-ago.md", "2024-01-02T02:04:05Z", "2024-01-02T02:04:05Z")
    assert (edited["created"], edited["updated"], edited["expires"]) == ("2024-01-02T00:00:00Z", "2024-02-03T00:00:00Z", "2099-01-01T00:00:00Z")
    assert_index_matches_files(vault)


def test_an_export_item_without_a_created_date_is_filed_by_the_vault_clock(vault: Vault, clock) -> None:
    import datetime as dt

    clock.now = dt.datetime(2031, 3, 4, 5, 6, 7, tzinfo=dt.timezone.utc)
    result = vault.import_memories([{"front_matter": {"title": "Undated"}, "content": "No dates here\n"}])
    assert vault.get(result["ids"][0])["path"] == "2031/03/04/undated.md"


def test_an_export_of_tags_the_reader_accepts_imports(vault: Vault, tmp_path: Path) -> None:
    (vault.root / "people").mkdir()
    (vault.root / "people/priya.md").write_text("---\ntags: [two words, Other, 2024]\n---\nPriya\n")
    (vault.root / "team.md").write_text("---\ntags: on-call  support\n---\nTeam\n")
    (vault.root / "count.md").write_text("---\ntags: 5\n---\nCount\n")
    vault.reconcile()
    exported = vault.export_memories()
    with Vault.init(tmp_path / "other", clock=vault.clock) as other:
        assert other.import_memories(json.loads(json.dumps(exported)))["imported"] == 3
        assert other.get("people/priya.md")["tags"] == vault.get("people/priya.md")["tags"] == ["two-words", "other", "2024"]
        assert other.get("team.md")["tags"] == ["on-call", "support"]
        assert other.get("count.md")["tags"] == ["5"]
        assert json.dumps(other.export_memories()) == json.dumps(exported)
        assert_index_matches_files(other)


@pytest.mark.parametrize(
    ("tags", "message"),
    [({"a": 1}, "tags must be"), ([["a"]], "tags must be"), ([f"t{i}" for i in range(51)], "51 tags"),
     (["x" * 65], "the limit is 64")],
)
def test_export_tags_past_what_a_memory_holds_are_refused(vault: Vault, tags: object, message: str) -> None:
    with pytest.raises(InvalidInput, match=f"Item 0: .*{message}"):
        vault.import_memories([{"path": "t.md", "front_matter": {"tags": tags}, "content": "Tagged\n"}])
    assert _files(vault) == []


def test_a_backup_larger_than_one_mcp_batch_imports_from_the_cli_in_one_pass(tmp_path: Path) -> None:
    from agent_memory.limits import MAX_BATCH

    backup = tmp_path / "backup.json"
    backup.write_text(json.dumps([{"content": f"Fact number {n} about the fleet"} for n in range(MAX_BATCH + 20)]))
    vault_dir = tmp_path / ".memory"

    def cli(*args: str) -> CliResult:
        return run_cli(*args, vault=vault_dir)

    assert "any number" in " ".join(cli("import", "--help").stdout.split())
    assert cli("init").returncode == 0
    done = cli("--json", "import", str(backup))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["imported"] == MAX_BATCH + 20
    with Vault(vault_dir) as vault:
        assert vault.stats()["total"] == MAX_BATCH + 20
        assert_index_matches_files(vault)


@pytest.mark.anyio
async def test_one_mcp_import_call_takes_at_most_max_batch_items(vault: Vault) -> None:
    from agent_memory.limits import MAX_BATCH

    async with mcp_client(vault) as client:
        tools = {t.name: t.input_schema["properties"] for t in (await client.list_tools()).tools}
    assert tools["import_memories"]["items"]["maxItems"] == MAX_BATCH
    assert tools["export_memories"]["limit"]["maximum"] == MAX_BATCH


# --------------------------------------------------------------------------- raw text round trip

# What people write that a front-matter re-render would change: comments, block lists,
# YAML 1.1 booleans, offsets, unknown keys in their order, CRLF line ends, a BOM.
WRITTEN_BY_PEOPLE = {
    "people/priya.md": (
        b"---\n"
        b"# who to ask about billing\n"
        b"aliases:\n"
        b"  - Priya R.\n"
        b"  - PR\n"
        b"tags:\n"
        b"  - people\n"
        b"archived: no\n"
        b"created: 2026-07-20T11:00:00+02:00\n"
        b"zzz: last key, kept last\n"
        b"---\n"
        b"Priya prefers written questions.\n"
    ),
    "windows.md": b"\xef\xbb\xbf---\r\ntags: [ops]\r\n---\r\nDeploys from the Windows box\r\n",
    "no-front-matter.md": b"Just a line, no newline at the end",
}


def test_import_of_an_unchanged_export_writes_byte_identical_files(vault: Vault, tmp_path: Path) -> None:
    for rel, data in WRITTEN_BY_PEOPLE.items():
        (vault.root / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault.root / rel).write_bytes(data)
    vault.reconcile()
    made = vault.remember("A memory the tool wrote", tags=["tool"])["memory"]
    exported = json.loads(json.dumps(vault.export_memories()))  # through JSON, as a backup file holds it
    assert {item["path"]: item["raw"] for item in exported}["windows.md"] == WRITTEN_BY_PEOPLE["windows.md"].decode()
    with Vault.init(tmp_path / "restored") as restored:
        result = restored.import_memories(exported)
        assert result["imported"] == 4 and result["duplicates"] == 0
        for rel, data in WRITTEN_BY_PEOPLE.items():
            assert (restored.root / rel).read_bytes() == data, rel
        assert (restored.root / made["path"]).read_bytes() == (vault.root / made["path"]).read_bytes()
        assert json.loads(json.dumps(restored.export_memories())) == exported
        assert_index_matches_files(restored)


def test_an_export_edited_in_its_fields_is_written_from_the_fields(vault: Vault, tmp_path: Path) -> None:
    (vault.root / "people").mkdir()
    (vault.root / "people/priya.md").write_bytes(WRITTEN_BY_PEOPLE["people/priya.md"])
    vault.reconcile()
    [item] = json.loads(json.dumps(vault.export_memories()))
    item["content"] = "Priya prefers a call.\n"  # a person edited the backup's content, not its raw text
    with Vault.init(tmp_path / "restored") as restored:
        restored.import_memories([item])
        assert restored.get("people/priya.md")["content"] == "Priya prefers a call.\n"


def test_a_raw_text_holding_a_credential_is_refused_and_nothing_is_written(vault: Vault) -> None:
    token = "ghp_" + "16C7e42F292c6912E7710c838347Ae178B4a"
    items = [
        {"path": "fine.md", "raw": "A fine memory\n"},
        {"path": "ci.md", "raw": f"---\ntags: [ci]\n# the CI token: {token}\n---\nThe CI uses a token.\n"},
    ]
    with pytest.raises(InvalidInput) as refused:
        vault.import_memories(items)
    assert "Item 1" in str(refused.value) and token not in str(refused.value)
    assert _files(vault) == []
    assert not (vault.store.control_dir / "import").exists()
    assert_index_matches_files(vault)


@pytest.mark.parametrize(("raw", "message"), [
    (42, "raw must be text"),
    ("---\nnamespace: ..\n---\nA body\n", "amespace"),
    ("A body with a NUL \x00 in it\n", "NUL"),
])
def test_a_bad_raw_text_is_refused_naming_the_item(vault: Vault, raw: object, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        vault.import_memories([{"path": "a.md", "raw": raw}])
    assert _files(vault) == []


@pytest.mark.parametrize("syncfs", [True, False], ids=["syncfs", "fsync-each"])
def test_a_batch_import_is_durable_and_indexed_as_a_rebuild_would(vault: Vault, monkeypatch: pytest.MonkeyPatch,
                                                                  syncfs: bool) -> None:
    """Files written together, made durable once (syncfs, or each file and folder
    fsynced where there is none), indexed in one go from the bytes written: the index
    is what a rebuild from the files gives, and the staging folder is gone."""
    from agent_memory.disk import store as store_module

    if not syncfs:
        monkeypatch.setattr(store_module, "_syncfs", None)
    synced: list[str] = []
    real_fsync = store_module.os.fsync
    monkeypatch.setattr(store_module.os, "fsync", lambda fd: synced.append("fsync") or real_fsync(fd))
    items = [{"content": f"Imported fact {i} about the billing queue", "namespace": "imports",
              "created": f"2025-03-{1 + i % 3:02d}T10:00:00Z"} for i in range(30)]
    result = vault.import_memories(items)
    assert result["imported"] == 30 and len(set(result["ids"])) == 30
    assert sorted(result["paths"]) == sorted(rel for rel in _files(vault))
    assert not (vault.root / ".index" / "import").exists()
    if syncfs:  # the manifest, its register entry and their folders: the 30 files went with one syncfs each way
        assert len(synced) <= 5
    else:
        assert len(synced) >= 30
    assert [h["path"] for h in vault.search("fact 7 billing")["hits"]][:1] == [
        p for p in result["paths"] if vault.get(p)["content"].startswith("Imported fact 7 ")]
    assert_index_matches_files(vault)


@pytest.mark.parametrize("extra, message", [
    ({"aliases": "Priya"}, "Item 0: aliases must be a list of names; got 'Priya'."),
    ({"links": "[[Priya]]"}, "Item 0: links must be an object of {relation: [note names]}."),
    ({"links": {"bad name!": ["Priya"]}}, "Item 0: Relation 'bad name!' is not a relation name"),
    ({"links": {"related_to": "Priya"}}, "Item 0: links['related_to'] must be a list of note names."),
    ({"links": {"related_to": ["Priya"]}, "relation_types": {"other": "knows"}},
     "Item 0: relation_types must map a relation in links to its name in the source."),
    ({"title": 5}, "Item 0: title must be text; got 5."),
])
def test_a_malformed_field_names_the_item_and_imports_nothing(vault: Vault, extra: dict, message: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(message) + ".* Nothing was imported"):
        vault.import_memories([{"content": "Priya leads billing.", **extra}, {"content": "A second, fine item."}])
    assert list(vault.store.walk()) == []


@pytest.mark.parametrize("items", ["a string", {"content": "an object"}, 7])
def test_an_import_that_is_not_a_list_says_what_it_expects(vault: Vault, items: object) -> None:
    with pytest.raises(InvalidInput, match=r"Import expects a JSON array of memories \(as written by export\)"):
        vault.import_memories(items)
    assert list(vault.store.walk()) == []
