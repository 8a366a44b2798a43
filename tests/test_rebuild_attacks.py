"""A rebuild's reads and its load attacked with what a pulled file or a synced folder can
bring: odd names and kinds of file, a huge file, hard links, a vault reached through a
symlink, deep trees and too few descriptors, and a load that fails half way. Each reads
what ``Store.read`` (the one confinement rule) reads, leaks no descriptor, and leaves
the index as it was and usable."""

from __future__ import annotations

import datetime as dt
import gc
import os
import resource
import socket
import sqlite3
import stat as stat_kind
from pathlib import Path

import pytest

from agent_memory.disk import openat
from agent_memory.errors import VaultError
from agent_memory.disk.store import Store
from agent_memory.index import properties
from agent_memory.index.db import CACHE_KIB, SCHEMA, Index
from agent_memory.index.loading import FTS_AUTOMERGE, FTS_HASH, LOAD_CACHE_KIB, index_statements
from agent_memory.index.reconcile import FileIndexer
from agent_memory.vault.vault import Vault
from conftest import assert_index_matches_files

SECRET = b"The launch code is 0000, kept outside the vault.\n"
LIMIT = 10 * 2**20


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def what(found: tuple[bytes, os.stat_result] | None) -> tuple[bytes, int] | None:
    return None if found is None else (found[0], found[1].st_ino)


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


@pytest.mark.skipif(not openat.OPEN_AT, reason="no descriptor-relative open here: read_all is read")
def test_odd_names_and_kinds_of_file_read_as_read_reads_them(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    write(root, {"a/x.md": "In a.\n", "new\nline.md": "A name with a newline.\n",
                 ".index/s.md": "An index record.\n", ".trash/t.md": "Trashed.\n", ".git/c.md": "Git.\n",
                 ".prompts/p.md": "A prompt.\n"})
    (tmp_path / "secret.md").write_bytes(SECRET)
    (root / os.fsdecode(b"bad\xff.md")).write_text("A name that is not UTF-8.\n")
    with open(root / "huge.md", "wb") as huge:  # 100 MB, sparse: over the cap, never read
        huge.truncate(100 * 2**20)
    os.link(root / "a" / "x.md", root / "hard.md")  # a second name for a file in the vault
    (root / "folder.md").mkdir()
    os.mkfifo(root / "pipe.md")
    (root / "a" / "loop").symlink_to(root / "a", target_is_directory=True)  # a folder linking to itself
    (root / "self").symlink_to("self")  # a folder link that is its own target
    (root / "to-git.md").symlink_to(root / ".git" / "c.md")  # a link into a dot-folder of the vault
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(root / "sock.md"))
        rels = ["a/x.md", "new\nline.md", os.fsdecode(b"bad\xff.md"), "huge.md", "hard.md", "folder.md",
                "pipe.md", "sock.md", "a/loop/x.md", "a/loop/loop/loop/x.md", "self/x.md",
                ".index/s.md", ".trash/t.md", ".git/c.md", "a/../.index/s.md", ".prompts/p.md",
                "a/../../secret.md", str(tmp_path / "secret.md"), "/" + str(tmp_path / "secret.md"), "",
                "to-git.md"]
        store = Store(root)
        before = open_fds()
        together = [(rel, what(found)) for rel, found in store.read_all(rels, LIMIT)]
        assert open_fds() == before
        one_by_one = [(rel, what(store.read(rel, LIMIT))) for rel in rels]
    finally:
        server.close()
    assert together == one_by_one
    read = {rel: found and found[0] for rel, found in together}
    assert read["new\nline.md"] == b"A name with a newline.\n"
    assert read[os.fsdecode(b"bad\xff.md")] == b"A name that is not UTF-8.\n"
    assert read["hard.md"] == read["a/x.md"] == b"In a.\n"  # as read reads a hard link: its bytes
    assert read[".prompts/p.md"] == b"A prompt.\n"
    never = ["huge.md", "folder.md", "pipe.md", "sock.md", ".index/s.md", ".trash/t.md", ".git/c.md",
             "a/../.index/s.md", "a/../../secret.md", str(tmp_path / "secret.md"), "", "to-git.md"]
    assert all(read[rel] is None for rel in never)
    assert SECRET not in read.values()


def test_a_vault_reached_through_a_symlink_reads_every_file(tmp_path: Path) -> None:
    real = tmp_path / "real"
    write(real, {"2026/01/01/a.md": "Alpha about the kettle.\n", "2026/01/02/b.md": "Bravo about the printer.\n"})
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    store = Store(tmp_path / "link")
    assert [what(found) is not None for _rel, found in store.read_all(["2026/01/01/a.md", "2026/01/02/b.md"])] \
        == [True, True]
    with Vault(tmp_path / "link") as vault:
        vault.reindex()
        assert vault.search("kettle")["count"] == 1 and vault.search("printer")["count"] == 1


def deep_and_wide(root: Path) -> list[str]:
    """A chain of folders 200 deep and 300 folders side by side, a file in each."""
    deep = "/".join(f"d{i}" for i in range(200))
    files = {f"{deep}/x.md": "At the bottom.\n"} | {f"w{i}/n.md": f"Folder {i}.\n" for i in range(300)}
    write(root, files)
    return list(files)


@pytest.mark.skipif(not openat.OPEN_AT, reason="no descriptor-relative open here: read_all is read")
def test_deep_and_wide_trees_hold_few_descriptors_and_close_them_all(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    rels = deep_and_wide(root)
    store = Store(root)
    before = open_fds()
    most = 0
    for _rel, found in store.read_all(rels):
        assert found is not None
        most = max(most, open_fds() - before)
    assert most <= openat.FOLDERS_KEPT + 2  # the kept folders, the vault's, and none piling up
    assert open_fds() == before
    reads = store.read_all(rels)  # abandoned half way: closing it closes its folders
    for _ in range(100):
        next(reads)
    assert open_fds() > before
    reads.close()
    assert open_fds() == before
    reads = store.read_all(rels)  # an error thrown in where it stopped: closed too
    next(reads)
    with pytest.raises(RuntimeError):
        reads.throw(RuntimeError("the consumer failed"))
    assert open_fds() == before


@pytest.mark.skipif(not openat.OPEN_AT, reason="no descriptor-relative open here: read_all is read")
def test_a_process_short_of_descriptors_still_reads_every_file(tmp_path: Path) -> None:
    """A server near its descriptor limit: the folders read_all keeps open must not cost
    the rebuild files that ``read`` alone would read."""
    root = tmp_path / "vault"
    rels = [f"w{i}/n.md" for i in range(100)]
    write(root, {rel: f"File {rel}.\n" for rel in rels})
    store = Store(root)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (open_fds() + 12, hard))
    try:
        found = dict(store.read_all(rels))
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert [rel for rel in rels if found[rel] is None] == []
    assert found["w99/n.md"] is not None and found["w99/n.md"][0] == b"File w99/n.md.\n"


def a_vault(root: Path) -> Vault:
    write(root, {f"2026/01/{day:02d}/n{day}.md": f"Note {day} about the kettle.\n" for day in range(1, 21)})
    vault = Vault(root)
    vault.reindex()
    return vault


def rows(vault: Vault) -> list[tuple[str, str]]:
    return [(row["path"], row["body"]) for row in vault.index.query("SELECT path, body FROM memories ORDER BY path")]


def fts_settings(vault: Vault) -> tuple[int, int]:
    """The bytes of postings the full-text index buffers before writing them and its
    automerge, as its file says (FTS5's defaults when unset)."""
    found = dict(vault.index.query("SELECT k, v FROM fts_config WHERE k IN ('hashsize', 'automerge')"))
    return int(found.get("hashsize", FTS_HASH)), int(found.get("automerge", FTS_AUTOMERGE))


@pytest.mark.parametrize("out_of_order", [False, True])
def test_a_rebuild_in_many_batches_equals_the_index_its_writes_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, out_of_order: bool) -> None:
    """A rebuild loads its rows a batch at a time and each memory's names sorted once at
    the end: names written in any case, twice in one note, shared by two notes, in
    decomposed Unicode (as macOS writes them), over several batches, give the same rows,
    the same count and the same exact-name lookups as the index the writes kept. Rows
    come oldest first: a person's note last changed on 5 January goes in among the dated
    ones, out of path order, and the indexes led by the path are then built after."""
    load = Index.replace_all
    monkeypatch.setattr(Index, "replace_all", lambda self, conn, notes: load(self, conn, notes, batch=3))
    root = tmp_path / "vault"
    write(root, {"2026/01/01/first.md": "The first note.\n"})
    with Vault(root) as vault:
        vault.reindex()
        write(root, {
            "people/Ada Lovelace.md": "---\ntitle: ada lovelace\naliases: [Ada, ADA, The Countess]\n---\nWrote the first program.\n",
            "people/Countess.md": "---\naliases: [the countess, Ada]\n---\nAnother countess.\n",
            "people/Zoe\u0301.md": "---\naliases: [Zo\u00e9]\n---\nA name in decomposed Unicode.\n",
            **{f"2026/01/{day:02d}/n{day}.md": f"---\nid: 01kmc9da50dq8v{day:02d}\ntitle: Note {day % 3}\ntype: {'task' if day % 2 else 'fact'}\n"
               f"importance: {day % 4}\nexpires: 2099-0{day % 3 + 1}-01T00:00:00Z\n---\nNote {day} about the kettle.\n"
               for day in range(2, 10)},
            "2026/01/10/broken.md": "---\ncreated: Monday\n---\nA date that is none.\n",
        })
        if out_of_order:
            write(root, {"people/Mid.md": "A person's note, last changed on 5 January.\n"})
            stamp = dt.datetime(2026, 1, 5, 12, tzinfo=dt.timezone.utc).timestamp()
            os.utime(root / "people/Mid.md", (stamp, stamp))
        assert vault.reconcile()["added"] == 12 + out_of_order  # into the index row by row, as writes go in

        def named(key: str) -> list[str]:
            return [row[0] for row in vault.index.query(
                "SELECT m.path FROM names n JOIN memories m ON m.rid = n.rid WHERE n.key = ? ORDER BY 1", (key,))]

        keys = ("ada", "ada lovelace", "the countess", "zo\u00e9", "note 1", "first")
        before = {key: named(key) for key in keys}
        assert before["ada"] == ["people/Ada Lovelace.md", "people/Countess.md"] and len(before["note 1"]) == 2
        assert before["zo\u00e9"] == ["people/Zoe\u0301.md"]
        assert_index_matches_files(vault)  # against a rebuild in five batches
        counted = ("total", "types", "average_importance", "with_ttl", "parse_problems", "newest")
        stats = {key: vault.stats()[key] for key in counted}  # type: ignore[literal-required]
        assert stats["total"] == 13 + out_of_order and stats["types"] == {"task": 4, "fact": 4} and stats["with_ttl"] == 8
        vault.reindex()
        assert {key: named(key) for key in keys} == before
        assert {key: vault.stats()[key] for key in counted} == stats  # type: ignore[literal-required]
        # Every index there, as the schema writes it, and holding what its table holds.
        assert vault.index.query("PRAGMA integrity_check")[0][0] == "ok"
        assert sorted(row[0] for row in vault.index.query(
            "SELECT sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")) == sorted(
            st.strip().rstrip(";") for st in index_statements(SCHEMA))


def test_a_rebuild_failing_half_way_restores_the_cache_and_leaves_the_index_usable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with a_vault(tmp_path / "vault") as vault:
        before, cache = rows(vault), vault.index.conn.execute("PRAGMA cache_size").fetchone()[0]
        assert cache != -LOAD_CACHE_KIB
        write(vault.root, {"2026/02/01/new.md": "A new note about the printer.\n"})
        real, parsed = FileIndexer.note_for, []

        def note_for(self: FileIndexer, rel: str, data: bytes, stat: os.stat_result):  # type: ignore[no-untyped-def]
            parsed.append(rel)
            if len(parsed) == 10:
                raise RuntimeError("the process fails half way")
            return real(self, rel, data, stat)

        monkeypatch.setattr(FileIndexer, "note_for", note_for)
        fds = open_fds()
        with pytest.raises(RuntimeError, match="half way") as failed:
            vault.reindex()
        assert open_fds() == fds  # the reads' folders closed, though the error (and its frames) is held
        assert failed.value.__traceback__ is not None
        assert vault.index.conn.execute("PRAGMA cache_size").fetchone()[0] == cache
        assert fts_settings(vault) == (FTS_HASH, FTS_AUTOMERGE)  # the load's own undone with it
        assert rows(vault) == before and vault.search("kettle", limit=50)["count"] == 20
        monkeypatch.setattr(FileIndexer, "note_for", real)
        vault.reindex()
        assert vault.search("printer")["count"] == 1 and len(rows(vault)) == 21
        assert fts_settings(vault) == (FTS_HASH, FTS_AUTOMERGE)


def test_a_rebuild_meeting_a_full_disk_restores_the_cache_and_leaves_the_index_usable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite's own "database or disk is full" (the file may grow no more pages) while
    the rows load, in batches of five so the reads are half done when it fails."""
    load = Index.replace_all
    monkeypatch.setattr(Index, "replace_all", lambda self, conn, notes: load(self, conn, notes, batch=5))
    with a_vault(tmp_path / "vault") as vault:
        before, conn = rows(vault), vault.index.conn
        cache = conn.execute("PRAGMA cache_size").fetchone()[0]
        write(vault.root, {f"2026/03/{day:02d}/big{day}.md": f"Big note {day}. " + "printer words " * 3000
                           for day in range(1, 29)})
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")
        fds, collecting = open_fds(), gc.isenabled()
        try:
            with pytest.raises(VaultError, match="disk is full") as failed:
                vault.reindex()
            assert open_fds() == fds  # the reads' folders closed, though the error (and its frames) is held
        finally:
            conn.execute("PRAGMA max_page_count = 4294967294")
        assert "database or disk is full" in str(failed.value)
        assert conn.execute("PRAGMA cache_size").fetchone()[0] == cache
        assert fts_settings(vault) == (FTS_HASH, FTS_AUTOMERGE)
        # The cycle collector the load paused runs again: a server that failed a
        # rebuild must not go on without it.
        assert gc.isenabled() == collecting
        assert rows(vault) == before and vault.search("kettle", limit=50)["count"] == 20
        vault.reindex()
        assert vault.search("printer", limit=50)["count"] == 28 and len(rows(vault)) == 48
        assert gc.isenabled() == collecting


def test_planted_long_keys_are_read_right_and_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """The key cache is keyed by a key's text as written: a file's 256 keys of 40,000
    characters each are indexed as before (none: too long) and not kept in memory, and
    no key cached from one file changes how another file's key reads."""
    monkeypatch.setattr(properties, "_KEYS", {})
    planted = {f"{i:03d}" + "k" * 40_000: "v" for i in range(256)}
    assert properties.properties(planted, []) == ([], [])
    odd = {"Ｔｉｔｌｅ": "a", "  Title  ": "b", "TITLE": "c", "ti\u0301tle": "d", " " * 300 + "status" + " " * 300: "e",
           "ǅ": "f", "Straße": "g", "strasse": "h"}
    first = properties.properties(odd, [])
    assert properties.properties(odd, []) == first  # the second reading, from the cache, is the same
    assert first[0] == list(dict.fromkeys(properties.prop_key(key) for key in odd))
    assert max(len(key) for key in properties._KEYS) <= properties.MAX_KEY_CHARS
    assert "status" in first[0]  # a short key padded long is still read, just not kept


def test_a_file_holding_more_than_its_stat_said_is_bounded_like_one_over_the_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file grown between its stat and its read (still being written), or one whose stat
    says less than it holds (a FUSE or /proc-like file): neither read nor read_all reads
    past the limit; both give None, as for a file over it."""
    root = tmp_path / "vault"
    write(root, {"a/grown.md": "grown " * 50_000, "a/small.md": "Small.\n", "top.md": "x" * 4096})
    real = os.fstat

    def understated(fd: int) -> os.stat_result:  # the stat taken before the file grew
        found = real(fd)
        if not stat_kind.S_ISREG(found.st_mode) or found.st_size < 4096:
            return found
        times = ("st_atime", "st_mtime", "st_ctime", "st_atime_ns", "st_mtime_ns", "st_ctime_ns")
        return os.stat_result((*tuple(found)[:6], 10, *tuple(found)[7:10]),
                              {name: getattr(found, name) for name in times})

    monkeypatch.setattr(os, "fstat", understated)
    store = Store(root)
    rels = ["a/grown.md", "a/small.md", "top.md"]
    together = {rel: what(found) for rel, found in store.read_all(rels, 100_000)}
    assert together == {rel: what(store.read(rel, 100_000)) for rel in rels}
    assert {rel: found and found[0] for rel, found in together.items()} \
        == {"a/grown.md": None, "a/small.md": b"Small.\n", "top.md": b"x" * 4096}


def test_a_planted_index_file_does_not_set_the_page_cache(tmp_path: Path) -> None:
    """An index file's header can suggest a page cache (``default_cache_size``): one
    synced or planted under ``.index/`` suggesting two billion pages sets neither the
    writing nor a reading connection's, before or after a rebuild."""
    with a_vault(tmp_path / "vault") as vault:
        path = vault.index.path
    planted = sqlite3.connect(path)
    planted.execute("PRAGMA default_cache_size = 2000000000")
    planted.commit()
    planted.close()
    with Vault(tmp_path / "vault") as vault:
        def caches() -> tuple[int, int]:
            return (vault.index.conn.execute("PRAGMA cache_size").fetchone()[0],
                    vault.index.query("PRAGMA cache_size")[0][0])

        assert caches() == (CACHE_KIB, CACHE_KIB)
        vault.reindex()
        assert caches() == (CACHE_KIB, CACHE_KIB) and vault.search("kettle", limit=50)["count"] == 20
