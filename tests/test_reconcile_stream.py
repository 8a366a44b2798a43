"""The start-up reconcile as a streaming comparison: the walk and the index's stamps come
in the same path order and are compared as they come, so what it holds does not grow
with the vault. On real folders, with a real watchdog observer: what changed while
nothing watched is folded in, odd entries stay out, an edit made during the walk is not
lost, and the comparison never holds more than the folders on its way down."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_memory.disk.store import Store
from agent_memory.index.db import Index
from agent_memory.index.reconcile import FileIndexer
from agent_memory.vault.vault import Vault
from agent_memory.watch.watcher import Change, Watcher
from tests.conftest import assert_index_matches_files, wait_until

# Names whose paths sort differently by folder, by character and by byte: "a-b.md" <
# "a.md" < "a/…" < "a0.md" in SQLite's order, upper case before lower, accents last.
TRICKY = ["a-b.md", "a.md", "a/x.md", "a/y-z.md", "a/y/z.md", "a0.md", "Zeta.md", "zeta.md", "é/été.md",
          "日本/メモ.md", "with space/note.md", "2026/07/20/deploy.md", "2026/07/2/odd.md", "2026/07/20-x.md"]


def hand_note(body: str) -> str:
    return f"---\ntags: [scratch]\n---\n{body}\n"


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def hits(vault: Vault, query: str) -> list[str]:
    return sorted(h["path"] for h in vault.search(query, limit=100, match="all")["hits"])


def test_the_walk_comes_out_in_the_index_order(vault: Vault) -> None:
    """The comparison relies on both sides in one order: the walk's files in exactly the
    order SQLite gives the index's paths."""
    for rel in TRICKY:
        write(vault.root, rel, hand_note(f"note {rel}"))
    vault.reconcile()
    walked = [rel for rel, _stat in vault.store.walk()]
    indexed = [path for path, _stamp in vault.index.stamps(page=3)]  # pages of 3: every boundary crossed
    assert walked == indexed == [row[0] for row in vault.index.query("SELECT path FROM memories ORDER BY path")]
    assert sorted(walked) == sorted(TRICKY)


def test_nothing_changed_reads_no_file(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    """A start with nothing changed reads no file, with names that sort in tricky ways
    (were the two orders to disagree, the files out of place would be read again)."""
    for rel in TRICKY:
        write(vault.root, rel, hand_note(f"note {rel}"))
    vault.reconcile()
    examined: list[str] = []
    real = FileIndexer.examine

    def spy(self: FileIndexer, rel: str, *args: Any, **kwargs: Any) -> Any:
        examined.append(rel)
        return real(self, rel, *args, **kwargs)

    monkeypatch.setattr(FileIndexer, "examine", spy)
    report = vault.reconcile()
    assert examined == [] and report["unchanged"] == len(TRICKY)


def plant_odd_entries(root: Path, outside: Path) -> None:
    """What must stay out of the index however the walk goes: a symlink to a file outside
    the vault, one into .index/, notes in .index/, .trash/ and hidden folders, a pipe."""
    write(outside, "secret.md", hand_note("outside secret words"))
    (root / "elsewhere.md").symlink_to(outside / "secret.md")
    write(root, ".index/planted.md", hand_note("planted index words"))
    (root / "into-index.md").symlink_to(root / ".index" / "planted.md")
    write(root, ".trash/2026/07/20/old.md", hand_note("trashed words"))
    write(root, ".obsidian/workspace.md", hand_note("hidden folder words"))
    write(root, "people/.private/p.md", hand_note("hidden nested words"))
    (root / "linked-folder").symlink_to(outside, target_is_directory=True)
    os.mkfifo(root / "pipe.md")


def test_a_watcher_folds_in_what_changed_while_it_was_down(vault: Vault, watch: Callable[..., Watcher],
                                                           tmp_path: Path) -> None:
    """Added, edited, deleted and renamed while nothing watched (between a server's runs):
    the watcher's start-up sweep folds each in; odd entries planted meanwhile stay out."""
    root = vault.root
    for rel in TRICKY:
        write(root, rel, hand_note(f"note {rel.replace('/', ' ')}"))
    moved = vault.remember("The staging database lives in eu-west.", tags=["infra"])["memory"]
    vault.reconcile()
    # While down:
    write(root, "a/new.md", hand_note("freshly added walrus"))
    with open(root / "a.md", "a", encoding="utf-8") as handle:  # edited in place: same inode
        handle.write("appended narwhal\n")
    (root / "a0.md").unlink()
    (root / "with space" / "note.md").rename(root / "with space" / "renamed.md")  # within its folder
    (root / "infra").mkdir()
    (root / moved["path"]).rename(root / "infra" / "staging-db.md")  # to another folder
    plant_odd_entries(root, tmp_path / "outside")
    changes: list[Change] = []
    watch(on_change=changes.append)
    sweeps = [c for c in changes if c.action == "sweep"]
    assert sweeps == [Change("sweep", "", "3 added, 1 updated, 3 removed")]
    assert hits(vault, "walrus") == ["a/new.md"] and hits(vault, "narwhal") == ["a.md"]
    assert vault.index.by_path("a0.md") is None and vault.index.by_path("with space/note.md") is None
    assert vault.index.by_path("with space/renamed.md") is not None
    assert vault.get(moved["id"])["path"] == "infra/staging-db.md"
    for words in ("outside secret", "planted index", "trashed", "hidden folder", "hidden nested"):
        assert hits(vault, words) == [], words
    assert_index_matches_files(vault)


def test_an_edit_made_during_the_start_up_walk_is_not_lost(vault: Vault, watch: Callable[..., Watcher],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The watch is up before the sweep walks: a file saved after the walk compared it
    (so the sweep keeps the old row) and a file added to a folder the walk has passed
    both reach the index through their events."""
    root = vault.root
    for folder in ("f1", "f2", "f3"):
        for i in range(5):
            write(root, f"{folder}/n{i}.md", hand_note(f"{folder} note {i}"))
    vault.reconcile()
    real = Store.walk
    done = []

    def walk_and_edit(self: Store, *args: Any, **kwargs: Any) -> Iterator[Any]:
        for rel, found in real(self, *args, **kwargs):
            yield rel, found
            if rel == "f3/n0.md" and not done:  # f1/ and f2/ are compared already
                done.append(rel)
                with open(root / "f1" / "n1.md", "a", encoding="utf-8") as handle:
                    handle.write("saved mid walk pangolin\n")
                write(root, "f2/late.md", hand_note("added mid walk okapi"))

    monkeypatch.setattr(Store, "walk", walk_and_edit)
    watch()
    assert done, "the sweep walked past f3/n0.md"
    wait_until(lambda: hits(vault, "pangolin") == ["f1/n1.md"] and hits(vault, "okapi") == ["f2/late.md"],
               "both changes made during the walk reach the index")
    assert_index_matches_files(vault)


def test_the_comparison_holds_one_folder_at_a_time(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reconcile a vault of 6 folders of 40 files, one file edited in each: the two
    streams are consumed in step (neither side is read ahead into a table), the index
    side a page at a time, and the walk never holds more than the entries of the folders
    on its way down: none of it grows with the number of files."""
    root, folders, per_folder = vault.root, 6, 40
    for f in range(folders):
        for i in range(per_folder):
            write(root, f"folder{f}/note{i:02}.md", hand_note(f"folder {f} note {i}"))
    vault.reconcile()
    for f in range(folders):
        with open(root / f"folder{f}" / "note07.md", "a", encoding="utf-8") as handle:
            handle.write("edited by hand\n")

    pulled = {"walk": 0, "index": 0}
    lead: list[int] = []  # how far one side has been read ahead of the other, at each item
    real_walk, real_stamps = Store.walk, Index.stamps

    def counted(side: str, items: Iterator[Any]) -> Iterator[Any]:
        for item in items:
            pulled[side] += 1
            lead.append(abs(pulled["walk"] - pulled["index"]))
            yield item

    def stamps(self: Index, page: int = 0) -> Iterator[Any]:
        return counted("index", real_stamps(self, page=7))  # small pages: many boundaries

    monkeypatch.setattr(Store, "walk", lambda self, *a, **k: counted("walk", real_walk(self, *a, **k)))
    monkeypatch.setattr(Index, "stamps", stamps)
    report = vault.reconcile()
    assert (report["updated"], report["unchanged"]) == (folders, folders * per_folder - folders)
    assert pulled == {"walk": folders * per_folder, "index": folders * per_folder}
    assert max(lead) <= 1  # in step: nothing changed but in place, so the sides never drift apart
    top_level = len(os.listdir(root))
    assert vault.store.most_held <= per_folder + top_level < folders * per_folder
    assert_index_matches_files(vault)
