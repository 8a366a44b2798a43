"""``move`` (CLI ``agent-memory mv``, MCP ``move_memory``): a note renamed or moved with
every wikilink to it rewritten in place, through the safe write, all or nothing even
when a person saves meanwhile or the process dies half way."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agent_memory.disk import locking
from agent_memory.vault import moves as moves_module
from agent_memory.errors import InvalidInput, SavedMeanwhile, VaultError
from agent_memory.vault.moves import MOVE_DIRNAME
from agent_memory.disk.store import Store
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, cli_ok, mcp_client, person_saves_before_the_swap, run_cli, tool_error, tool_ok, deadline


def dies_mid_move(script: str, root: Path) -> None:
    """Run ``script`` (a move whose process ends itself with ``os._exit(3)`` at the
    point under test) on the vault at ``root``, and check that it died there."""
    done = subprocess.run([sys.executable, "-c", script, str(root)], capture_output=True, text=True,
                          timeout=deadline(120))
    assert done.returncode == 3, done.stderr

HUB = (
    "---\nrelated_to: [\"[[Kessel Run]]\"]\nowner: me  # a comment\n---\n"
    "See [[Kessel Run|the run]], [[kessel run#Route]], ![[Kessel Run]] and [[Kessel Run.md]].\n"
    "| a | [[Kessel Run\\|run]] |\n"
    "Code stays: `[[Kessel Run]]`\n"
    "Other: [[Tatooine]]\n"
)
HUB_AFTER = (
    "---\nrelated_to: [\"[[Smuggling Route]]\"]\nowner: me  # a comment\n---\n"
    "See [[Smuggling Route|the run]], [[Smuggling Route#Route]], ![[Smuggling Route]] and [[Smuggling Route.md]].\n"
    "| a | [[Smuggling Route\\|run]] |\n"
    "Code stays: `[[Kessel Run]]`\n"
    "Other: [[Tatooine]]\n"
)


def _files(vault: Vault) -> dict[str, bytes]:
    return {rel: (vault.root / rel).read_bytes() for rel, _ in Store(vault.root).walk()}


@pytest.fixture
def linked(vault: Vault) -> Vault:
    (vault.root / "places").mkdir()
    (vault.root / "places" / "Kessel Run.md").write_text("Body of the spaceport note.\n## Route\nless than 12 parsecs\n")
    (vault.root / "places" / "Tatooine.md").write_text("Sand. Back to [[Kessel Run]].\n")
    (vault.root / "hub.md").write_text(HUB)
    vault.reconcile()
    return vault


def test_mv_rewrites_every_link_keeping_aliases_headings_and_embeds(linked: Vault) -> None:
    vault = linked
    before = os.stat(vault.root / "places" / "Kessel Run.md")
    result = vault.move("places/Kessel Run.md", "places/Smuggling Route.md")
    assert (result["old_path"], result["new_path"]) == ("places/Kessel Run.md", "places/Smuggling Route.md")
    assert (result["old_id"], result["new_id"]) == ("places/Kessel Run.md", "places/Smuggling Route.md")
    assert sorted((r["path"], r["links"]) for r in result["rewritten"]) == [("hub.md", 6), ("places/Tatooine.md", 1)]
    assert not (vault.root / "places" / "Kessel Run.md").exists()
    moved = vault.root / "places" / "Smuggling Route.md"
    assert moved.read_text() == "Body of the spaceport note.\n## Route\nless than 12 parsecs\n"
    assert os.stat(moved).st_mtime_ns == before.st_mtime_ns  # a hand-made note keeps its date
    assert (vault.root / "hub.md").read_text() == HUB_AFTER
    assert (vault.root / "places" / "Tatooine.md").read_text() == "Sand. Back to [[Smuggling Route]].\n"
    backlinks = vault.related("places/Smuggling Route.md", direction="in")
    assert sorted(n["path"] for n in backlinks["nodes"][1:]) == ["hub.md", "places/Tatooine.md"]
    assert not (vault.root / ".index" / MOVE_DIRNAME).exists()
    assert_index_matches_files(vault)


def test_a_new_note_with_the_old_name_does_not_pick_up_the_old_links(linked: Vault) -> None:
    vault = linked
    vault.move("places/Kessel Run.md", "places/Smuggling Route.md")
    (vault.root / "Kessel Run.md").write_text("A different note.\n")
    vault.reconcile()
    assert vault.related("Kessel Run.md", direction="in")["count"] == 0


def test_a_memory_keeps_its_id_and_a_link_made_by_link_memories_follows(vault: Vault) -> None:
    a = vault.remember("ACME prefers Friday deploys")["memory"]
    b = vault.remember("ACME billing runs on Stripe", title="acme billing")["memory"]
    vault.link(a["id"], b["id"])
    result = vault.move(b["id"], "billing/")
    assert result["old_id"] == result["new_id"] == b["id"]
    assert result["new_path"] == "billing/acme-billing.md"
    assert 'related_to: ["[[acme-billing]]"]' in (vault.root / a["path"]).read_text()  # the name still resolves
    assert result["rewritten"] == []
    vault.move(b["id"], "billing/ACME invoices")
    assert 'related_to: ["[[ACME invoices]]"]' in (vault.root / a["path"]).read_text()
    assert vault.related(a["id"], direction="out")["nodes"][1]["id"] == b["id"]
    assert_index_matches_files(vault)


def test_where_the_new_name_repeats_links_name_the_path(linked: Vault) -> None:
    vault = linked
    (vault.root / "elsewhere").mkdir()
    (vault.root / "elsewhere" / "Route.md").write_text("Another note named Route.\n")
    vault.reconcile()
    vault.move("places/Kessel Run.md", "places/Route.md")
    assert "Sand. Back to [[places/Route]].\n" == (vault.root / "places" / "Tatooine.md").read_text()
    assert vault.related("places/Route.md", direction="in")["count"] == 2
    assert_index_matches_files(vault)


@pytest.mark.parametrize(
    "new_path, message",
    [
        ("places/Tatooine.md", "already exists; mv never overwrites"),
        ("../outside.md", "is not a place for a note"),
        (".obsidian/x.md", "is not a place for a note"),
        ("places/What? Now.md", "cannot be a note name"),
        ("places/a [b].md", "cannot be a note name"),
        ("places/Kessel Run.md", "is already there"),
        ("places/", "is already there"),  # a folder: the note keeps its name, which is its own
        ("./", "new_path is empty"),
    ],
)
def test_mv_refuses_and_changes_nothing(linked: Vault, new_path: str, message: str) -> None:
    before = _files(linked)
    with pytest.raises(InvalidInput, match=message):
        linked.move("places/Kessel Run.md", new_path)
    assert _files(linked) == before


def test_a_linking_file_with_a_git_conflict_refuses_the_whole_move(linked: Vault) -> None:
    vault = linked
    (vault.root / "merge.md").write_text("<<<<<<< HEAD\n[[Kessel Run]] ours\n=======\ntheirs\n>>>>>>> x\n")
    vault.reconcile()
    before = _files(vault)
    with pytest.raises(InvalidInput, match="git conflict in merge.md: resolve it first"):
        vault.move("places/Kessel Run.md", "Smuggling Route.md")
    assert _files(vault) == before


def test_a_save_in_a_linking_file_undoes_the_whole_move(linked: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    vault = linked
    before = _files(vault)
    tatooine = vault.root / "places" / "Tatooine.md"  # written after hub.md: hub.md must be put back
    monkeypatch.setattr(locking, "swap", person_saves_before_the_swap(path=tatooine))
    with pytest.raises(SavedMeanwhile):
        vault.move("places/Kessel Run.md", "places/Smuggling Route.md")
    after = _files(vault)
    assert after.pop("places/Tatooine.md") == before.pop("places/Tatooine.md") + b"A line a person just typed.\n"
    assert after == before  # hub.md back byte for byte, the note at its old name, no new one
    assert not (vault.root / ".index" / MOVE_DIRNAME).exists()
    assert_index_matches_files(vault)


def test_a_save_of_the_moved_note_meanwhile_undoes_the_move(linked: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    vault = linked
    before = _files(vault)
    note = vault.root / "places" / "Kessel Run.md"
    real_swap = locking.swap

    calls: list[int] = []

    def an_editor_saves_the_note(tmp: Path, target: Path) -> bool:  # an atomic save: a new file over the name
        if not calls:  # once: the tool's own swap back is no save
            calls.append(1)
            saved = note.with_name(".Kessel Run.md.swp")
            saved.write_text("Body of the spaceport note, edited.\n")
            os.replace(saved, note)
        return real_swap(tmp, target)

    monkeypatch.setattr(locking, "swap", an_editor_saves_the_note)
    with pytest.raises(SavedMeanwhile):
        vault.move("places/Kessel Run.md", "places/Smuggling Route.md")
    after = _files(vault)
    assert after.pop("places/Kessel Run.md") == b"Body of the spaceport note, edited.\n"
    before.pop("places/Kessel Run.md")
    assert after == before
    assert_index_matches_files(vault)


def test_a_symlinked_note_moved_to_another_folder_still_leads_to_its_file(vault: Vault) -> None:
    """A note that is a relative symlink to a file elsewhere in the vault: the link is
    what moves, and it still names that file from its new folder. Before, the move
    hard-linked the symlink itself (now dangling from the deeper folder), failed, and left
    its journal behind: every later open failed to reconcile and no move could be made."""
    (vault.root / "shared").mkdir()
    real = vault.root / "shared" / "priya.md"
    real.write_bytes(b"---\nid: priya-note\n---\nPriya owns billing.\n")
    (vault.root / "people").mkdir()
    os.symlink("../shared/priya.md", vault.root / "people" / "priya.md")
    vault.reconcile()
    vault.move("people/priya.md", "archive/2024/priya.md")
    moved = vault.root / "archive" / "2024" / "priya.md"
    assert moved.is_symlink() and moved.resolve() == real.resolve()
    assert moved.read_bytes() == real.read_bytes() == b"---\nid: priya-note\n---\nPriya owns billing.\n"
    assert not os.path.lexists(vault.root / "people" / "priya.md")
    assert not (vault.root / ".index" / MOVE_DIRNAME).exists()
    assert vault.get("archive/2024/priya.md")["content"] == "Priya owns billing.\n"
    vault.close()
    with Vault(vault.root, clock=vault.clock) as reopened:
        assert reopened.reconcile()["removed"] == 0
        assert_index_matches_files(reopened)


@pytest.mark.parametrize("crash_at", [1, 2, 3])
def test_a_crash_half_way_is_undone_on_the_next_open(linked: Vault, crash_at: int) -> None:
    """The process dies (os._exit: no finally, no cleanup) after ``crash_at`` files were
    swapped; the next open puts everything back as it was."""
    vault = linked
    before = _files(vault)
    script = textwrap.dedent(f"""
        import os, sys
        from agent_memory.disk import store
        from agent_memory.vault.vault import Vault
        real = store.Store.replace_checked
        done = [0]
        def dies(self, rel, data, checked):
            if done[0] == {crash_at - 1}:
                os._exit(3)
            done[0] += 1
            return real(self, rel, data, checked)
        store.Store.replace_checked = dies
        if {crash_at} == 3:  # after every link file: die as the old name is taken away
            store.Store.replace_checked = real
            import agent_memory.vault.moves as moves
            moves.Moves._retire_old_name = lambda *a: os._exit(3)
        vault = Vault(sys.argv[1])
        vault.move("places/Kessel Run.md", "places/Smuggling Route.md")
    """)
    dies_mid_move(script, vault.root)
    assert (vault.root / ".index" / MOVE_DIRNAME / "manifest.json").exists()
    assert _files(vault) != before  # the crash left a half-made move
    vault.close()
    reopened = Vault(vault.root, clock=vault.clock)
    try:
        assert _files(reopened) == before
        assert not (vault.root / ".index" / MOVE_DIRNAME).exists()
        assert not (vault.root / "places" / "Smuggling Route.md").exists()
        assert_index_matches_files(reopened)
        reopened.move("places/Kessel Run.md", "places/Smuggling Route.md")  # and the move can be made again
        assert (vault.root / "hub.md").read_text() == HUB_AFTER
    finally:
        reopened.close()


def test_a_crash_at_the_end_never_costs_the_note_when_a_new_one_took_its_old_name(linked: Vault) -> None:
    """The process dies after every file of the move is in place, before its journal is
    removed; before the next open a person makes a new note under the old name. Undoing
    the move cannot put the note back there: it stays at its new place. Before, the undo
    took the note at the new place for a spare copy and parked it, and the next write
    deleted it: the note was gone."""
    vault = linked
    original = (vault.root / "places" / "Kessel Run.md").read_bytes()
    script = textwrap.dedent("""
        import os, sys
        import agent_memory.vault.moves as moves
        real = moves.shutil.rmtree
        def dies(path, *args, **kwargs):
            if str(path).endswith(moves.MOVE_DIRNAME):
                os._exit(3)
            return real(path, *args, **kwargs)
        moves.shutil.rmtree = dies
        from agent_memory.vault.vault import Vault
        Vault(sys.argv[1]).move("places/Kessel Run.md", "places/Smuggling Route.md")
    """)
    dies_mid_move(script, vault.root)
    moved = vault.root / "places" / "Smuggling Route.md"
    assert moved.read_bytes() == original and not (vault.root / "places" / "Kessel Run.md").exists()
    (vault.root / "places" / "Kessel Run.md").write_text("A new note a person made under the old name.\n")
    vault.close()
    with Vault(vault.root, clock=vault.clock) as reopened:
        reopened.remember("A later write, which looks at parked files")
        assert moved.read_bytes() == original
        assert (vault.root / "places" / "Kessel Run.md").read_text() == "A new note a person made under the old name.\n"
        assert not (vault.root / ".index" / MOVE_DIRNAME).exists()
        assert_index_matches_files(reopened)


def test_a_crashed_move_that_cannot_be_undone_is_kept_aside_and_the_vault_works_on(linked: Vault, caplog) -> None:
    """The undo of a move a crash interrupted fails (here its record lost a file). Before,
    it failed again at every open, before the walk: no change a person made was indexed
    any more, and no move could be made again."""
    vault = linked
    script = textwrap.dedent("""
        import os, sys
        import agent_memory.vault.moves as moves
        moves.Moves._retire_old_name = lambda *a: os._exit(3)
        from agent_memory.vault.vault import Vault
        Vault(sys.argv[1]).move("places/Kessel Run.md", "places/Smuggling Route.md")
    """)
    dies_mid_move(script, vault.root)
    journal = vault.root / ".index" / MOVE_DIRNAME
    (journal / "1.md").unlink()  # one of the originals it keeps
    (vault.root / "new.md").write_text("A note a person wrote after the crash.\n")
    vault.close()
    caplog.clear()
    with Vault(vault.root, clock=vault.clock) as reopened:
        assert ".index/move was not acted on: could not be undone" in caplog.text
        assert [h["path"] for h in reopened.search("note a person wrote after the crash", match="all")["hits"]] == ["new.md"]
        [aside] = (vault.root / ".index" / "set-aside").glob(f"move-*/record/{MOVE_DIRNAME}")
        assert (aside / "manifest.json").exists() and not journal.exists()
        assert_index_matches_files(reopened)
        reopened.move("hub.md", "hubs/hub.md")  # and moves work again


def test_cli_mv(linked: Vault) -> None:
    out = cli_ok("mv", "places/Kessel Run.md", ":/Smuggling Route", vault=linked.root)
    assert "Moved places/Kessel Run.md -> Smuggling Route.md" in out
    assert "id places/Kessel Run.md -> Smuggling Route.md" in out
    assert "rewrote 6 links in hub.md" in out
    refused = run_cli("mv", "Smuggling Route.md", "hub.md", vault=linked.root)
    assert refused.returncode == 1 and "already exists" in refused.stderr and refused.stdout == ""


@pytest.mark.anyio
async def test_move_memory_over_mcp(linked: Vault) -> None:
    async with mcp_client(linked) as client:
        moved = await tool_ok(client, "move_memory", memory_id="places/Kessel Run.md", new_path="Smuggling Route.md")
        assert moved["new_id"] == "Smuggling Route.md"
        assert "already exists" in await tool_error(client, "move_memory", memory_id="Smuggling Route.md", new_path="hub.md")
    assert (linked.root / "places" / "Tatooine.md").read_text() == "Sand. Back to [[Smuggling Route]].\n"
    assert_index_matches_files(linked)


# ---------------------------------------------------------------- the rarer paths


def test_mv_refuses_a_symlinked_folder_and_writes_nothing_through_it(linked: Vault, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (linked.root / "archive").symlink_to(elsewhere)
    before = _files(linked)
    with pytest.raises(VaultError, match=r"^archive/ in the vault is \(or goes through\) a symlink"):
        linked.move("places/Kessel Run.md", "archive/Kessel Run.md")
    assert _files(linked) == before and list(elsewhere.iterdir()) == []


def test_a_note_linking_to_itself_has_that_link_rewritten_too(linked: Vault) -> None:
    note = linked.root / "places" / "Kessel Run.md"
    note.write_text("Body of the spaceport note. See also [[Kessel Run#Route]].\n## Route\nless than 12 parsecs\n")
    linked.reconcile()
    result = linked.move("places/Kessel Run.md", "places/Smuggling Route.md")
    assert ("places/Smuggling Route.md", 1) in [(r["path"], r["links"]) for r in result["rewritten"]]
    assert (linked.root / "places" / "Smuggling Route.md").read_text().startswith(
        "Body of the spaceport note. See also [[Smuggling Route#Route]].\n")
    assert_index_matches_files(linked)


def test_mv_works_where_the_file_system_has_no_hard_links(linked: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    note = linked.root / "places" / "Kessel Run.md"
    os.chmod(note, 0o600)
    os.utime(note, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
    linked.reconcile()

    def no_links(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")  # exFAT, some network drives

    monkeypatch.setattr(moves_module.os, "link", no_links)
    linked.move("places/Kessel Run.md", "places/Smuggling Route.md")
    moved = linked.root / "places" / "Smuggling Route.md"
    assert moved.read_text() == "Body of the spaceport note.\n## Route\nless than 12 parsecs\n"
    assert not note.exists()
    assert os.stat(moved).st_mtime_ns == 1_700_000_000_000_000_000 and os.stat(moved).st_mode & 0o777 == 0o600
    assert (linked.root / "hub.md").read_text() == HUB_AFTER
    assert_index_matches_files(linked)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a file to another user needs root")
def test_mv_without_hard_links_keeps_a_persons_note_theirs_when_the_agent_runs_as_root(
        linked: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent running as root (a container, a service) moves by copying where there are
    no hard links: the copy was root's, so the person could no longer save their 0600
    note (and it was created 0644, readable by anyone until its mode was set)."""
    note = linked.root / "places" / "Kessel Run.md"
    os.chown(note, 1234, 1234)
    os.chmod(note, 0o600)
    linked.reconcile()

    def no_links(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(moves_module.os, "link", no_links)
    linked.move("places/Kessel Run.md", "places/Smuggling Route.md")
    found = os.stat(linked.root / "places" / "Smuggling Route.md")
    assert (found.st_uid, found.st_gid, found.st_mode & 0o777) == (1234, 1234, 0o600)
    assert_index_matches_files(linked)


def test_a_full_disk_while_moving_is_one_line_and_changes_nothing(linked: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    before = _files(linked)

    def full(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(moves_module.os, "link", full)
    with pytest.raises(VaultError, match=r"^Could not move places/Kessel Run.md: the disk is full\. Nothing was changed"):
        linked.move("places/Kessel Run.md", "places/Smuggling Route.md")
    monkeypatch.undo()
    assert _files(linked) == before
    assert not (linked.root / ".index" / MOVE_DIRNAME).exists()


def test_a_file_a_person_creates_at_the_new_name_meanwhile_is_never_overwritten(
    linked: Vault, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _files(linked)
    real_link = os.link

    def person_creates_it_first(src: object, dst: object, **kwargs: object) -> None:
        Path(dst).write_text("A note a person just made under that name.\n")  # type: ignore[arg-type]
        real_link(src, dst, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(moves_module.os, "link", person_creates_it_first)
    with pytest.raises(InvalidInput, match="already exists; mv never overwrites a file"):
        linked.move("places/Kessel Run.md", "places/Smuggling Route.md")
    monkeypatch.undo()
    after = _files(linked)
    assert after.pop("places/Smuggling Route.md") == b"A note a person just made under that name.\n"
    assert after == before
    assert_index_matches_files(linked)


def test_a_save_in_place_just_before_the_new_name_is_made_undoes_the_move(
    linked: Vault, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _files(linked)
    note = linked.root / "places" / "Kessel Run.md"
    real_link = os.link

    def person_saves_in_place(src: object, dst: object, **kwargs: object) -> None:
        with open(note, "a", encoding="utf-8") as handle:  # the same file, written through
            handle.write("A line a person just typed.\n")
        real_link(src, dst, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(moves_module.os, "link", person_saves_in_place)
    with pytest.raises(SavedMeanwhile):
        linked.move("places/Kessel Run.md", "archive/2026/Kessel Run.md")
    monkeypatch.undo()
    after = _files(linked)
    assert after.pop("places/Kessel Run.md") == before.pop("places/Kessel Run.md") + b"A line a person just typed.\n"
    assert after == before
    assert not (linked.root / "archive").exists()  # the folders made for the new name are gone too
    assert_index_matches_files(linked)


def test_a_rename_that_would_break_a_linking_files_front_matter_is_refused(linked: Vault) -> None:
    (linked.root / "quoted.md").write_text("---\nrelated_to: '[[Kessel Run]]'\n---\nA single-quoted link.\n")
    linked.reconcile()
    before = _files(linked)
    with pytest.raises(InvalidInput, match="would change how its front matter reads.*Nothing was moved"):
        linked.move("places/Kessel Run.md", "places/Han's Run.md")
    assert _files(linked) == before


def test_a_crash_before_the_journal_was_complete_changes_nothing_on_the_next_open(linked: Vault) -> None:
    before = _files(linked)
    journal = linked.root / ".index" / MOVE_DIRNAME
    journal.mkdir()
    (journal / "0.md").write_bytes(b"a copy written before the manifest\n")  # the process died here
    linked.close()
    reopened = Vault(linked.root, clock=linked.clock)
    try:
        assert _files(reopened) == before
        assert not journal.exists()
        reopened.move("places/Kessel Run.md", "places/Smuggling Route.md")  # nothing blocks the next move
    finally:
        reopened.close()


def test_a_crash_right_after_the_old_name_was_taken_away_is_undone(linked: Vault) -> None:
    before = _files(linked)
    script = textwrap.dedent("""
        import os, sys
        import agent_memory.vault.moves as moves
        from agent_memory.vault.vault import Vault
        def dies_after_the_rename(self, old, new, checked):
            source = self.store.abspath(old)
            os.rename(source, source.with_name(".aside-of-the-move.agent-memory.tmp"))
            os._exit(3)
        moves.Moves._retire_old_name = dies_after_the_rename
        Vault(sys.argv[1]).move("places/Kessel Run.md", "places/Smuggling Route.md")
    """)
    dies_mid_move(script, linked.root)
    assert not (linked.root / "places" / "Kessel Run.md").exists()  # only the new name is left
    linked.close()
    reopened = Vault(linked.root, clock=linked.clock)
    try:
        assert _files(reopened) == before
        assert not (linked.root / "places" / "Smuggling Route.md").exists()
        assert_index_matches_files(reopened)
    finally:
        reopened.close()


def test_a_save_taken_aside_by_a_move_that_then_died_outlives_the_orphan_sweep(linked: Vault) -> None:
    """A person saves the note just as the move takes its old name aside, and the process
    dies before it looks at what it took: that file held the save. It used to sit under
    the tool's temp-file name, which a later start deletes once it is a minute old."""
    script = textwrap.dedent("""
        import os, sys
        import agent_memory.vault.moves as moves
        from agent_memory.vault.vault import Vault
        retire = moves.Moves._retire_old_name
        def a_person_saves_then_the_process_dies(self, old, new, checked):
            source = self.store.abspath(old)
            source.with_name("editor.swp").write_text("A save typed as the move ran.\\n")
            os.replace(source.with_name("editor.swp"), source)
            os.path.samefile = lambda *a: os._exit(3)  # right after the old name is taken aside
            retire(self, old, new, checked)
        moves.Moves._retire_old_name = a_person_saves_then_the_process_dies
        Vault(sys.argv[1]).move("places/Kessel Run.md", "places/Smuggling Route.md")
    """)
    dies_mid_move(script, linked.root)
    linked.close()
    hour_ago = os.path.getmtime(linked.root / "places") - 3600
    for path in (linked.root / "places").iterdir():
        os.utime(path, (hour_ago, hour_ago), follow_symlinks=False)
    reopened = Vault(linked.root, clock=linked.clock)  # undoes the move, then sweeps old temp files
    try:
        reopened.reconcile()
        kept = [p for p in (linked.root / "places").iterdir() if p.read_bytes() == b"A save typed as the move ran.\n"]
        assert [p.name.startswith("Kessel Run.md.saved-") for p in kept] == [True]
        assert_index_matches_files(reopened)
    finally:
        reopened.close()
    done = run_cli("--json", "doctor", vault=linked.root)  # where a person who never looks at the folder learns of it
    check = {c["name"]: c for c in json.loads(done.stdout)["checks"]}["saves kept aside"]
    assert check["warn"] and check["items"] == [f"places/{kept[0].name}"], done.stdout


def test_mv_keeps_the_moved_notes_wikilink_on_the_note_it_reached(vault: Vault) -> None:
    """``[[Other]]`` is found nearest first: from ``a/`` it reached ``a/Other.md``. Moved
    into ``b/``, beside another ``Other.md``, the same text would reach that one (as
    Obsidian resolves it too): the link names the path of the note it reached, its
    heading and alias kept; a link whose note is the same from the new folder stays."""
    for rel, text in (("a/Other.md", "Other in a.\n"), ("b/Other.md", "Other in b.\n"),
                      ("a/Unique.md", "Only one.\n"),
                      ("a/Mover.md", "See [[Other#Plan|the plan]] and [[Unique]].\n")):
        (vault.root / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault.root / rel).write_text(text, encoding="utf-8")
    vault.reconcile()
    vault.move("a/Mover.md", "b/Mover.md")
    assert (vault.root / "b" / "Mover.md").read_text() == "See [[a/Other#Plan|the plan]] and [[Unique]].\n"
    outgoing = vault.related("b/Mover.md", direction="out")
    assert sorted(n["path"] for n in outgoing["nodes"][1:]) == ["a/Other.md", "a/Unique.md"]
    assert_index_matches_files(vault)


def test_a_journal_copy_swapped_for_a_link_after_its_check_is_never_written_into_a_note(
        linked: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Undoing a crashed move checks the journal's copies, then reads each again to put
    it back: a synced folder that swaps a copy for a link in between (to a person's
    private file) had that file written into the note, and carried back out with it."""
    vault = linked
    private = tmp_path / "private.txt"
    private.write_bytes(b"the safe's code is 4711\n")
    script = textwrap.dedent("""
        import os, sys
        from agent_memory.disk import store
        from agent_memory.vault.vault import Vault
        real = store.Store.replace_checked
        done = [0]
        def dies(self, rel, data, checked):
            if done[0] == 1:
                os._exit(3)
            done[0] += 1
            return real(self, rel, data, checked)
        store.Store.replace_checked = dies
        Vault(sys.argv[1]).move("places/Kessel Run.md", "places/Smuggling Route.md")
    """)
    dies_mid_move(script, vault.root)
    vault.close()
    journal = vault.root / ".index" / MOVE_DIRNAME
    real_check = moves_module.checked_manifest
    checks = []

    def checked_then_swapped(root: Path, folder: Path, raw: bytes) -> dict:
        manifest = real_check(root, folder, raw)
        checks.append(folder)
        if len(checks) == 2:  # the undo's own check: the synced folder's change lands right after it
            for copy in folder.glob("*.md"):
                copy.unlink()
                copy.symlink_to(private)
        return manifest

    monkeypatch.setattr(moves_module, "checked_manifest", checked_then_swapped)
    Vault(vault.root, clock=vault.clock).close()
    assert len(checks) == 2  # the swap came after the last check
    assert not [rel for rel, data in _files(vault).items() if b"4711" in data]
    assert private.read_bytes() == b"the safe's code is 4711\n"
    assert journal.exists() or (vault.root / ".index" / "set-aside").exists()
