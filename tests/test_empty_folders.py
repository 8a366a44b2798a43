"""A memory that leaves its day (forgotten, expired, moved, restored from the trash)
leaves no empty ``YYYY/MM/DD`` folders behind in the file tree a person browses; a day
that still holds anything, and a person's own folders, stay."""

from __future__ import annotations

from pathlib import Path

from agent_memory.disk import openat
from agent_memory.vault.vault import Vault

from conftest import Clock, cli_ok


def _folders(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_dir()
            and not p.relative_to(root).as_posix().startswith(".index")}


def test_forget_removes_the_empty_day_month_and_year(vault: Vault) -> None:
    memory = vault.remember("The deploy window is Friday afternoon.")["memory"]
    assert {"2026", "2026/07", "2026/07/20"} <= _folders(vault.root)
    vault.forget(memory["id"])
    assert not (vault.root / "2026").exists()
    assert (vault.root / ".trash" / "2026" / "07" / "20").is_dir()  # the trash keeps its copy's day


def test_forget_keeps_a_day_that_still_holds_a_memory_or_a_persons_file(vault: Vault, clock: Clock) -> None:
    first = vault.remember("First memory of the day.")["memory"]
    second = vault.remember("Second memory of the day.")["memory"]
    clock.advance(days=1)
    third = vault.remember("Tomorrow's memory.")["memory"]
    (vault.root / "2026" / "07" / "21" / "scratch.txt").write_text("a person's file, not a memory\n")
    vault.forget(first["id"])
    assert (vault.root / second["path"]).is_file()
    vault.forget(third["id"])
    assert (vault.root / "2026" / "07" / "21" / "scratch.txt").read_text() == "a person's file, not a memory\n"
    vault.forget(second["id"])
    assert not (vault.root / "2026" / "07" / "20").exists()
    assert (vault.root / "2026" / "07" / "21").is_dir()


def test_a_persons_empty_folder_stays(vault: Vault) -> None:
    (vault.root / "projects" / "later").mkdir(parents=True)
    (vault.root / "projects" / "acme.md").write_text("ACME wants Friday deploys.\n")
    vault.reconcile()
    vault.forget("projects/acme.md")
    assert (vault.root / "projects" / "later").is_dir()
    assert (vault.root / "projects").is_dir()


def test_mv_out_of_a_day_leaves_no_empty_folders(vault: Vault) -> None:
    memory = vault.remember("Priya leads support for ACME.")["memory"]
    vault.move(memory["id"], "people/priya.md")
    assert (vault.root / "people" / "priya.md").is_file()
    assert not (vault.root / "2026").exists()


def test_expired_memory_swept_leaves_no_empty_folders(vault: Vault, clock: Clock) -> None:
    vault.remember("A promo code valid for a day.", ttl_days=1)
    clock.advance(days=2)
    assert vault.sweep_expired() == 1
    assert not (vault.root / "2026").exists()


def test_restore_removes_the_empty_day_in_the_trash(vault: Vault) -> None:
    memory = vault.remember("Restore me tomorrow.")["memory"]
    vault.forget(memory["id"])
    vault.restore(memory["id"])
    assert (vault.root / memory["path"]).is_file()
    assert not (vault.root / ".trash" / "2026").exists()


def test_cli_forget_leaves_the_vault_tree_tidy(tmp_path: Path) -> None:
    cli_ok("init", cwd=tmp_path)
    memory_id = cli_ok("add", "Customer ACME prefers deploys on Fridays", cwd=tmp_path).strip()
    cli_ok("forget", memory_id, cwd=tmp_path)
    assert [p.name for p in (tmp_path / ".memory").iterdir() if not p.name.startswith(".")] == []


def test_a_date_folder_that_is_a_link_is_not_followed(tmp_path: Path) -> None:
    root, elsewhere = tmp_path / "vault", tmp_path / "elsewhere"
    (elsewhere / "07" / "20").mkdir(parents=True)
    (root / "2026").mkdir(parents=True)
    (root / "2026" / "07").symlink_to(elsewhere / "07")
    openat.remove_empty_dated(root, "2026/07/20/gone.md")
    assert (elsewhere / "07" / "20").is_dir()  # outside the vault: untouched
    assert (root / "2026" / "07").is_symlink()


def test_only_date_folders_at_the_top_are_looked_at(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    for folder in ("notes/2026/07/20", "2026/07/20/deeper", "2026/7/20"):
        (root / folder).mkdir(parents=True)
    openat.remove_empty_dated(root, "notes/2026/07/20/x.md")
    openat.remove_empty_dated(root, "2026/07/20/deeper/x.md")
    openat.remove_empty_dated(root, "2026/7/20/x.md")
    assert {"notes/2026/07/20", "2026/07/20/deeper", "2026/7/20"} <= _folders(root)


def test_a_trash_folder_that_is_a_link_is_not_followed(tmp_path: Path) -> None:
    root, elsewhere = tmp_path / "vault", tmp_path / "elsewhere"
    (elsewhere / "2026" / "07" / "20").mkdir(parents=True)
    root.mkdir()
    (root / ".trash").symlink_to(elsewhere)
    openat.remove_empty_dated(root, ".trash/2026/07/20/gone.md", (".trash",))
    assert (elsewhere / "2026" / "07" / "20").is_dir()
    (root / ".trash").unlink()
    (root / ".trash" / "2026" / "07" / "20").mkdir(parents=True)
    openat.remove_empty_dated(root, ".trash/2026/07/20/gone.md", (".trash",))
    assert (root / ".trash").is_dir() and not (root / ".trash" / "2026").exists()


def test_a_memories_folder_keeps_no_empty_days_and_stays_itself(tmp_path: Path, clock: Clock) -> None:
    """With ``memories.folder`` set (as ``init`` suggests in an Obsidian vault), new
    memories go to ``Agent/YYYY/MM/DD``: forgetting, moving or restoring one left its
    empty day, month and year behind there. They go now; ``Agent`` itself stays."""
    with Vault.init(tmp_path / "vault", memories_folder="Agent", clock=clock) as vault:
        first = vault.remember("The deploy window is Friday afternoon.")["memory"]
        second = vault.remember("Priya leads support for ACME.")["memory"]
        assert first["path"].startswith("Agent/2026/07/20/")
        vault.forget(first["id"])
        vault.move(second["id"], "people/priya.md")
        assert not (vault.root / "Agent" / "2026").exists()
        assert (vault.root / "Agent").is_dir()
        vault.restore(first["id"])
        assert (vault.root / first["path"]).is_file()
        assert not (vault.root / ".trash" / "Agent" / "2026").exists()


def test_a_persons_year_folder_holding_their_notes_stays(vault: Vault) -> None:
    """The tool writes memories only in ``YYYY/MM/DD``: a person's own ``2024/`` (or
    ``2024/12/``) holding their notes directly was removed once its last note was
    forgotten, as if it were a day the tool had made."""
    (vault.root / "2024" / "12").mkdir(parents=True)
    (vault.root / "2024" / "review.md").write_text("What went well in 2024.\n")
    (vault.root / "2024" / "12" / "december.md").write_text("December's notes.\n")
    vault.reconcile()
    vault.forget("2024/12/december.md")
    assert (vault.root / "2024" / "12").is_dir()
    vault.forget("2024/review.md")
    assert (vault.root / "2024").is_dir()


def test_gc_removes_the_trash_days_it_empties_and_keeps_a_persons_file(vault: Vault, clock: Clock) -> None:
    first = vault.remember("Forgotten and purged.")["memory"]
    vault.forget(first["id"])
    clock.advance(days=1)
    second = vault.remember("Forgotten a day later.")["memory"]
    vault.forget(second["id"])
    (vault.root / ".trash" / "2026" / "07" / "21" / "deleted in Obsidian.md").write_text("a person's note\n")
    clock.advance(days=40)
    assert len(vault.gc()["removed"]) == 2
    assert not (vault.root / ".trash" / "2026" / "07" / "20").exists()
    assert (vault.root / ".trash" / "2026" / "07" / "21" / "deleted in Obsidian.md").is_file()
