"""`--where key=value` on search and list, `where` on recall and list_memories: any
front-matter property, from the index's property tables (not a scan of the files)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_memory.errors import InvalidInput, VaultError
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, cli_ok, run_cli
from conftest import tool_error as fails, tool_ok as ok

pytestmark = pytest.mark.anyio

NOTES = {
    "acme-done.md": "---\nStatus: Done\nproject: \"[[Acme Corp|Acme]]\"\npriority: 3\nreviewers: [ana, Bo]\n---\nInvoice flow shipped.\n",
    "acme-open.md": "---\nstatus: open\nproject: acme corp\npriority: 3.0\nreviewers: [bo]\n---\nInvoice retries pending.\n",
    "globex.md": "---\nstatus: done\nproject: globex\narchived: true\nreviewers: []\n---\nInvoice export for Globex.\n",
    "plain.md": "An invoice note with no properties at all.\n",
}


@pytest.fixture
def notes(vault: Vault) -> Vault:
    for name, text in NOTES.items():
        (vault.root / "notes").mkdir(exist_ok=True)
        (vault.root / "notes" / name).write_text(text)
    vault.reindex()
    return vault


def _paths(result: dict) -> list[str]:
    return sorted(m["path"].removeprefix("notes/") for m in result.get("memories", result.get("hits", [])))


def test_equality_presence_lists_and_case_rules(notes: Vault) -> None:
    assert _paths(notes.list(where=["status=done"])) == ["acme-done.md", "globex.md"]  # key and text: any case
    assert _paths(notes.list(where=["status=done", "project=acme corp"])) == ["acme-done.md"]  # all must hold
    assert _paths(notes.list(where=["project=acme corp"])) == ["acme-done.md", "acme-open.md"]  # a link by its target
    assert _paths(notes.list(where=["reviewers=bo"])) == ["acme-done.md", "acme-open.md"]  # a list by membership
    assert _paths(notes.list(where=["priority=3"])) == ["acme-done.md", "acme-open.md"]  # 3 and 3.0 are one number
    assert _paths(notes.list(where=["archived=TRUE"])) == ["globex.md"]
    assert _paths(notes.list(where=["archived"])) == ["globex.md"]  # present
    assert _paths(notes.list(where=["reviewers"])) == ["acme-done.md", "acme-open.md", "globex.md"]  # even empty
    assert _paths(notes.list(where={"status": None, "priority": 3})) == ["acme-done.md", "acme-open.md"]
    assert notes.list(where=["status=don"])["total"] == 0  # equality, not a prefix


def test_where_narrows_a_search_inside_sql(notes: Vault) -> None:
    found = notes.search("invoice", where=["status=done"])
    assert _paths(found) == ["acme-done.md", "globex.md"]
    explained = notes.search("invoice", where=["status=done"], explain=True)["explain"]["statements"]
    assert any("FROM props" in s["sql"] for s in explained)  # the property table, in the query itself


def test_a_hand_edit_moves_a_memory_in_and_out_of_a_filter(notes: Vault) -> None:
    path = notes.root / "notes" / "acme-open.md"
    path.write_text(path.read_text().replace("status: open", "status: done"))
    notes.reconcile_path("notes/acme-open.md")
    assert _paths(notes.list(where=["status=done"])) == ["acme-done.md", "acme-open.md", "globex.md"]
    path.unlink()
    notes.reconcile_path("notes/acme-open.md")
    assert _paths(notes.list(where=["status=done"])) == ["acme-done.md", "globex.md"]
    assert_index_matches_files(notes)  # the property rows are rebuilt the same from the files


@pytest.mark.parametrize("bad", [["=done"], [" "], [3], ["x" * 201 + "=1"], {"status": ["a"]}, [f"k{n}" for n in range(21)]])
def test_a_bad_condition_is_one_clear_error(notes: Vault, bad: object) -> None:
    with pytest.raises(InvalidInput, match="where|property name"):
        notes.list(where=bad)


def test_cli_where_on_list_and_search(tmp_path: Path) -> None:
    root = tmp_path / ".memory"
    cli_ok("init", str(root))
    for name, text in NOTES.items():
        (root / name).write_text(text)
    listed = json.loads(cli_ok("--json", "list", "--where", "status=done", "--where", "reviewers=ana", vault=root))
    assert [m["path"] for m in listed["memories"]] == ["acme-done.md"]
    found = json.loads(cli_ok("--json", "search", "invoice", "-w", "project=globex", vault=root))
    assert [h["path"] for h in found["hits"]] == ["globex.md"]
    bad = run_cli("list", "--where", "=x", vault=root)
    assert bad.returncode == 1 and "status=done" in bad.stderr and "Traceback" not in bad.stderr


async def test_where_over_mcp_as_a_list_or_an_object(client: object, notes: Vault) -> None:
    listed = await ok(client, "list_memories", where=["status=done"])
    assert _paths(listed) == ["acme-done.md", "globex.md"]
    recalled = await ok(client, "recall", query="invoice", where={"project": "acme corp", "status": "open"})
    assert _paths(recalled) == ["acme-open.md"]
    assert "property name" in await fails(client, "list_memories", where=["=done"])


def test_the_property_tables_drive_the_query_not_a_scan(notes: Vault) -> None:
    from agent_memory.recall.sql import Filters

    where, params = Filters(where=(("status", "done"), ("archived", None))).sql()
    plan = " | ".join(row[3] for row in notes.index.query(
        f"EXPLAIN QUERY PLAN SELECT * FROM memories m WHERE (m.expires IS NULL OR m.expires > ?){where} "
        "ORDER BY m.updated DESC LIMIT 20", ["2026-01-01T00:00:00Z", *params]))
    assert "SEARCH props USING PRIMARY KEY (key=? AND value=?)" in plan
    assert "SEARCH prop_keys USING PRIMARY KEY (key=?)" in plan
    assert "SCAN m" not in plan and "SCAN memories" not in plan


def _property_rows(vault: Vault) -> int:
    return int(vault.index.query("SELECT (SELECT count(*) FROM props) + (SELECT count(*) FROM prop_keys)")[0][0])


def test_the_property_rows_are_built_by_the_first_filter_and_kept_by_every_writer(notes: Vault, clock) -> None:
    assert _property_rows(notes) == 0  # a rebuild leaves them to the first filter
    assert _paths(notes.list(where=["status=done"])) == ["acme-done.md", "globex.md"]
    assert _property_rows(notes) > 0
    other = Vault(notes.root, clock=clock)  # another process's connection, which had not built them
    try:
        (notes.root / "notes" / "initech.md").write_text("---\nstatus: DONE\n---\nInvoice for Initech.\n")
        other.reconcile_path("notes/initech.md")
        assert _paths(notes.list(where=["status=done"])) == ["acme-done.md", "globex.md", "initech.md"]
        assert_index_matches_files(notes)
        other.reindex()  # empties them again: the next filter builds them from the rebuilt rows
        assert _property_rows(notes) == 0
        assert _paths(notes.search("invoice", where=["status=done"])) == ["acme-done.md", "globex.md", "initech.md"]
    finally:
        other.close()


def test_a_full_disk_while_building_them_is_one_clear_error_and_nothing_is_lost(vault: Vault) -> None:
    for n in range(300):
        (vault.root / f"note-{n}.md").write_text(f"---\nstatus: s{n} {'x' * 400}\nowner: o{n} {'y' * 400}\n---\nInvoice {n}.\n")
    vault.reindex()
    conn = vault.index.conn
    conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")
    try:
        with pytest.raises(VaultError, match="disk is full.*Free some disk space"):
            vault.list(where=["status"])
    finally:
        conn.execute("PRAGMA max_page_count = 4294967294")
    assert _property_rows(vault) == 0 and vault.index.query("SELECT count(*) FROM derived")[0][0] == 0
    assert vault.list(where=["status"], limit=1)["total"] == 300  # built on the next try
    assert_index_matches_files(vault)
