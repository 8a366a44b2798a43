"""Reading a rebuild's every file (``Store.read_all``): the same answer as ``Store.read``
for each path, and confined the same way: no symlink followed out of the vault, whether
it was there before or is planted while the files are being read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_memory.disk.store import Store
from agent_memory.index.reconcile import FileIndexer
from agent_memory.vault.vault import Vault

SECRET = b"The launch code is 0000, kept outside the vault.\n"


def outside_folder(tmp_path: Path) -> Path:
    """A folder beside the vault with files of the names the vault's files have."""
    secret = tmp_path / "secret"
    secret.mkdir()
    for name in ("x.md", "y.md", "z.md", "b.md"):
        (secret / name).write_bytes(SECRET)
    return secret


def what(found: tuple[bytes, os.stat_result] | None) -> tuple[bytes, int] | None:
    return None if found is None else (found[0], found[1].st_ino)


def test_reading_many_gives_what_reading_each_gives(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    for rel, text in {"top.md": "At the top.\n", "a/x.md": "In a.\n", "a/deep/y.md": "Deeper.\n",
                      "big.md": "x" * 5000, ".hidden/h.md": "Hidden.\n", "b/z.md": "In b.\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    secret = outside_folder(tmp_path)
    (root / "link-in.md").symlink_to(root / "a" / "x.md")  # a second name inside the vault: read
    (root / "link-out.md").symlink_to(secret / "x.md")
    (root / "a" / "out").symlink_to(secret, target_is_directory=True)
    (root / "a" / "in").symlink_to(root / "b", target_is_directory=True)
    (root / "loop.md").symlink_to(root / "loop.md")
    os.mkfifo(root / "pipe.md")
    rels = ["top.md", "a/x.md", "a/deep/y.md", "big.md", ".hidden/h.md", "link-in.md", "link-out.md",
            "a/out/x.md", "a/in/z.md", "loop.md", "pipe.md", "gone.md", "a/gone/x.md", "b/z.md", "a//x.md"]
    store = Store(root)
    together = [(rel, what(found)) for rel, found in store.read_all(rels, max_bytes=4096)]
    one_by_one = [(rel, what(store.read(rel, 4096))) for rel in rels]
    assert together == one_by_one
    read = dict(together)
    assert read["top.md"] is not None and read["a/deep/y.md"] is not None and read["link-in.md"] is not None
    assert read["big.md"] is None and read["pipe.md"] is None  # over the bound; not a regular file
    assert all(found is None or found[0] != SECRET for found in read.values())


@pytest.mark.parametrize("planted", ["folder", "opened folder", "file"])
def test_a_link_planted_while_the_files_are_read_is_not_followed(tmp_path: Path, planted: str) -> None:
    root = tmp_path / "vault"
    for rel in ("a/x.md", "a/z.md", "b/y.md"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"The file {rel} as written.\n")
    secret = outside_folder(tmp_path)
    reads = Store(root).read_all(["a/x.md", "a/z.md", "b/y.md"])
    first = next(reads)
    assert first[1] is not None and first[1][0] == b"The file a/x.md as written.\n"
    if planted == "folder":  # a folder not opened yet becomes a link out of the vault
        (root / "b").rename(root / "b-moved")
        (root / "b").symlink_to(secret, target_is_directory=True)
    elif planted == "opened folder":  # the folder being read becomes one
        (root / "a").rename(root / "a-moved")
        (root / "a").symlink_to(secret, target_is_directory=True)
    else:  # a file about to be read becomes a link to a file outside
        (root / "a" / "z.md").unlink()
        (root / "a" / "z.md").symlink_to(secret / "z.md")
    rest = list(reads)
    assert [rel for rel, _found in rest] == ["a/z.md", "b/y.md"]
    assert all(found is None or found[0] != SECRET for _rel, found in rest)
    if planted == "file":
        assert dict(rest)["a/z.md"] is None


def test_a_rebuild_follows_no_link_planted_while_it_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between the rebuild's walk and its reads a dated folder is swapped for a link out
    of the vault and a file for a link to a file outside: the index holds neither."""
    root = tmp_path / "vault"
    days = {"2026/01/01/a.md": "Alpha note about the kettle.\n", "2026/01/01/x.md": "The x note about tea.\n",
            "2026/01/02/b.md": "Bravo note about the printer.\n"}
    for rel, text in days.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    secret = outside_folder(tmp_path)
    Vault(root).close()
    real = FileIndexer.note_for
    planted: list[str] = []

    def note_for(self: FileIndexer, rel: str, data: bytes, stat: os.stat_result):  # type: ignore[no-untyped-def]
        if not planted:  # after the first file is read, before the others are
            planted.append(rel)
            (root / "2026/01/02").rename(root / "2026/01/02-moved")
            (root / "2026/01/02").symlink_to(secret, target_is_directory=True)
            (root / "2026/01/01/x.md").unlink()
            (root / "2026/01/01/x.md").symlink_to(secret / "x.md")
        return real(self, rel, data, stat)

    monkeypatch.setattr(FileIndexer, "note_for", note_for)
    with Vault(root) as vault:
        vault.reindex()
        assert planted == ["2026/01/01/a.md"]
        assert vault.search("launch code")["count"] == 0
        indexed = {row["path"]: row["body"] for row in vault.index.query("SELECT path, body FROM memories")}
        assert "2026/01/01/a.md" in indexed
        assert not any("launch code" in body for body in indexed.values())
