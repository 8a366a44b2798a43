"""A batch import's promises where its work is done once for the whole batch: dedup asked
of the index in one go, staged files written under their own names, published from what
this process staged. All or nothing on a full disk at any item; a rerun then imports
everything once; a file planted where a new one goes is never written through."""

from __future__ import annotations

import errno
import gc
import os
from pathlib import Path

import pytest

from agent_memory.disk import locking
from agent_memory.disk import store as store_module
from agent_memory.disk.staging import NotPublished
from agent_memory.errors import SecretRefused, VaultError
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, symlink_swapped_before_publish

N = 40


def _items(n: int = N, namespace: str = "imports") -> list[dict]:
    return [{"content": f"Imported fact {i} about the billing queue", "namespace": namespace,
             "created": f"2025-03-{1 + i % 3:02d}T10:00:00Z"} for i in range(n)]


def _memory_files(root: Path) -> list[str]:
    found = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found += [os.path.relpath(Path(folder) / name, root) for name in names if name.endswith(".md")]
    return sorted(found)


def test_dedup_of_a_batch_against_the_vault_is_what_one_lookup_an_item_gives(vault: Vault, clock) -> None:
    """Same content in the same namespace is skipped (live in the vault, or earlier in the
    batch); in another namespace, or held only by an expired memory, it is imported; an
    id a live memory has is a duplicate."""
    held = vault.remember("Imported fact 3 about the billing queue", namespace="imports")["memory"]
    vault.remember("Imported fact 4 about the billing queue", namespace="elsewhere")
    vault.remember("Imported fact 5 about the billing queue", namespace="imports", ttl_days=1)
    clock.advance(days=2)  # expired, not yet swept
    items = _items(8) + [{"content": "Imported fact 6 about the billing queue", "namespace": "imports"},
                         {"content": "A new text under a live memory's id", "id": held["id"]}]
    result = vault.import_memories(items)
    assert result["duplicates"] == 3  # fact 3 (in the vault), fact 6 (earlier in the batch), the live id
    assert result["imported"] == 7
    contents = sorted(vault.get(p)["content"] for p in result["paths"])
    assert [c.split(" about")[0] for c in contents] == [f"Imported fact {i}" for i in (0, 1, 2, 4, 5, 6, 7)]
    # (4: another namespace's twin does not count; 5: an expired twin does not; 6: the first of two)
    again = vault.import_memories(items)
    assert (again["imported"], again["duplicates"]) == (0, len(items))
    assert_index_matches_files(vault)


@pytest.mark.parametrize("at", [1, N // 2, N])
def test_a_disk_full_while_staging_imports_nothing_and_a_rerun_imports_all_once(
        vault: Vault, monkeypatch: pytest.MonkeyPatch, at: int) -> None:
    staged: list[str] = []
    real = store_module.Store.write_temp

    def filling(self, folder, data, *args, **kwargs):  # type: ignore[no-untyped-def]
        if kwargs.get("name", "").endswith(".md"):
            staged.append(kwargs["name"])
            if len(staged) == at:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, folder, data, *args, **kwargs)

    monkeypatch.setattr(store_module.Store, "write_temp", filling)
    with pytest.raises(VaultError, match="disk is full"):
        vault.import_memories(_items())
    monkeypatch.undo()
    assert _memory_files(vault.root) == [] and vault.stats()["total"] == 0
    assert not (vault.root / ".index" / "import").exists()
    result = vault.import_memories(_items())
    assert (result["imported"], result["duplicates"]) == (N, 0)
    assert len(_memory_files(vault.root)) == N
    assert_index_matches_files(vault)


@pytest.mark.parametrize("at", [1, N // 2, N])
def test_a_disk_full_while_publishing_takes_back_what_was_placed(
        vault: Vault, monkeypatch: pytest.MonkeyPatch, at: int) -> None:
    before = vault.remember("Already here before the import")["memory"]
    moved: list[str] = []
    real = locking.move_no_replace_at

    def filling(src_dir: int, src: str, dst_dir: int, dst: str) -> None:
        moved.append(dst)
        if len(moved) == at:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(src_dir, src, dst_dir, dst)

    monkeypatch.setattr(locking, "move_no_replace_at", filling)
    with pytest.raises(NotPublished, match="nothing was imported"):
        vault.import_memories(_items())
    monkeypatch.undo()
    assert _memory_files(vault.root) == [before["path"]]
    assert not (vault.root / ".index" / "import").exists()
    result = vault.import_memories(_items())
    assert (result["imported"], result["duplicates"]) == (N, 0)
    assert len(_memory_files(vault.root)) == N + 1
    assert_index_matches_files(vault)


def test_a_symlink_planted_where_a_new_file_goes_is_left_alone(vault: Vault, tmp_path: Path) -> None:
    """The name is taken: the import's file gets the next free one, the link and the file
    it points to stay as they were."""
    outside = tmp_path / "outside.md"
    outside.write_text("Not the vault's\n")
    folder = vault.root / "2025/03/02"
    folder.mkdir(parents=True)
    (folder / "imported-fact-1-about-the-billing-queue.md").symlink_to(outside)
    result = vault.import_memories(_items(3))
    assert result["imported"] == 3
    assert outside.read_text() == "Not the vault's\n"
    assert (folder / "imported-fact-1-about-the-billing-queue.md").is_symlink()
    placed = [p for p in result["paths"] if vault.get(p)["content"].startswith("Imported fact 1 ")]
    assert placed == ["2025/03/02/imported-fact-1-about-the-billing-queue-2.md"]
    assert not (vault.root / ".index" / "import").exists()


def test_a_staged_name_is_never_written_through_a_link(vault: Vault, tmp_path: Path) -> None:
    """An import's staged file is created under its own name, never over or through
    whatever is there (the staging folder is the import's own, so nothing should be)."""
    files = tmp_path / "staging"
    files.mkdir()
    target = tmp_path / "target.md"
    target.write_text("untouched\n")
    (files / "0.md").symlink_to(target)
    with pytest.raises(FileExistsError):
        vault.store.write_temp(files, b"staged bytes\n", name="0.md")
    assert target.read_text() == "untouched\n"
    written = vault.store.write_temp(files, b"staged bytes\n", name="1.md")
    assert written == files / "1.md" and written.read_bytes() == b"staged bytes\n"
    assert sorted(p.name for p in files.iterdir()) == ["0.md", "1.md"]  # no temp name left beside it


def test_a_folder_made_a_symlink_after_planning_gets_no_folder_made_through_it(
        vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Publishing makes a new day's folder only on a way with no symlink on it: a year
    folder swapped for a link elsewhere after the import was planned gets nothing made
    there, and the import is taken back whole."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (vault.root / "2025").mkdir()
    symlink_swapped_before_publish(monkeypatch, vault.root / "2025", outside)
    with pytest.raises(NotPublished, match="symlink"):
        vault.import_memories(_items(5))
    assert list(outside.iterdir()) == []
    assert _memory_files(vault.root) == [] and vault.stats()["total"] == 0


def test_a_folder_swapped_for_a_symlink_while_publishing_gets_no_file(
        vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file moved in after its folder was swapped for a link elsewhere lands in the
    folder that was checked (held open), never through the link."""
    outside = tmp_path / "outside"
    outside.mkdir()
    real = locking.move_no_replace_at
    swapped: list[Path] = []

    def swap_then_move(src_dir: int, src: str, dst_dir: int, dst: str) -> None:
        folder = vault.root / "2025/03/01"
        if not swapped and folder.is_dir():
            os.rename(folder, vault.root / "2025/03/moved-away")
            os.symlink(outside, folder, target_is_directory=True)
            swapped.append(folder)
        real(src_dir, src, dst_dir, dst)

    monkeypatch.setattr(locking, "move_no_replace_at", swap_then_move)
    vault.import_memories(_items(6))
    assert swapped and list(outside.iterdir()) == []
    assert len(list((vault.root / "2025/03/moved-away").iterdir())) == 2  # items 0 and 3, dated the 1st


def test_where_folders_cannot_be_held_open_publishing_goes_by_path(vault: Vault,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """(Windows has no names relative to an open folder: each file is placed by its path.)"""
    from agent_memory.disk import staging

    monkeypatch.setattr(staging, "_DIR_FDS", False)
    result = vault.import_memories(_items(6))
    assert result["imported"] == 6 and len(_memory_files(vault.root)) == 6
    assert not (vault.root / ".index" / "import").exists()
    assert_index_matches_files(vault)


@pytest.mark.parametrize("dir_fds", [True, False])
def test_a_staged_file_changed_before_publishing_is_not_published(vault: Vault, monkeypatch: pytest.MonkeyPatch,
                                                                   dir_fds: bool) -> None:
    """Publishing indexes the bytes it staged without reading them back: a staged file
    changed (or put in another's place) since is refused, and the import taken back."""
    from agent_memory.disk import staging

    monkeypatch.setattr(staging, "_DIR_FDS", dir_fds)
    publish = staging.Staging.publish

    def tampered_first(self: staging.Staging, *args, **kwargs):  # type: ignore[no-untyped-def]
        (self.files / "2.md").write_text("---\nid: planted\n---\nPlanted text\n")
        return publish(self, *args, **kwargs)

    monkeypatch.setattr(staging.Staging, "publish", tampered_first)
    with pytest.raises(NotPublished, match="changed after it was staged"):
        vault.import_memories(_items(5))
    monkeypatch.undo()
    assert _memory_files(vault.root) == [] and vault.stats()["total"] == 0
    assert not (vault.root / ".index" / "import").exists()
    assert vault.import_memories(_items(5))["imported"] == 5
    assert_index_matches_files(vault)


def test_an_export_item_at_the_vault_root_is_published_there(vault: Vault) -> None:
    result = vault.import_memories([{"path": "top.md", "front_matter": {"created": "2025-03-01T10:00:00Z"},
                                     "content": "A note at the top\n"},
                                    {"path": "top.md", "front_matter": {"created": "2025-03-01T10:00:00Z"},
                                     "content": "Another note, same name\n"}])
    assert sorted(result["paths"]) == ["top-2.md", "top.md"]
    assert (vault.root / "top.md").read_text().endswith("A note at the top\n")
    assert_index_matches_files(vault)


def test_the_cycle_collector_runs_again_after_an_import_that_succeeded_or_failed(
        vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    """An import pauses Python's cycle collector for its batch; the process hosting the
    library (a server) must get it back however the import ends."""
    assert gc.isenabled()
    assert vault.import_memories(_items())["imported"] == N
    assert gc.isenabled()
    with pytest.raises(SecretRefused):
        vault.import_memories([{"content": "A fact"}, {"content": "Bot token gh" + "p_" + "aB3cD4eF5gH6" * 3}])
    assert gc.isenabled()

    def full(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(locking, "move_no_replace_at", full)
    with pytest.raises(NotPublished):
        vault.import_memories(_items(namespace="other"))
    assert gc.isenabled()
    monkeypatch.undo()
    gc.disable()  # a host that runs with the collector off keeps it off
    try:
        vault.import_memories(_items(namespace="third"))
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert_index_matches_files(vault)
