"""The index is a cache and the disk can misbehave: the vault keeps working."""

from __future__ import annotations

import errno
import json
import os
import sqlite3
from pathlib import Path

import pytest

from agent_memory.disk import store as store_module
from agent_memory.errors import InvalidInput, VaultError
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, cli_ok, deadline, run_cli


def test_a_corrupt_index_file_is_rebuilt_from_the_files(vault: Vault) -> None:
    memory = vault.remember("Customer ACME prefers deploys on Fridays")["memory"]
    db = vault.index.path
    vault.close()
    db.write_bytes(b"this is not a database, a sync tool wrote half a copy" * 100)
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)

    reopened = Vault(vault.root, clock=vault.clock)
    try:
        assert [h["id"] for h in reopened.search("ACME Fridays")["hits"]] == [memory["id"]]
        assert_index_matches_files(reopened)
    finally:
        reopened.close()


def test_a_corrupt_index_does_not_break_the_cli(vault: Vault) -> None:
    vault.remember("Globex wants incident summaries")
    vault.close()
    vault.index.path.write_bytes(b"\x00garbage" * 500)
    done = run_cli("search", "Globex", vault=vault.root)
    assert done.returncode == 0, done.stderr
    assert "Globex wants incident summaries" in done.stdout


# How a teammate's committed or a damaged ``.index/`` can hold the count of memories: the
# statements run on the closed index file.
MISCOUNTS = {
    "no row": ["DELETE FROM counts"],
    "two rows": ["INSERT INTO counts VALUES (7)"],
    "text": ["UPDATE counts SET memories = 'many'"],
    "null": ["DROP TABLE counts", "CREATE TABLE counts (memories INTEGER)", "INSERT INTO counts VALUES (NULL)"],
    "a wrong number": ["UPDATE counts SET memories = 999999"],
}


@pytest.mark.parametrize("damage", MISCOUNTS)
def test_an_index_whose_count_of_memories_is_damaged_is_recounted_on_open(vault: Vault, damage: str) -> None:
    """Every command read the count as one whole number: no row, or NULL, or text made
    them all crash with a TypeError (or an IndexError); the open recounts instead."""
    for k in range(60):
        vault.remember(f"Globex note {k} about incident summaries")
    vault.close()
    conn = sqlite3.connect(vault.index.path)
    for statement in MISCOUNTS[damage]:
        conn.execute(statement)
    conn.commit()
    conn.close()
    found = json.loads(cli_ok("--json", "search", "Globex incident", "--limit", "100", vault=vault.root))
    assert found["count"] == 60
    assert json.loads(cli_ok("--json", "stats", vault=vault.root))["total"] == 60
    cli_ok("add", "Globex wants the summaries by noon", vault=vault.root)
    with Vault(vault.root) as reopened:
        assert [tuple(row) for row in reopened.index.query("SELECT memories FROM counts")] == [(61,)]
        assert reopened.list()["total"] == 61


def test_a_read_only_vault_with_expired_memories_can_still_be_searched(
    vault: Vault, clock, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    vault.remember("a short-lived fact about parking", ttl_days=1)
    kept = vault.remember("a lasting fact about parking")["memory"]
    vault.close()
    clock.advance(days=2)

    def read_only(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(store_module.os, "rename", read_only)
    monkeypatch.setattr(store_module.os, "link", read_only)
    monkeypatch.setattr(store_module.locking, "move_no_replace", read_only)  # renameat2 bypasses os.*
    reopened = Vault(vault.root, clock=clock)
    try:
        assert "read-only" in caplog.text
        assert [h["id"] for h in reopened.search("parking")["hits"]] == [kept["id"]]
        assert len(list(reopened.store.walk())) == 2  # nothing moved, nothing lost
    finally:
        reopened.close()


def test_remember_works_where_hard_links_are_not_supported(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_links(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(store_module.os, "link", no_links)
    monkeypatch.setattr(store_module.locking, "_renameat2", None)  # else RENAME_NOREPLACE names it, no link is made
    first = vault.remember("Same title here", title="Same title")["memory"]
    second = vault.remember("Other content, same title", title="Same title")["memory"]
    assert first["path"].endswith("/same-title.md") and second["path"].endswith("/same-title-2.md")
    assert vault.get(first["id"])["content"].strip() == "Same title here"
    leftovers = [p for p in vault.root.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []
    assert_index_matches_files(vault)


def test_an_expired_owner_does_not_hide_a_live_copy_of_its_id(vault: Vault, clock) -> None:
    owner = vault.remember("the original, short lived", ttl_days=1)["memory"]
    text = (vault.root / owner["path"]).read_text()
    copy = text.replace("the original, short lived", "a hand-made copy that lasts").replace(
        next(line for line in text.splitlines() if line.startswith("expires:")) + "\n", ""
    )
    clock.advance(hours=1)
    (vault.root / "copy.md").write_text(copy.replace(owner["created"], "2026-07-20T09:30:00Z"))
    vault.reconcile()
    assert vault.get(owner["id"])["path"] == owner["path"]  # earliest created owns the id
    clock.advance(days=1)
    assert vault.get(owner["id"])["path"] == "copy.md"


def test_limit_must_be_a_real_number(vault: Vault) -> None:
    with pytest.raises(InvalidInput, match="limit must be between 1 and 100"):
        vault.search("anything", limit=True)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- one odd file


def _write(root: Path, name: str, text: str) -> None:
    (root / name).write_text(text, encoding="utf-8")


def _bad_name(root: Path) -> None:
    with open(os.path.join(os.fsencode(root), b"caf\xe9.md"), "wb") as handle:  # Latin-1 bytes, not UTF-8
        handle.write(b"A note about the cafe\n")


def _unreadable(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests run as root, who may read anything: refuse this one file at ``open``."""
    import builtins
    import io

    _write(root, "secret.md", "A note about payroll\n")
    real_os_open, real_open = os.open, builtins.open

    def os_open(path, *args, **kwargs):
        if os.fsdecode(path).endswith("secret.md"):
            raise PermissionError(13, "Permission denied", os.fsdecode(path))
        return real_os_open(path, *args, **kwargs)

    def builtin_open(file, *args, **kwargs):
        if isinstance(file, (str, bytes, os.PathLike)) and os.fsdecode(file).endswith("secret.md"):
            raise PermissionError(13, "Permission denied", os.fsdecode(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr(builtins, "open", builtin_open)
    monkeypatch.setattr(io, "open", builtin_open)  # what pathlib's read_bytes calls


# name, how to make it (root, monkeypatch), path the watcher would report, problem it is indexed with (None: not a memory)
ODD_FILES = [
    ("impossible date", lambda r, m: _write(r, "when.md", "---\nwhen: 2026-02-30\n---\nA note about the launch\n"),
     "when.md", "broken YAML"),
    ("created before year 1 in UTC",
     lambda r, m: _write(r, "old.md", "---\ncreated: 0001-01-01 00:00:00+05:00\n---\nA note about antiquity\n"),
     "old.md", "created:"),
    ("expires after year 9999 in UTC",
     lambda r, m: _write(r, "late.md", "---\nid: 01jd8x4k2m9q7r3t\nexpires: 9999-12-31T23:59:59-05:00\n---\n"
                               "A note about eternity\n"),
     "late.md", "expires:"),
    ("file name that is not UTF-8", lambda r, m: _bad_name(r), os.fsdecode(b"caf\xe9.md"), None),
    ("symlink loop", lambda r, m: (r / "loop.md").symlink_to("loop.md"), "loop.md", None),
    ("named pipe", lambda r, m: os.mkfifo(r / "pipe.md"), "pipe.md", None),
    ("symlink to a folder", lambda r, m: (r / "folder.md").symlink_to(r / "2026", target_is_directory=True),
     "folder.md", None),
    ("unreadable file", lambda r, m: _unreadable(r, m), "secret.md", None),
]


def _finishes(seconds: float, work, fifo: Path) -> None:
    """Run ``work`` in a thread; fail (instead of hanging the suite) if it blocks on the pipe."""
    import threading
    import time

    errors: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(deadline(seconds))
    blocked = thread.is_alive()
    for _ in range(100):  # a reader stuck on the pipe gets end-of-file, so the thread ends
        if not thread.is_alive():
            break
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
        time.sleep(0.05)
    if blocked:
        pytest.fail(f"still running after {deadline(seconds):g} s: blocked reading a file")
    if errors:
        raise errors[0]


@pytest.mark.parametrize(("case", "make", "rel", "problem"), ODD_FILES, ids=[c[0] for c in ODD_FILES])
def test_one_odd_file_breaks_no_command(
    vault_dir: Path, clock, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
    case: str, make, rel: str, problem: str | None,
) -> None:
    from agent_memory.vault.doctor import diagnose
    from agent_memory.errors import NotFound

    with Vault.init(vault_dir, clock=clock) as first:
        kept = first.remember("Customer ACME prefers deploys on Fridays")["memory"]
    make(vault_dir, monkeypatch)

    def every_command() -> None:
        with Vault(vault_dir, clock=clock) as vault:
            vault.reconcile_path(rel)  # what the watcher does when the file appears
            vault.reconcile()
            vault.reindex()
            assert [h["id"] for h in vault.search("ACME Fridays")["hits"]] == [kept["id"]]
            assert vault.list()["total"] == (1 if problem is None else 2)
            assert vault.stats()["total"] == (1 if problem is None else 2)
            assert len(vault.export_memories()) == (1 if problem is None else 2)
            if problem is None:
                with pytest.raises(NotFound):
                    vault.get(rel)
            else:
                assert any(p.startswith(problem) for p in vault.get(rel)["problems"]), vault.get(rel)["problems"]
                assert vault.search(vault.get(rel)["content"].split()[-1])["count"] == 1
            assert_index_matches_files(vault)
        checks = {c.name: c for c in diagnose(vault_dir)}
        assert checks["index"].ok, checks["index"]

    _finishes(20, every_command, vault_dir / "pipe.md")
    if case == "unreadable file":
        assert "secret.md" in caplog.text  # skipped, and said so


# --------------------------------------------------------------------------- symlinks into dot-folders


def test_a_symlink_into_a_dot_folder_is_not_a_memory(vault: Vault) -> None:
    from agent_memory.errors import NotFound, PathRefused

    (vault.root / ".git").mkdir()
    (vault.root / ".git/config").write_text('[remote "origin"]\n\turl = https://ghp_SECRETTOKEN123@github.com/me/notes\n')
    (vault.root / "notes.md").symlink_to(".git/config")
    (vault.root / "people").mkdir()
    (vault.root / "people/hooks.md").symlink_to(vault.root / ".git", target_is_directory=False)
    vault.remember("The deploy token rotates monthly")
    for rel in ("notes.md", "people/hooks.md"):
        vault.reconcile_path(rel)  # the watcher's path
    vault.reconcile()

    assert [rel for rel, _ in vault.store.walk() if not rel.startswith("2026/")] == []
    assert vault.search("ghp_SECRETTOKEN123")["count"] == 0
    assert vault.search("origin github")["count"] == 0
    for call in (vault.get, vault.forget):
        with pytest.raises(NotFound):
            call("notes.md")
    with pytest.raises(PathRefused):
        vault.read_file("notes.md")
    assert all("SECRETTOKEN" not in str(item) for item in vault.export_memories())
    assert_index_matches_files(vault)


# --------------------------------------------------------------------------- AGENT_MEMORY_INDEX_DIR


def test_two_vaults_sharing_an_index_dir_get_an_index_each(
    tmp_path: Path, clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_memory.vault.doctor import diagnose

    shared = tmp_path / "cache"
    monkeypatch.setenv("AGENT_MEMORY_INDEX_DIR", str(shared))
    work = Vault.init(tmp_path / "work/.memory", clock=clock)
    home = Vault.init(tmp_path / "home/.memory", clock=clock)
    try:
        at_work = work.remember("The work VPN needs the hardware key")["memory"]
        at_home = home.remember("The home router password is on the fridge")["memory"]
        home.reconcile()
        work.reconcile()
        assert [h["id"] for h in work.search("hardware key")["hits"]] == [at_work["id"]]
        assert [h["id"] for h in home.search("router fridge")["hits"]] == [at_home["id"]]
        assert work.search("router fridge")["count"] == 0
        assert work.index_dir != home.index_dir
        assert {work.index_dir.parent, home.index_dir.parent} == {shared}
        assert work.index_dir.name.startswith("memory-")  # named after the vault folder, then a hash of its path
        # The database is elsewhere; only the write lock (and the folder's .gitignore) stays
        # in the vault's own .index/, so a CLI without the variable and a server with it
        # still exclude each other.
        assert sorted(p.name for p in (tmp_path / "work/.memory/.index").iterdir()) == [
            ".gitignore", "write.lock", "writes.json"]
        for vault in (work, home):
            assert {c.name: c for c in diagnose(vault.root)}["index"].ok
            assert_index_matches_files(vault)
    finally:
        work.close()
        home.close()


def test_an_explicit_index_dir_names_the_folder_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_MEMORY_INDEX_DIR", str(tmp_path / "cache"))
    with Vault.init(tmp_path / ".memory", index_dir=tmp_path / "mine") as vault:
        assert vault.index_dir == tmp_path / "mine"


def test_deleting_the_index_folder_while_a_vault_is_open_breaks_nothing(vault: Vault) -> None:
    import shutil

    first = vault.remember("Globex wants incident summaries on Mondays")["memory"]
    shutil.rmtree(vault.index_dir)
    second = vault.remember("Initech deploys on Tuesdays")["memory"]
    assert {h["id"] for h in vault.search("deploys incident", match="any")["hits"]} == {first["id"], second["id"]}
    shutil.rmtree(vault.index_dir)
    vault.reconcile()
    assert vault.list()["total"] == 2
    shutil.rmtree(vault.index_dir)
    assert [h["id"] for h in vault.search("Globex Mondays")["hits"]] == [first["id"]]
    shutil.rmtree(vault.index_dir)
    vault.update(second["id"], add_tags=["initech"])
    assert_index_matches_files(vault)


def test_read_file_does_not_return_an_expired_memory(vault: Vault, clock) -> None:
    from agent_memory.errors import NotFound

    short = vault.remember("The door code is 4512 this week", ttl_days=1)["memory"]
    (vault.root / "notes").mkdir()
    (vault.root / "notes/old.md").write_text(
        "---\nid: 01jd8x4k2m9q7r3t\nexpires: 2026-07-21T00:00:00Z\n---\nThe wifi password is tulip\n")
    (vault.root / "notes/passport.md").write_text("---\nexpires: 2026-07-21\n---\nPassport renewal\n")
    assert "4512" in vault.read_file(short["path"])["content"]
    clock.advance(days=2)  # no sweep has run: the files are still there
    for rel in (short["path"], "notes/old.md"):
        assert (vault.root / rel).exists()
        with pytest.raises(NotFound):
            vault.read_file(rel)
    assert "Passport renewal" in vault.read_file("notes/passport.md")["content"]  # a person's note never expires


DROPPINGS = [  # editors' swap, backup, lock and temp files next to people/priya.md
    ".priya.md.swp", ".priya.md.swo", "priya.md~", "4913", ".#priya.md", "#priya.md#", "priya.md.tmp",
    "priya.md.crswap", "priya.md___jb_tmp___", "priya.md___jb_old___", "._priya.md", ".~lock.priya.md#",
    ".priya.md.kate-swp", "priya.md.save", "priya.md.orig", "priya.md.bak", ".priya.md.aB3xYz",
]


def test_editor_droppings_are_never_memories(vault: Vault) -> None:
    (vault.root / "people").mkdir()
    (vault.root / "people/priya.md").write_text("Priya likes tea\n")
    for name in DROPPINGS:
        (vault.root / "people" / name).write_text("Priya likes coffee\n")
        vault.reconcile_path(f"people/{name}")  # the watcher's path
    vault.reconcile()
    assert [rel for rel, _ in vault.store.walk()] == ["people/priya.md"]
    assert [h["path"] for h in vault.search("Priya likes", match="any")["hits"]] == ["people/priya.md"]
    assert_index_matches_files(vault)


def test_the_rebuild_check_leaves_no_folder_behind(vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    vault.remember("Customer ACME prefers deploys on Fridays")
    assert_index_matches_files(vault)
    assert list(scratch.iterdir()) == []


# --------------------------------------------------------------------------- one way to read tags

TAG_SPELLINGS = [  # as sent (CLI, library, model) or written in a file's tags property -> tags
    ('["a", "b"]', ["a", "b"]),
    ("[a, b]", ["a", "b"]),
    ("a, b", ["a", "b"]),
    (["customer, deploy"], ["customer", "deploy"]),
    (["x,y", "Z"], ["x", "y", "z"]),
    ("'quoted', \"double\"", ["quoted", "double"]),
]


@pytest.mark.parametrize(("value", "expected"), TAG_SPELLINGS, ids=[repr(v) for v, _ in TAG_SPELLINGS])
def test_tags_mean_the_same_given_to_remember_or_written_in_a_file(vault: Vault, value: object, expected: list[str]) -> None:
    from agent_memory.note.render import yaml_scalar

    given = vault.remember(f"Tagged by the library {value!r}", tags=value)["memory"]  # type: ignore[arg-type]
    (vault.root / "hand.md").write_text(f"---\ntags: {yaml_scalar(value)}\n---\nTagged by hand\n")
    assert given["tags"] == expected
    assert vault.get("hand.md")["tags"] == expected
    assert [h["id"] for h in vault.search("tagged library", tags=value, match="all")["hits"]] == [given["id"]]  # type: ignore[arg-type]
    assert_index_matches_files(vault)


@pytest.mark.parametrize(
    "front_matter",
    ['tags: ["customer, deploy", other]\n', 'related_to: ["[[acme, billing]]"]\n', 'a: ["x, y", "z"]\n', 'a: ["p, q"]\n'],
)
def test_a_quoted_list_item_holding_a_comma_reads_as_yaml_reads_it(front_matter: str) -> None:
    import yaml

    from agent_memory.note.parse import parse

    parsed = parse(f"---\n{front_matter}---\nbody\n".encode(), "x.md")
    assert parsed.meta == yaml.safe_load(front_matter)


@pytest.mark.parametrize(
    "text",
    ["---\ntags: [a, b\n---\nBroken list\n", "---\n- a list\n---\nNot a mapping\n", "---\nwhen: 2026-02-30\n---\nNo such day\n"],
)
def test_tools_do_not_edit_a_file_whose_front_matter_they_cannot_read(vault: Vault, text: str) -> None:
    other = vault.remember("Another memory to link to")["memory"]
    (vault.root / "hand.md").write_text(text)
    for change in (lambda: vault.update("hand.md", add_tags=["x"]), lambda: vault.link("hand.md", other["id"])):
        with pytest.raises(InvalidInput, match="hand.md has a problem a tool must not guess around"):
            change()
    assert (vault.root / "hand.md").read_text() == text
    assert_index_matches_files(vault)


def test_remember_refuses_to_write_through_a_symlinked_dated_folder(vault: Vault, clock, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (vault.root / clock.now.strftime("%Y")).symlink_to(outside, target_is_directory=True)
    with pytest.raises(VaultError, match="symlink"):
        vault.remember("this must not land outside the vault")
    assert list(outside.rglob("*")) == []
    assert vault.search("outside the vault")["count"] == 0
