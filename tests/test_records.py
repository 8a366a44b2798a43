"""Records the tool leaves itself in a vault (move journals, import staging, parked writes,
trash ledger lines, git journal lines) act only when this user's register lists them and
their paths pass the confinement rule: plants copied in by a sync, pushed through git,
and replays of genuine old records are set aside, named once, listed by ``doctor``, and
applied or discarded only when a person says so."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agent_memory.note.parse import file_version
from agent_memory.trust import approvals
from agent_memory.errors import PathRefused
from agent_memory.trust.register import Register
from agent_memory.disk.store import Store
from agent_memory.trust.state import state_dir
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, run_cli

PAYLOAD = b"#!/bin/sh\necho pwned > /tmp/agent-memory-pwned\n"


def _version(data: bytes) -> str:
    return file_version(data)


def _files(root: Path) -> dict[str, bytes]:
    return {rel: (root / rel).read_bytes() for rel, _ in Store(root).walk()}


def _set_aside(root: Path) -> list[str]:
    folder = root / ".index" / "set-aside"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def plant_move(root: Path, old: str, new: str, copy: bytes, linking: list[tuple[str, bytes, bytes]] = ()) -> None:
    """A move journal as a sync or a teammate would bring it: a manifest and its copies."""
    journal = root / ".index" / "move"
    journal.mkdir(parents=True)
    (journal / "0.md").write_bytes(copy)
    files = [{"path": old, "before": _version(copy), "after": _version(copy), "copy": "0.md"}]
    for n, (path, before, after) in enumerate(linking, 1):
        (journal / f"{n}.md").write_bytes(before)
        files.append({"path": path, "before": _version(before), "after": _version(after), "copy": f"{n}.md"})
    (journal / "manifest.json").write_text(json.dumps({"old": old, "new": new, "files": files}))


def plant_import(root: Path, items: list[dict], files: dict[str, bytes]) -> None:
    staging = root / ".index" / "import"
    (staging / "files").mkdir(parents=True)
    for name, data in files.items():
        (staging / "files" / name).write_bytes(data)
    (staging / "manifest.json").write_text(json.dumps({"items": items}))


@pytest.fixture
def closed(vault: Vault) -> Path:
    """A vault with a person's note, closed: what a plant lands in between two commands."""
    (vault.root / "people").mkdir()
    (vault.root / "people" / "priya.md").write_text("Priya owns the billing service.\n")
    vault.reconcile()
    vault.close()
    return vault.root


# --------------------------------------------------------------------------- plants, copied in without git


def test_a_planted_move_journal_never_writes_a_git_hook(closed: Path) -> None:
    root = closed
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / "payload.md").write_bytes(PAYLOAD)
    (root / "payload.md").chmod(0o755)
    plant_move(root, ".git/hooks/post-merge", "payload.md", PAYLOAD)
    first = run_cli("list", vault=root, spawn=True)  # stderr as a user sees it
    assert first.returncode == 0, first.stderr
    assert not (root / ".git" / "hooks" / "post-merge").exists()
    assert (root / "payload.md").read_bytes() == PAYLOAD
    assert ".index/move was not acted on: not in this user's register" in first.stderr
    [aside] = _set_aside(root)
    assert aside.startswith("move-") and f"--apply {aside}" in first.stderr
    second = run_cli("list", vault=root)
    assert "not acted on" not in second.stderr  # named once
    assert not (root / ".git" / "hooks" / "post-merge").exists()
    assert (root / ".index" / "set-aside" / aside / "record" / "move" / "manifest.json").exists()  # kept, untouched


def test_a_planted_move_journal_never_deletes_a_file_outside_the_vault(closed: Path, tmp_path: Path) -> None:
    root = closed
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.md").write_text("Someone's file outside the vault.\n")
    plant_move(root, "../outside/x.md", "../outside/x.md", b"Someone's file outside the vault.\n")
    with Vault(root) as reopened:
        reopened.remember("A write after the plant")
    assert (outside / "x.md").read_text() == "Someone's file outside the vault.\n"


def test_a_planted_import_never_moves_a_file_from_outside_nor_rewrites_a_note(closed: Path, tmp_path: Path) -> None:
    """The item number of a planted staging is a path (its staged file would be the
    diary), an item's path leaves the vault, and one replaces a person's note."""
    root = closed
    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "diary.md").write_text("My private diary.\n")
    priya = (root / "people" / "priya.md").read_bytes()
    plant_import(root, [
        {"n": "../../../../private/diary", "path": "stolen.md"},
        {"n": 1, "path": "../../outside.md"},
        {"n": 2, "path": "people/priya.md", "replaces": True},
    ], {"1.md": b"Planted.\n", "2.md": b"Priya's note, rewritten by someone else.\n", "2.old": priya})
    for _ in range(2):
        with Vault(root) as reopened:
            reopened.import_memories([{"content": "An import of my own"}])
    assert (tmp_path / "private" / "diary.md").read_text() == "My private diary.\n"
    assert not (root / "stolen.md").exists() and not (tmp_path / "outside.md").exists()
    assert not (root.parent / "outside.md").exists()
    assert (root / "people" / "priya.md").read_bytes() == priya
    assert [n for n in _set_aside(root) if n.startswith("import-")]


def test_a_planted_parked_record_never_writes_outside_the_vault(closed: Path, tmp_path: Path) -> None:
    root = closed
    parked = root / ".index" / "parked"
    parked.mkdir(parents=True)
    (parked / "1000-deadbeef.json").write_text(json.dumps({"source": "../../evil.md", "checked": "", "ours": ""}))
    (parked / "1000-deadbeef.md").write_bytes(PAYLOAD)
    with Vault(root) as reopened:
        made = reopened.remember("A note to edit")["memory"]
        reopened.update(made["id"], add_tags=["edited"])  # every write settles parked files first
    assert not (tmp_path / "evil.md").exists() and not (root.parent / "evil.md").exists()
    assert not any(p.name.startswith("evil") for p in tmp_path.rglob("*") if ".index" not in p.parts)
    assert [n for n in _set_aside(root) if n.startswith("parked-")]


def test_a_forged_ledger_line_never_lets_gc_delete_or_restore_move_a_persons_file(vault: Vault) -> None:
    """A person's own file in .trash/ (Obsidian's trash too) and a ledger line naming it
    with its sha256 and no inode: gc must not delete it, restore must not move it."""
    mine = vault.root / ".trash" / "mine.md"
    mine.parent.mkdir()
    mine.write_text("A note I deleted in Obsidian and keep for now.\n")
    line = {"trash": ".trash/mine.md", "source": "mine.md", "id": "mine", "reason": "forgotten",
            "at": "2020-01-01T00:00:00Z", "sha256": hashlib.sha256(mine.read_bytes()).hexdigest()}
    (vault.root / ".trash" / ".agent-memory.jsonl").write_text(json.dumps(line) + "\n")
    result = vault.gc(older_than_days=0)
    assert result["removed"] == [] and result["refused"] == [".trash/mine.md"]
    with pytest.raises(PathRefused, match="not in this user's register.*nothing was restored.*doctor"):
        vault.restore("mine")
    assert mine.read_text() == "A note I deleted in Obsidian and keep for now.\n"
    assert not (vault.root / "mine.md").exists()
    assert vault.trash_list() == []


# --------------------------------------------------------------------------- replays of genuine records

INTERRUPT = textwrap.dedent("""
    import os, sys
    from agent_memory.vault import moves
    from agent_memory.disk import staging
    from agent_memory.vault.vault import Vault
    what = sys.argv[2]
    if what == "move":
        moves.Moves._retire_old_name = lambda *a: os._exit(3)
        Vault(sys.argv[1]).move(sys.argv[3], sys.argv[4])
    else:
        staging.Staging.publish = lambda *a, **k: os._exit(3)
        Vault(sys.argv[1]).import_memories([{"content": c} for c in sys.argv[3:]])
""")


def interrupted(root: Path, *args: str, env: dict[str, str] | None = None) -> None:
    """A move or an import killed after its record was written, before it finished."""
    done = subprocess.run([sys.executable, "-c", INTERRUPT, str(root), *args], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 3, done.stderr


def test_a_replayed_move_journal_is_not_acted_on_again(closed: Path, tmp_path: Path) -> None:
    root = closed
    (root / "hub.md").write_text("See [[priya]].\n")
    with Vault(root) as vault:
        vault.reconcile()
    interrupted(root, "move", "people/priya.md", "people/priya-k.md")
    shutil.copytree(root / ".index" / "move", tmp_path / "old-journal")  # a copy of the genuine record
    with Vault(root) as vault:  # the crash's move is undone, once
        assert (root / "people" / "priya.md").exists() and not (root / "people" / "priya-k.md").exists()
        vault.move("people/priya.md", "people/priya-k.md")  # later, the person makes that move
    moved = _files(root)
    shutil.copytree(tmp_path / "old-journal", root / ".index" / "move")  # the replay
    with Vault(root) as vault:
        vault.reconcile()
        assert _files(root) == moved  # the move stands: the old journal undid nothing
        assert vault.get("people/priya-k.md")["path"] == "people/priya-k.md"
        assert_index_matches_files(vault)
    assert [n for n in _set_aside(root) if n.startswith("move-")]


def test_a_replayed_import_staging_does_not_bring_back_what_was_forgotten(closed: Path, tmp_path: Path) -> None:
    root = closed
    interrupted(root, "import", "Imported fact one", "Imported fact two")
    shutil.copytree(root / ".index" / "import", tmp_path / "old-staging")
    with Vault(root) as vault:  # the import is finished, once
        hits = vault.search("Imported fact")["hits"]
        assert len(hits) == 2
        for hit in hits:
            vault.forget(hit["id"])
    shutil.copytree(tmp_path / "old-staging", root / ".index" / "import")  # the replay
    with Vault(root) as vault:
        assert vault.search("Imported fact")["count"] == 0
        assert len(vault.trash_list()) == 2
        assert_index_matches_files(vault)
    assert [n for n in _set_aside(root) if n.startswith("import-")]


def test_a_genuine_interrupted_move_and_import_still_finish(closed: Path) -> None:
    """What the register lists acts as before: a move is undone, an import finished, and
    their entries are gone from the register once done."""
    root = closed
    before = _files(root)
    interrupted(root, "move", "people/priya.md", "people/priya-k.md")
    interrupted(root, "import", "Imported fact one", "Imported fact two")
    with Vault(root) as vault:
        assert vault.search("Imported fact")["count"] == 2
        assert {k: v for k, v in _files(root).items() if k in before} == before
        assert _set_aside(root) == []
        assert Register(root).entries() == []
        assert_index_matches_files(vault)


# --------------------------------------------------------------------------- operations in several steps


def accounted(vault: Vault, memories: list[dict]) -> None:
    """Every memory is found, or restorable from the trash: never neither."""
    restorable = {e["id"] for e in vault.trash_list()}
    for memory in memories:
        try:
            vault.get(memory["id"])
        except Exception:  # noqa: BLE001 - not found: then the trash must hold it
            assert memory["id"] in restorable, f"{memory['path']} is neither found nor restorable"


def _ledger_is_a_symlink(vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "elsewhere.jsonl").write_text("")
    (vault.root / ".trash").mkdir(exist_ok=True)
    (vault.root / ".trash" / ".agent-memory.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")


def _ledger_is_a_folder(vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (vault.root / ".trash" / ".agent-memory.jsonl").mkdir(parents=True)


def _disk_fills_mid_line(vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    def half_then_full(self, entry) -> None:
        with open(self.ledger, "ab") as ledger:
            ledger.write(entry.to_json().encode()[:20])  # what reached the disk before it was full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("agent_memory.disk.trash.Trash._append", half_then_full)


@pytest.mark.parametrize("breaks", [_ledger_is_a_symlink, _ledger_is_a_folder, _disk_fills_mid_line],
                         ids=["ledger symlink", "ledger folder", "disk full"])
def test_forget_whose_ledger_line_cannot_be_written_leaves_the_memory_where_it_was(
        vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, breaks) -> None:
    kept = vault.remember("A fact that must not vanish")["memory"]
    breaks(vault, tmp_path, monkeypatch)
    with pytest.raises(Exception, match="Nothing was changed|could not be recorded|trash ledger"):
        vault.forget(kept["id"])
    assert (vault.root / kept["path"]).read_text().endswith("A fact that must not vanish\n")
    assert vault.get(kept["id"])["id"] == kept["id"]
    assert not [p for p in (vault.root / ".trash").rglob("*.md")]
    monkeypatch.undo()
    ledger = vault.root / ".trash" / ".agent-memory.jsonl"
    if ledger.is_dir() and not ledger.is_symlink():  # the person fixes what broke
        ledger.rmdir()
    elif ledger.is_symlink():
        ledger.unlink()
    other = vault.remember("A second fact, forgotten once the disk has room")["memory"]
    vault.forget(kept["id"])
    vault.forget(other["id"])
    assert {e["id"] for e in vault.trash_list()} == {kept["id"], other["id"]}  # a line cut short damages only itself
    vault.restore(kept["id"])
    assert vault.get(kept["id"])["id"] == kept["id"]
    accounted(vault, [kept, other])
    assert_index_matches_files(vault)


KILLED_FORGET = textwrap.dedent("""
    import os, sys
    from agent_memory.disk import trash
    from agent_memory.vault.vault import Vault
    trash.Trash._append = lambda *a: os._exit(3)  # killed between the move into .trash/ and its ledger line
    Vault(sys.argv[1]).forget(sys.argv[2])
""")


def test_a_forget_killed_before_its_ledger_line_is_undone_at_the_next_open(closed: Path) -> None:
    root = closed
    before = _files(root)
    done = subprocess.run([sys.executable, "-c", KILLED_FORGET, str(root), "people/priya.md"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    assert not (root / "people" / "priya.md").exists()  # in .trash/, with no line that could restore it
    with Vault(root) as vault:
        assert vault.get("people/priya.md")["path"] == "people/priya.md"
        assert _files(root) == before and not list(root.glob(".trash/**/*.md"))
        assert vault.forget("people/priya.md")["trashed_to"]  # and forgetting it works, once
        assert [e["source"] for e in vault.trash_list()] == ["people/priya.md"]


def test_forget_whose_register_cannot_be_written_changes_nothing(vault: Vault) -> None:
    kept = vault.remember("A fact that must not vanish")["memory"]
    register = Register(vault.root).folder
    register.parent.mkdir(parents=True, exist_ok=True)
    register.write_text("not a folder")  # a broken state folder
    with pytest.raises(Exception, match="register of open operations.*Nothing was changed"):
        vault.forget(kept["id"])
    assert vault.get(kept["id"])["id"] == kept["id"]
    assert not list(vault.root.glob(".trash/**/*.md"))


def test_an_import_item_with_a_name_too_long_is_placed_and_later_imports_work(vault: Vault, tmp_path: Path) -> None:
    """A path no file system can hold (a 300-byte name) is no reason to lose the item nor
    to leave a staging area that blocks the next import: it goes to the dated layout."""
    items = tmp_path / "items.json"
    items.write_text(json.dumps([{"content": "A fact", "path": "a/" + "x" * 300 + ".md"}]))
    first = run_cli("import", str(items), vault=vault.root)
    assert first.returncode == 0 and "Traceback" not in first.stderr, first.stderr
    assert not (vault.root / ".index" / "import").exists()
    [hit] = vault.search("A fact")["hits"]
    assert "x" * 255 not in hit["path"]
    items.write_text(json.dumps([{"content": "A later import"}]))
    later = run_cli("import", str(items), vault=vault.root)
    assert later.returncode == 0 and "could not finish" not in later.stderr, later.stderr
    assert vault.search("later import")["count"] == 1


def test_an_import_item_that_cannot_be_put_in_place_takes_the_import_back(
        vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    """All or nothing: the first item was put in place when the second failed; it is
    taken back, the error names the item, and no staging is left to block later imports."""
    import errno

    from agent_memory.disk import staging

    real = staging._Folders.place  # where publishing puts each new file in place

    def place(self, staged, folder, slug):
        if slug.startswith("the-second"):
            raise OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG))
        return real(self, staged, folder, slug)

    before = _files(vault.root)
    monkeypatch.setattr(staging._Folders, "place", place)
    with pytest.raises(Exception, match=r"Could not put .*the-second.md in the vault \(File name too long\); nothing "
                                        "was imported"):
        vault.import_memories([{"content": "The first fact", "title": "The first"},
                               {"content": "The second fact", "title": "The second"},
                               {"content": "The third fact", "title": "The third"}])
    assert _files(vault.root) == before
    assert not (vault.root / ".index" / "import").exists() and Register(vault.root).entries() == []
    monkeypatch.undo()
    assert vault.import_memories([{"content": "The first fact"}])["imported"] == 1
    assert_index_matches_files(vault)


def test_an_interrupted_import_that_cannot_be_finished_is_dropped_naming_its_items(
        closed: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    import errno

    root = closed
    interrupted(root, "import", "The first fact", "The second fact")
    real = Store.place

    def place(self, staged, folder, slug, data=b""):
        if slug.startswith("the-second"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, staged, folder, slug, data)

    monkeypatch.setattr(Store, "place", place)
    with Vault(root) as vault:
        said = caplog.text
        assert "could not be put in place and were dropped" in said and "the-second-fact.md" in said
        assert vault.search("first fact")["count"] == 1
        assert not (root / ".index" / "import").exists()
        monkeypatch.undo()
        assert vault.import_memories([{"content": "A later import"}])["imported"] == 1
        assert Register(root).entries() == []


@pytest.mark.parametrize("step", ["copy", "register", "manifest"])
def test_a_move_whose_journal_cannot_be_written_changes_nothing(closed: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  step: str) -> None:
    import errno

    from agent_memory.trust.register import RegisterError

    root = closed
    (root / "hub.md").write_text("See [[priya]].\n")
    with Vault(root) as vault:
        vault.reconcile()
        before = _files(root)
        real_temp, real_enter = Store.write_temp, Register.enter

        def write_temp(self, folder, data, *args):
            is_manifest = data.startswith(b'{"old"')
            if folder.name == "move" and (step == "copy" and not is_manifest or step == "manifest" and is_manifest):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real_temp(self, folder, data, *args)

        def enter(self, kind, record_hash, **kwargs):
            if kind == "move":
                raise RegisterError("Could not write this user's register: the disk is full.")
            return real_enter(self, kind, record_hash, **kwargs)

        monkeypatch.setattr(Store, "write_temp", write_temp)
        monkeypatch.setattr(Register, "enter", enter if step == "register" else real_enter)
        with pytest.raises(Exception, match="disk is full|No space"):
            vault.move("people/priya.md", "people/priya-k.md")
        monkeypatch.undo()
        assert _files(root) == before
        assert not (root / ".index" / "move").exists() and Register(root).entries() == []
        vault.move("people/priya.md", "people/priya-k.md")  # and the next move works
        assert (root / "hub.md").read_text() == "See [[priya-k]].\n"


@pytest.mark.parametrize("step", ["move back", "ledger"])
def test_a_restore_failing_at_a_step_leaves_the_memory_found_or_restorable(
        vault: Vault, monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    import errno

    from agent_memory.disk import locking
    from agent_memory.disk.trash import Trash

    made = vault.remember("A fact to bring back")["memory"]
    vault.forget(made["id"])

    def fails(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    if step == "move back":
        monkeypatch.setattr(locking, "move_no_replace", fails)
        with pytest.raises(Exception, match="disk is full"):
            vault.restore(made["id"])
    else:
        monkeypatch.setattr(Trash, "_rewrite", fails)
        vault.restore(made["id"])  # the file is back; its stale line acts no more
    monkeypatch.undo()
    accounted(vault, [made])
    if step == "ledger":
        assert vault.get(made["id"])["id"] == made["id"]
        assert vault.gc(older_than_days=0)["removed"] == []  # its stale line deletes nothing
        assert vault.get(made["id"])["id"] == made["id"]
    else:
        assert vault.restore(made["id"])["id"] == made["id"]  # once the disk has room


# --------------------------------------------------------------------------- plants pushed through git


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout


@pytest.fixture
def clones(tmp_path: Path, git_isolated: None, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A bare remote, a teammate's clone (the attacker) and the victim's clone of one vault."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    for name in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{name}_NAME", "A Teammate")
        monkeypatch.setenv(f"GIT_{name}_EMAIL", "teammate@example.com")
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    attacker = tmp_path / "attacker"
    attacker.mkdir()
    git(attacker, "init", "-q", "-b", "main")
    Vault.init(attacker).close()
    (attacker / "people.md").write_text("The team's people.\n")
    git(attacker, "add", "-A")
    git(attacker, "commit", "-q", "-m", "a vault")
    git(attacker, "remote", "add", "origin", str(remote))
    git(attacker, "push", "-q", "-u", "origin", "main")
    git(tmp_path, "clone", "-q", str(remote), str(tmp_path / "victim"))
    Vault(tmp_path / "victim").close()
    return attacker, tmp_path / "victim"


def test_records_pushed_through_git_are_never_acted_on(clones: tuple[Path, Path], tmp_path: Path) -> None:
    """A teammate force-adds a move journal naming .git/hooks/post-merge with an executable
    payload, an import staging whose item number reaches a private diary, and a parked
    record aimed outside; the victim syncs, then runs any command."""
    attacker, victim = clones
    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "diary.md").write_text("My private diary.\n")
    (attacker / "payload.md").write_bytes(PAYLOAD)
    (attacker / "payload.md").chmod(0o755)
    shutil.rmtree(attacker / ".index")
    plant_move(attacker, ".git/hooks/post-merge", "payload.md", PAYLOAD)
    # victim/.index/import/files/<n>.md -> tmp_path/private/diary.md
    plant_import(attacker, [{"n": "../../../../private/diary", "path": "stolen.md"}], {})
    parked = attacker / ".index" / "parked"
    parked.mkdir()
    (parked / "1000-cafe.json").write_text(json.dumps({"source": "../../../private/evil.md", "checked": "", "ours": ""}))
    (parked / "1000-cafe.md").write_bytes(PAYLOAD)
    git(attacker, "add", "-f", ".index", "payload.md")
    git(attacker, "commit", "-q", "-m", "helpful notes")
    git(attacker, "push", "-q", "origin", "main")

    refused = run_cli("sync", vault=victim)  # sync never pulls files under .index/ or .trash/
    assert refused.returncode == 1 and ".index/move/manifest.json" in refused.stderr, refused.stderr
    git(victim, "pull", "-q", "--no-rebase", "origin", "main")  # the victim pulls by hand: the plants arrive
    assert (victim / ".index" / "move" / "manifest.json").exists()
    for _ in range(2):
        later = run_cli("add", "A fact of my own", vault=victim)
        assert later.returncode == 0, later.stderr
        run_cli("sync", vault=victim)
    assert not (victim / ".git" / "hooks" / "post-merge").exists()
    assert (tmp_path / "private" / "diary.md").read_text() == "My private diary.\n"
    assert not (tmp_path / "private" / "evil.md").exists() and not (victim / "stolen.md").exists()
    kinds = {name.split("-")[0] for name in _set_aside(victim)}
    assert kinds == {"move", "import", "parked"}
    git(attacker, "pull", "-q", "origin", "main")
    assert not (attacker / "stolen.md").exists() and "diary" not in git(attacker, "log", "--all", "--name-only")


def test_a_genuine_record_git_tracks_is_not_read_as_one(vault: Vault, git_isolated: None) -> None:
    """This user's own trash ledger, force-added to the repository: a checkout or a pull
    may change any of its lines, so none of them acts."""
    made = vault.remember("A fact to forget")["memory"]
    vault.forget(made["id"])
    assert [e["id"] for e in vault.trash_list()] == [made["id"]]
    git(vault.root, "init", "-q")
    git(vault.root, "add", "-f", ".trash/.agent-memory.jsonl")
    assert vault.trash_list() == []
    assert vault.gc(older_than_days=0)["removed"] == []
    with pytest.raises(PathRefused, match="tracked by git"):
        vault.restore(made["id"])
    git(vault.root, "rm", "-q", "--cached", ".trash/.agent-memory.jsonl")
    assert vault.restore(made["id"])["id"] == made["id"]


def test_planted_git_journal_lines_are_never_committed(tmp_path: Path, git_isolated: None,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_memory.git.commits import Committer

    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    for name in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{name}_NAME", "Ada")
        monkeypatch.setenv(f"GIT_{name}_EMAIL", "ada@example.com")
    repo = tmp_path / "team"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    Vault.init(repo).close()
    (repo / ".agent-memory.toml").write_text("[git]\ncommit = true\n")
    approvals.approve(repo)  # this person's own setting, approved for this clone
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a vault")
    (repo / "draft.md").write_text("A person's draft, never for the team.\n")
    line = {"paths": ["draft.md"], "message": "remember: a draft", "at": 1.0}
    (repo / ".index" / "git-pending.jsonl").write_text(json.dumps(line) + "\n")  # a synced folder brought it
    with Vault(repo) as vault:
        vault.remember("A fact the tool wrote.", title="Mine")
        with Committer(vault) as committer:
            committer.flush()
    assert "draft.md" not in git(repo, "ls-files")
    assert git(repo, "log", "-1", "--format=%s").strip() == "remember: Mine"
    [aside] = _set_aside(repo)
    assert aside.startswith("git-pending-")
    listed = run_cli("doctor", vault=repo)
    assert aside in listed.stdout and "commit 'draft.md'" in listed.stdout


# --------------------------------------------------------------------------- the register itself


def test_after_the_state_folder_is_lost_nothing_acts_until_doctor_applies(vault: Vault) -> None:
    made = vault.remember("A fact to forget")["memory"]
    trashed = vault.forget(made["id"])["trashed_to"]
    shutil.rmtree(state_dir())
    assert vault.gc(older_than_days=0)["removed"] == []
    with pytest.raises(PathRefused, match="does not exist.*state folder was lost.*doctor"):
        vault.restore(made["id"])
    assert (vault.root / trashed).exists()
    doctor = run_cli("doctor", vault=vault.root)
    assert doctor.returncode == 1
    [line] = [ln for ln in doctor.stdout.splitlines() if "trash-" in ln]
    rid = line.split(":")[0].strip()
    assert f"restore put it back at '{made['path']}'" in line
    applied = run_cli("doctor", "--apply", rid, vault=vault.root)
    assert applied.returncode == 0, applied.stderr
    assert vault.restore(made["id"])["id"] == made["id"]
    assert run_cli("doctor", vault=vault.root).stdout.count("trash-") == 0


def test_a_state_folder_inside_the_vault_is_refused(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    made = vault.remember("A fact to forget")["memory"]
    monkeypatch.setenv("AGENT_MEMORY_STATE_DIR", str(vault.root / "state"))
    with Vault(vault.root, clock=vault.clock) as inside:
        with pytest.raises(Exception, match="inside the vault.*AGENT_MEMORY_STATE_DIR"):
            inside.forget(made["id"])
        assert inside.get(made["id"])["id"] == made["id"]
    assert not (vault.root / "state").exists()


WRITER = textwrap.dedent("""
    import sys
    from agent_memory.vault.vault import Vault
    with Vault(sys.argv[1]) as vault:
        for i in range(12):
            made = vault.remember(f"Writer {sys.argv[2]} fact {i} about the queue")["memory"]
            seen = vault.get(made["id"])
            vault.update(made["id"], content=seen["content"] + " (revised)", expected_version=seen["version"])
            if i % 3 == 0:
                vault.forget(made["id"])
""")


def test_writers_in_several_processes_keep_the_register_whole(vault: Vault) -> None:
    """Each process enters and removes its own entries (one file each, never a shared file
    rewritten): afterwards every ledger line is listed and every other entry is gone."""
    vault.close()
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(vault.root), str(n)], stderr=subprocess.PIPE,
                                text=True) for n in range(3)]
    for writer in writers:
        _out, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, err
    with Vault(vault.root) as reopened:
        reopened.store.settle_parked(grace=0)
        lines = reopened.store.trash.entries()
        assert len(lines) == 3 * (12 + 4)  # a version copy per update, and the forgotten ones
        assert len(reopened.trash_list()) == len(lines)
        assert sorted(e["kind"] for e in Register(vault.root).entries()) == ["trash"] * len(lines)
        assert _set_aside(vault.root) == []


# --------------------------------------------------------------------------- doctor, through the CLI


def test_doctor_applies_a_genuine_record_from_another_machine(closed: Path, tmp_path: Path) -> None:
    """A move interrupted on another of this user's machines (another register), synced in:
    set aside here, listed with what it would do, and undone once the person applies it."""
    root = closed
    (root / "hub.md").write_text("See [[priya]].\n")
    with Vault(root) as vault:
        vault.reconcile()
    before = _files(root)
    interrupted(root, "move", "people/priya.md", "people/priya-k.md",
                env={**os.environ, "AGENT_MEMORY_STATE_DIR": str(tmp_path / "other-machine")})
    first = run_cli("list", vault=root, spawn=True)  # stderr as a user sees it
    assert "not acted on" in first.stderr
    doctor = run_cli("doctor", vault=root)
    assert doctor.returncode == 1
    [line] = [ln for ln in doctor.stdout.splitlines() if "move-" in ln]
    rid = line.split(":")[0].strip()
    assert "undo a move of 'people/priya.md' to 'people/priya-k.md'" in line
    applied = run_cli("doctor", "--apply", rid, vault=root)
    assert applied.returncode == 0, applied.stderr
    assert "was undone" in applied.stdout
    assert _files(root) == before
    # The other machine's write of hub.md also left a displaced copy in .index/parked/: its record too.
    [parked] = [ln.split(":")[0].strip() for ln in run_cli("doctor", vault=root).stdout.splitlines() if "parked-" in ln]
    assert run_cli("doctor", "--apply", parked, vault=root).returncode == 0
    assert "[  ok] records" in run_cli("doctor", vault=root).stdout
    assert _files(root) == before
    assert run_cli("doctor", "--apply", rid, vault=root).returncode == 1  # once only


def test_doctor_apply_still_refuses_what_the_rule_refuses_and_discard_deletes(closed: Path) -> None:
    root = closed
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / "payload.md").write_bytes(PAYLOAD)
    plant_move(root, ".git/hooks/post-merge", "payload.md", PAYLOAD)
    doctor = run_cli("doctor", vault=root)
    [line] = [ln for ln in doctor.stdout.splitlines() if "move-" in ln]
    rid = line.split(":")[0].strip()
    assert "in place" in line  # no command has met it yet
    refused = run_cli("doctor", "--apply", rid, vault=root)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert "'.git/hooks/post-merge' is in a hidden folder" in refused.stderr
    assert len(refused.said) <= 2, refused.stderr  # the set-aside note, then the one-line error
    assert not (root / ".git" / "hooks" / "post-merge").exists()
    assert rid in run_cli("doctor", vault=root).stdout  # still listed, for the person to discard
    discarded = run_cli("doctor", "--discard", rid, vault=root)
    assert discarded.returncode == 0 and f"{rid}: deleted" in discarded.stdout
    assert "[  ok] records" in run_cli("doctor", vault=root).stdout
    assert (root / "payload.md").read_bytes() == PAYLOAD  # a memory like any other: the person decides


def test_doctor_discards_a_forged_ledger_line_and_leaves_its_file(vault: Vault) -> None:
    mine = vault.root / ".trash" / "mine.md"
    mine.parent.mkdir()
    mine.write_text("A note I deleted in Obsidian.\n")
    line = {"trash": ".trash/mine.md", "source": "mine.md", "id": "mine", "reason": "forgotten",
            "at": "2020-01-01T00:00:00Z", "sha256": hashlib.sha256(mine.read_bytes()).hexdigest()}
    (vault.root / ".trash" / ".agent-memory.jsonl").write_text(json.dumps(line) + "\n")
    doctor = run_cli("--json", "doctor", vault=vault.root)
    [check] = [c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "records"]
    [item] = check["items"]
    rid = item.split(":")[0]
    done = run_cli("doctor", "--discard", rid, vault=vault.root)
    assert done.returncode == 0, done.stderr
    assert (vault.root / ".trash" / ".agent-memory.jsonl").read_text() == ""
    assert mine.read_text() == "A note I deleted in Obsidian.\n"


@pytest.mark.parametrize("rid", ["move-000000000000", "../../etc", "trash-000000000000"])
def test_doctor_apply_of_an_unknown_record_is_one_line(vault: Vault, rid: str) -> None:
    done = run_cli("doctor", "--apply", rid, vault=vault.root)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert len(done.said) == 1


def test_a_state_folder_removed_while_the_vault_is_open_is_made_again(vault: Vault) -> None:
    """A long-running server whose state folder someone removed: the next forget enters
    its record in a register made afresh, and that record acts."""
    first = vault.remember("A fact forgotten before")["memory"]
    vault.forget(first["id"])
    shutil.rmtree(state_dir())
    made = vault.remember("A fact forgotten after")["memory"]
    vault.forget(made["id"])
    assert [e["id"] for e in vault.trash_list()] == [made["id"]]  # the earlier line is listed no more
    assert vault.restore(made["id"])["id"] == made["id"]


@pytest.mark.anyio
async def test_over_mcp_a_forget_whose_ledger_cannot_be_written_is_a_clear_error(vault: Vault) -> None:
    from conftest import mcp_client, tool_error, tool_ok

    made = vault.remember("A fact that must not vanish")["memory"]
    (vault.root / ".trash" / ".agent-memory.jsonl").mkdir(parents=True)  # a ledger that is a folder
    async with mcp_client(vault) as client:
        said = await tool_error(client, "forget", memory_id=made["id"])
        assert "Nothing was changed" in said and "Traceback" not in said
        found = await tool_ok(client, "get_memory", memory_id=made["id"])
    assert found["id"] == made["id"] and not list(vault.root.glob(".trash/**/*.md"))


def test_a_register_that_cannot_be_read_lets_nothing_act_and_says_so(closed: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    """A genuine interrupted move, then this user's register is damaged (a file where its
    folder was): the journal is not acted on, and the warning says why."""
    root = closed
    interrupted(root, "move", "people/priya.md", "people/priya-k.md")
    register = Register(root).folder
    shutil.rmtree(register)
    register.write_text("damaged")
    with Vault(root):
        said = caplog.text
    assert "not checked against this user's register" in said and "is not a folder" in said
    assert (root / "people" / "priya-k.md").exists()  # as the crash left it: nothing acted
    assert [n for n in _set_aside(root) if n.startswith("move-")]


def test_a_staged_file_swapped_for_a_link_after_its_check_never_enters_the_vault(
        closed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Finishing an interrupted import checks the staged files, then moves each into the
    vault: one a synced folder swapped for a link in between (to a person's private
    file) became a note of the vault, its text indexed and found by any search."""
    from agent_memory.disk import staging

    root = closed
    private = tmp_path / "private.txt"
    private.write_bytes(b"The safe's code is 4711.\n")
    interrupted(root, "import", "Imported fact one", "Imported fact two")
    real_check = staging.checked_items
    checks = []

    def checked_then_swapped(folder: Path, vault_root: Path, raw: bytes) -> list:
        items = real_check(folder, vault_root, raw)
        checks.append(folder)
        if len(checks) == 2:  # publishing's own check: the synced folder's change lands right after it
            for staged in (folder / "files").glob("*.md"):
                staged.unlink()
                staged.symlink_to(private)
        return items

    monkeypatch.setattr(staging, "checked_items", checked_then_swapped)
    with Vault(root) as vault:
        assert len(checks) == 2
        assert vault.search("safe code 4711")["count"] == 0
    assert not [p for p in root.rglob("*.md") if p.is_symlink() and ".index" not in p.parts]
    assert private.read_bytes() == b"The safe's code is 4711.\n"
