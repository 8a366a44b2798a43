"""The vault on disk: ids, slugs, the dated layout, which files are memories, atomic
writes that leave nothing behind when the disk says no, and paths that stay inside."""

from __future__ import annotations

import datetime as dt
import errno
import os
import random
import stat
import re
from pathlib import Path

import pytest

from agent_memory.disk import store as store_mod
from agent_memory.errors import NoVault, PathRefused, SavedMeanwhile, VaultError
from agent_memory.disk.layout import (
    dated_folder,
    find_vault,
    is_memory_path,
    locate_vault,
    make_slug,
    new_id,
    require_vault,
)
from agent_memory.disk.store import Store
from agent_memory.trust.credentials import redact_for_names
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, index_snapshot

ID_FORMAT = re.compile(r"[0-9a-hjkmnp-tv-z]{16}")


# --------------------------------------------------------------------------- ids


def test_id_format() -> None:
    assert ID_FORMAT.fullmatch(new_id())
    assert ID_FORMAT.fullmatch(new_id(0))
    assert ID_FORMAT.fullmatch(new_id(2**50 - 1))


def test_ids_are_unique_and_sorted_in_a_tight_loop() -> None:
    ids = [new_id() for _ in range(50_000)]
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)


def test_ids_for_one_millisecond_are_unique_and_sorted() -> None:
    """A frozen clock (tests, an import of memories created at one instant) still gets distinct ids."""
    ids = [new_id(1_784_538_000_000) for _ in range(20_000)]
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)


def test_ids_sort_by_time() -> None:
    stamps = [0, 1, 999, 1_000, 1_784_538_000_000, 1_784_538_000_001, 2**49]
    ids = [new_id(ms) for ms in stamps]
    assert ids == sorted(ids)
    assert len({i[:10] for i in ids}) == len(stamps)


# --------------------------------------------------------------------------- slugs and layout


SLUG_CASES = [
    ("Customer ACME prefers deploys on Fridays", "customer-acme-prefers-deploys-on-fridays"),
    ("Ünïcödé Çafé", "unicode-cafe"),
    ("Привет мир", "privet-mir"),
    ("¿Qué día prefiere ACME?", "que-dia-prefiere-acme"),
    ("x/y\\z..", "x-y-z"),
    ("", "memory"),
    ("   ", "memory"),
    ("!!! ???", "memory"),
    ("😀", "memory"),
    ("---", "memory"),
]


@pytest.mark.parametrize("title, slug", SLUG_CASES)
def test_slug(title: str, slug: str) -> None:
    assert make_slug(title) == slug


@pytest.mark.parametrize("title", ["word " * 40, "a" * 200, "日本語のタイトル" * 20, "Supercalifragilistic " * 9])
def test_slugs_are_short_ascii_and_end_on_a_word(title: str) -> None:
    slug = make_slug(title)
    assert 0 < len(slug) <= 60
    assert slug.isascii()
    assert re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", slug)


def _slug_texts(count: int) -> list[str]:
    """Titles of every kind a slug meets: words, numbers with commas, quotes, runs of
    dashes and punctuation, entities, accents, other scripts, and lengths around the
    limit, so a cut falls everywhere."""
    rng = random.Random(7)
    pieces = [*"abcXYZ019 ,'-_.;#!?/\\\t\n\"`()[]{}*~^%$@+=<>|:", "1,000", "12,34,5", ",9", "''", "--", "'s",
              "&amp;", "&#39;", "&#x41;", "&eacute;", "&", "…", "1…,2", "é", "＇", "＆", "Ü", "ß", "ﬁ", "Привет", "日本", "😀", "\u00a0"]
    words = ["deploy", "Customer", "a", "release-notes", "password: hunter2"]
    texts = []
    for _ in range(count):
        parts = [rng.choice(pieces) if rng.random() < 0.5 else
                 rng.choice([*words, "x" * rng.randint(1, 70)]) + rng.choice([" ", "-", "", ",", "'"])
                 for _ in range(rng.choice([1, 2, 5, 10, 20, 40]))]
        texts.append("".join(parts))
    return texts


def test_slugs_are_python_slugifys_for_any_title() -> None:
    """ASCII titles (and those cut short with "…") are slugged without python-slugify
    (whose import alone takes 10 ms);
    every title still gets exactly the name slugify gives it."""
    from slugify import slugify

    for title in _slug_texts(5000):
        want = slugify(redact_for_names(title), max_length=60, word_boundary=True, save_order=True) or "memory"
        assert make_slug(title) == want, title


def test_dated_folder_uses_the_utc_date() -> None:
    late_in_new_york = dt.datetime(2026, 7, 20, 22, 30, tzinfo=dt.timezone(dt.timedelta(hours=-4)))
    assert dated_folder(late_in_new_york) == "2026/07/21"
    assert dated_folder(dt.datetime(2026, 1, 5, 0, 0, tzinfo=dt.timezone.utc)) == "2026/01/05"


def test_create_numbers_collisions_and_never_overwrites(tmp_path: Path) -> None:
    store = Store(tmp_path)
    (tmp_path / "2026/07/20").mkdir(parents=True)
    (tmp_path / "2026/07/20/acme.md").write_bytes(b"a human's note\n")
    first = store.create("2026/07/20", "acme", b"one\n")
    second = store.create("2026/07/20", "acme", b"two\n")
    third = store.create("2026/07/20", "acme", b"three\n")
    assert (first, second, third) == ("2026/07/20/acme-2.md", "2026/07/20/acme-3.md", "2026/07/20/acme-4.md")
    assert (tmp_path / "2026/07/20/acme.md").read_bytes() == b"a human's note\n"
    assert [store.read(p)[0] for p in (first, second, third)] == [b"one\n", b"two\n", b"three\n"]
    assert _leftovers(tmp_path) == []


def test_write_new_file_refuses_to_overwrite(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.write_new_file("a/b.md", b"first\n")
    with pytest.raises(VaultError, match="already exists"):
        store.write_new_file("a/b.md", b"second\n")
    assert (tmp_path / "a/b.md").read_bytes() == b"first\n"
    assert _leftovers(tmp_path) == []


def test_replace_checked_swaps_the_bytes_in_and_parks_the_old_file(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.write_new_file("n.md", b"old\n")
    os.chmod(tmp_path / "n.md", 0o600)
    store.replace_checked("n.md", b"new\n", b"old\n")
    assert (tmp_path / "n.md").read_bytes() == b"new\n"
    assert stat.S_IMODE(os.stat(tmp_path / "n.md").st_mode) == 0o600  # a private note stays private
    [parked] = store.parked_dir.glob("*.md")
    assert parked.read_bytes() == b"old\n"  # kept a while: an editor may still write into it
    assert _leftovers(tmp_path) == []
    assert store.settle_parked(grace=0) == []  # unchanged since: deleted, nothing kept
    assert not parked.exists()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a file another owner needs root")
def test_an_edit_keeps_the_files_owner(tmp_path: Path) -> None:
    """An agent that runs as root (a container with the vault mounted, a service) edits
    a person's note. Before, the swapped-in file was root's: a 0600 note could no longer
    be read by the person who wrote it, a 0644 one no longer saved."""
    store = Store(tmp_path)
    store.write_new_file("n.md", b"old\n")
    os.chown(tmp_path / "n.md", 4242, 4343)
    os.chmod(tmp_path / "n.md", 0o600)
    store.replace_checked("n.md", b"new\n", b"old\n")
    found = os.stat(tmp_path / "n.md")
    assert (found.st_uid, found.st_gid, stat.S_IMODE(found.st_mode)) == (4242, 4343, 0o600)
    assert (tmp_path / "n.md").read_bytes() == b"new\n"


def test_replace_checked_refuses_when_the_file_is_not_what_was_checked(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.write_new_file("n.md", b"a person saved this\n")
    with pytest.raises(SavedMeanwhile, match="Someone saved n.md"):
        store.replace_checked("n.md", b"the tool's change\n", b"what the tool read\n")
    assert (tmp_path / "n.md").read_bytes() == b"a person saved this\n"
    assert _leftovers(tmp_path) == []


def test_a_folder_that_took_the_files_name_before_the_swap_stays_where_it_is(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The file becomes a folder of notes between the check and the swap (the swap can
    exchange a file with a folder). Before, the folder was swapped into .index/parked/,
    where no walk, no reconcile and no settle ever looked again (each write only warned
    that it could not read it): the person's notes were hidden for good."""
    from agent_memory.disk import locking

    store = Store(tmp_path)
    store.write_new_file("n.md", b"old\n")
    real_swap = locking.swap

    def a_person_makes_it_a_folder(a: Path, b: Path) -> bool:
        (tmp_path / "n.md").unlink()
        (tmp_path / "n.md").mkdir()
        (tmp_path / "n.md" / "inside.md").write_bytes(b"a note in the new folder\n")
        monkeypatch.setattr(locking, "swap", real_swap)
        return real_swap(a, b)

    monkeypatch.setattr(locking, "swap", a_person_makes_it_a_folder)
    with pytest.raises(SavedMeanwhile):
        store.replace_checked("n.md", b"new\n", b"old\n")
    assert (tmp_path / "n.md" / "inside.md").read_bytes() == b"a note in the new folder\n"
    assert store.settle_parked(grace=0) == [] and not list(store.parked_dir.iterdir())


def test_a_displaced_file_written_to_through_an_open_descriptor_is_kept(tmp_path: Path) -> None:
    """An editor saving in place writes into the inode it opened, even after the swap."""
    store = Store(tmp_path)
    store.write_new_file("n.md", b"v1\n")
    with open(tmp_path / "n.md", "r+b") as editor:
        store.replace_checked("n.md", b"tool\n", b"v1\n")
        editor.seek(0)
        editor.write(b"v2 typed by a person\n")
    kept = store.settle_parked(grace=0)
    assert len(kept) == 1 and (tmp_path / kept[0]).read_bytes() == b"v2 typed by a person\n"
    assert [e.reason for e in store.trash.live()] == ["conflict"]


def test_trash_keeps_the_relative_path_and_numbers_repeats(tmp_path: Path) -> None:
    store = Store(tmp_path)
    now = "2026-07-20T09:00:00Z"
    store.write_new_file("2026/07/20/a.md", b"one\n")
    assert store.trash.move_in(tmp_path / "2026/07/20/a.md", "2026/07/20/a.md", "x", "forgotten", now) == \
        ".trash/2026/07/20/a.md"
    store.write_new_file("2026/07/20/a.md", b"two\n")
    assert store.trash.move_in(tmp_path / "2026/07/20/a.md", "2026/07/20/a.md", "x", "forgotten", now) == \
        ".trash/2026/07/20/a-2.md"
    assert not (tmp_path / "2026/07/20/a.md").exists()
    assert (tmp_path / ".trash/2026/07/20/a.md").read_bytes() == b"one\n"
    assert (tmp_path / ".trash/2026/07/20/a-2.md").read_bytes() == b"two\n"
    assert [e.trash for e in store.trash.live()] == [".trash/2026/07/20/a-2.md", ".trash/2026/07/20/a.md"]


# --------------------------------------------------------------------------- walk


def _touch(root: Path, rel: str, text: str = "x\n") -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


WALKED = ["2026/07/20/a.md", "people/priya.md", "top.md", "deep/er/still.md", "with space.md"]
SKIPPED = [
    ".obsidian/workspace.md", "nested/.md.md/x.md", ".trash/2026/07/20/old.md", ".git/notes.md", ".index/x.md", ".prompts/p.md",
    "people/.hidden/h.md", ".dotfile.md", "notes.txt", "image.png", "README", "upper.MD",
    # editor droppings
    ".priya.md.swp", "people/.priya.md.swx", "priya.md~", "4913", ".#priya.md", "#priya.md#",
    "priya.md.tmp", "priya.md.crswap", "priya.md___jb_tmp___", "priya.md___jb_old___",
    ".0a1b2c3d4e5f.agent-memory.tmp",
]


def test_walk_finds_memories_and_skips_everything_else(tmp_path: Path) -> None:
    for rel in WALKED + SKIPPED:
        _touch(tmp_path, rel)
    assert sorted(rel for rel, _stat in Store(tmp_path).walk()) == sorted(WALKED)
    assert [rel for rel in WALKED if not is_memory_path(rel)] == []
    assert [rel for rel in SKIPPED if is_memory_path(rel)] == []


def test_walk_gives_each_file_its_stat(tmp_path: Path) -> None:
    _touch(tmp_path, "a.md", "12345")
    [(rel, stat)] = list(Store(tmp_path).walk())
    assert (rel, stat.st_size, stat.st_mtime_ns) == ("a.md", 5, (tmp_path / "a.md").stat().st_mtime_ns)


def test_walk_does_not_follow_folder_symlinks(tmp_path: Path) -> None:
    vault, elsewhere = tmp_path / "vault", tmp_path / "elsewhere"
    _touch(vault, "a.md")
    _touch(elsewhere, "b.md")
    (vault / "linked").symlink_to(elsewhere, target_is_directory=True)
    (vault / "loop").symlink_to(vault, target_is_directory=True)
    assert [rel for rel, _ in Store(vault).walk()] == ["a.md"]


@pytest.mark.parametrize("rel", ["/etc/passwd.md", "//x.md", "a//b.md", "../x.md", "a/../../x.md", "./x.md", ""])
def test_paths_that_are_not_vault_relative_are_not_memory_paths(rel: str) -> None:
    assert not is_memory_path(rel)


# --------------------------------------------------------------------------- atomic writes and disk errors


def _leftovers(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and "tmp" in p.name)


def _files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and ".index" not in p.relative_to(root).parts
    }


DISK_ERRORS = [(errno.EROFS, "read-only"), (errno.ENOSPC, "disk is full")]


@pytest.fixture
def failing_disk(monkeypatch: pytest.MonkeyPatch):
    """Make the store's one write function fail the way a full or read-only disk does."""

    def arm(code: int) -> None:
        def refuse(self: Store, folder: Path, data: bytes, mode: int = 0o644, owner: object = None) -> Path:
            raise OSError(code, os.strerror(code))

        monkeypatch.setattr(Store, "write_temp", refuse)

    return arm


@pytest.mark.parametrize("code, message", DISK_ERRORS)
def test_remember_on_a_failing_disk_changes_nothing(vault: Vault, failing_disk, code: int, message: str) -> None:
    vault.remember("Already here before the disk filled up.")
    files, index = _files(vault.root), index_snapshot(vault.index.path)
    failing_disk(code)
    with pytest.raises(VaultError, match=message) as caught:
        vault.remember("Customer ACME prefers deploys on Fridays", tags=["customer"])
    assert "Nothing was changed" in str(caught.value)
    assert _files(vault.root) == files
    assert _leftovers(vault.root) == []
    assert index_snapshot(vault.index.path) == index
    assert_index_matches_files(vault)


@pytest.mark.parametrize("code, message", DISK_ERRORS)
def test_a_failed_remember_leaves_no_empty_dated_folder(vault: Vault, clock, failing_disk, code: int, message: str) -> None:
    vault.remember("Written on the 20th.")
    clock.advance(days=400)
    failing_disk(code)
    with pytest.raises(VaultError, match=message):
        vault.remember("Would be written a year later.")
    assert sorted(p.name for p in vault.root.iterdir()) == [".gitignore", ".index", "2026"]
    assert sorted(p.name for p in (vault.root / "2026").iterdir()) == ["07"]
    assert_index_matches_files(vault)


@pytest.mark.parametrize("code, message", DISK_ERRORS)
def test_update_on_a_failing_disk_changes_nothing(vault: Vault, failing_disk, code: int, message: str) -> None:
    memory = vault.remember("Customer ACME prefers deploys on Fridays", tags=["customer"])["memory"]
    files, index = _files(vault.root), index_snapshot(vault.index.path)
    failing_disk(code)
    with pytest.raises(VaultError, match=message):
        vault.update(memory["id"], expected_version=vault.get(memory["id"])["version"], content="ACME deploys on Thursdays now", add_tags=["changed"])
    assert _files(vault.root) == files
    assert _leftovers(vault.root) == []
    assert index_snapshot(vault.index.path) == index
    assert vault.get(memory["id"])["content"] == "Customer ACME prefers deploys on Fridays\n"
    assert_index_matches_files(vault)


@pytest.mark.parametrize("code, message", DISK_ERRORS)
def test_dedup_tag_merge_on_a_failing_disk_changes_nothing(vault: Vault, failing_disk, code: int, message: str) -> None:
    vault.remember("Customer ACME prefers deploys on Fridays", tags=["customer"])
    files, index = _files(vault.root), index_snapshot(vault.index.path)
    failing_disk(code)
    with pytest.raises(VaultError, match=message):
        vault.remember("Customer ACME prefers deploys on Fridays", tags=["new-tag"])
    assert _files(vault.root) == files
    assert index_snapshot(vault.index.path) == index


@pytest.mark.parametrize("code, message", DISK_ERRORS)
def test_init_on_a_failing_disk_says_why(tmp_path: Path, failing_disk, code: int, message: str) -> None:
    failing_disk(code)
    with pytest.raises(VaultError, match=message):
        Vault.init(tmp_path / "new-vault")
    assert _files(tmp_path / "new-vault") == {}


@pytest.mark.parametrize("code, message", DISK_ERRORS)
def test_a_write_failing_half_way_leaves_no_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     code: int, message: str) -> None:
    """The temp file exists when fsync fails: the store must remove it."""
    store = Store(tmp_path)
    store.write_new_file("n.md", b"old\n")

    def fsync_fails(fd: int) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(store_mod.os, "fsync", fsync_fails)
    with pytest.raises(VaultError, match=message):
        store.replace_checked("n.md", b"new\n", b"old\n")
    with pytest.raises(VaultError, match=message):
        store.create("2026/07/20", "n", b"new\n")
    monkeypatch.undo()
    assert (tmp_path / "n.md").read_bytes() == b"old\n"
    assert _files(tmp_path) == {"n.md": b"old\n"}


# --------------------------------------------------------------------------- confine


def test_confine_allows_memories_and_prompts(tmp_path: Path) -> None:
    _touch(tmp_path, "2026/07/20/a.md")
    _touch(tmp_path, ".prompts/x.md")
    store = Store(tmp_path)
    root = tmp_path.resolve()
    assert store.confine("2026/07/20/a.md") == root / "2026/07/20/a.md"
    assert store.confine("./2026/07/20/../20/a.md") == root / "2026/07/20/a.md"
    assert store.confine(str(tmp_path / "2026/07/20/a.md")) == root / "2026/07/20/a.md"
    assert store.confine(".prompts/x.md") == root / ".prompts/x.md"


@pytest.mark.parametrize(
    "path",
    ["../outside.md", "2026/../../outside.md", "/etc/passwd", ".git/config", ".index/index.sqlite3",
     ".obsidian/app.json", ".trash/2026/07/20/a.md", ".env", "people/.secret/x.md"],
)
def test_confine_refuses(tmp_path: Path, path: str) -> None:
    vault = tmp_path / "vault"
    for rel in (".git/config", ".index/index.sqlite3", ".obsidian/app.json", ".trash/2026/07/20/a.md", ".env",
                "people/.secret/x.md"):
        _touch(vault, rel)
    _touch(tmp_path, "outside.md")
    with pytest.raises(PathRefused):
        Store(vault).confine(path)


def test_confine_refuses_symlinks_pointing_outside(tmp_path: Path) -> None:
    vault, secret = tmp_path / "vault", tmp_path / "secret"
    _touch(vault, "inside.md")
    _touch(secret, "token.md", "hunter2\n")
    (vault / "link.md").symlink_to(secret / "token.md")
    (vault / "folder").symlink_to(secret, target_is_directory=True)
    (vault / "ok.md").symlink_to(vault / "inside.md")
    store = Store(vault)
    for path in ("link.md", "folder/token.md", str(vault / "link.md")):
        with pytest.raises(PathRefused, match="outside the vault"):
            store.confine(path)
    assert store.confine("ok.md") == (vault / "inside.md").resolve()


# --------------------------------------------------------------------------- locate_vault


def test_locate_vault_explicit_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_MEMORY_DIR", str(tmp_path / "from-env"))
    (tmp_path / ".memory").mkdir()
    assert locate_vault(tmp_path / "explicit", cwd=tmp_path) == tmp_path / "explicit"


def test_locate_vault_env_names_the_vault_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_MEMORY_DIR", str(tmp_path / "from-env"))
    (tmp_path / ".memory").mkdir()
    assert locate_vault(None, cwd=tmp_path) == tmp_path / "from-env"


def test_locate_vault_relative_paths_are_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert locate_vault("v") == tmp_path / "v"


def test_locate_vault_finds_the_nearest_memory_folder_in_parents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENT_MEMORY_DIR")
    (tmp_path / ".memory").mkdir()
    (tmp_path / "project/.memory").mkdir(parents=True)
    (tmp_path / "project/src/deep").mkdir(parents=True)
    (tmp_path / "other/deep").mkdir(parents=True)
    (tmp_path / "other/.memory").write_text("a file, not a vault")
    assert locate_vault(None, cwd=tmp_path / "project/src/deep") == tmp_path / "project/.memory"
    assert locate_vault(None, cwd=tmp_path / "project") == tmp_path / "project/.memory"
    assert locate_vault(None, cwd=tmp_path / "other/deep") == tmp_path / ".memory"


def test_locate_vault_falls_back_to_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> None:
    monkeypatch.delenv("AGENT_MEMORY_DIR")
    (tmp_path / "nowhere").mkdir()
    assert locate_vault(None, cwd=tmp_path / "nowhere") == isolated_home / ".memory"


def test_locate_vault_finds_an_enclosing_obsidian_vault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENT_MEMORY_DIR")
    (tmp_path / "notes/.obsidian").mkdir(parents=True)
    (tmp_path / "notes/Projects/2026").mkdir(parents=True)
    assert locate_vault(None, cwd=tmp_path / "notes/Projects/2026") == tmp_path / "notes"
    assert locate_vault(None, cwd=tmp_path / "notes") == tmp_path / "notes"


def test_locate_vault_finds_a_folder_holding_a_vaults_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENT_MEMORY_DIR")
    Vault.init(tmp_path / "kb").close()  # a vault made with --dir: its .index/ marks it
    (tmp_path / "kb/people").mkdir()
    (tmp_path / "other/.index").mkdir(parents=True)  # someone else's .index/ is no vault
    (tmp_path / "other/sub").mkdir()
    assert locate_vault(None, cwd=tmp_path / "kb/people") == tmp_path / "kb"
    assert find_vault(tmp_path / "other/sub")[0] is None


def test_locate_vault_the_nearest_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENT_MEMORY_DIR")
    (tmp_path / ".memory").mkdir()
    (tmp_path / "notes/.obsidian").mkdir(parents=True)
    (tmp_path / "notes/daily").mkdir()
    assert locate_vault(None, cwd=tmp_path / "notes/daily") == tmp_path / "notes"
    (tmp_path / "notes/daily/.memory").mkdir()
    assert locate_vault(None, cwd=tmp_path / "notes/daily") == tmp_path / "notes/daily/.memory"


def test_inside_a_memory_folder_it_is_the_vault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENT_MEMORY_DIR")
    (tmp_path / "p/.memory/2026/07").mkdir(parents=True)
    assert locate_vault(None, cwd=tmp_path / "p/.memory/2026/07") == tmp_path / "p/.memory"


def test_obsidian_settings_in_home_do_not_make_home_a_vault(monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> None:
    monkeypatch.delenv("AGENT_MEMORY_DIR")
    (isolated_home / ".obsidian").mkdir()
    (isolated_home / "code/app").mkdir(parents=True)
    assert locate_vault(None, cwd=isolated_home / "code/app") == isolated_home / ".memory"
    assert locate_vault(None, cwd=isolated_home) == isolated_home / ".memory"


def test_no_vault_says_where_it_looked_and_how_to_pass_dir(monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> None:
    monkeypatch.delenv("AGENT_MEMORY_DIR")
    (isolated_home / "code/app").mkdir(parents=True)
    with pytest.raises(NoVault) as raised:
        require_vault(None, cwd=isolated_home / "code/app")
    message = str(raised.value)
    assert f"{isolated_home / 'code/app'}, {isolated_home / 'code'}, {isolated_home}" in message
    assert str(isolated_home / ".memory") in message and "--dir PATH" in message and "agent-memory init" in message
    (isolated_home / ".memory").mkdir()
    assert require_vault(None, cwd=isolated_home / "code/app") == isolated_home / ".memory"
    assert require_vault(isolated_home / "named", cwd=isolated_home) == isolated_home / "named"  # named: Vault says


def test_empty_env_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_MEMORY_DIR", "")
    (tmp_path / ".memory").mkdir()
    assert locate_vault(None, cwd=tmp_path) == tmp_path / ".memory"


def test_memory_lookups_never_read_files_outside_the_vault(vault: Vault, tmp_path: Path) -> None:
    from agent_memory.errors import NotFound

    _touch(tmp_path, "elsewhere/secret.md", "hunter2 is the password\n")
    for key in (str(tmp_path / "elsewhere/secret.md"), "../elsewhere/secret.md", "//" + str(tmp_path / "elsewhere/secret.md")):
        for call in (vault.get, vault.forget, lambda k: vault.update(k, add_tags=["x"])):
            with pytest.raises(NotFound):
                call(key)
    assert vault.search("hunter2 password")["count"] == 0
    assert (tmp_path / "elsewhere/secret.md").read_text() == "hunter2 is the password\n"
    assert_index_matches_files(vault)


def test_symlinks_to_files_outside_the_vault_are_not_memories(vault: Vault, tmp_path: Path) -> None:
    from agent_memory.errors import NotFound

    _touch(tmp_path, "elsewhere/secret.md", "hunter2 is the password\n")
    (vault.root / "people").mkdir()
    (vault.root / "people/link.md").symlink_to(tmp_path / "elsewhere/secret.md")
    (vault.root / "folder").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    vault.remember("Inside fact about the password policy")
    (vault.root / "alias.md").symlink_to(vault.root / vault.list()["memories"][0]["path"])
    assert sorted(rel for rel, _ in vault.store.walk())[1:] == ["alias.md"]
    vault.reconcile()
    for key in ("people/link.md", "folder/secret.md"):
        with pytest.raises(NotFound):
            vault.get(key)
        vault.reconcile_path(key)
    assert vault.search("hunter2")["count"] == 0
    assert vault.get("alias.md")["content"] == "Inside fact about the password policy\n"
    assert_index_matches_files(vault)


# --------------------------------------------------------------------------- fallbacks and late failures


@pytest.fixture
def no_proc(monkeypatch: pytest.MonkeyPatch) -> None:
    """A system without ``/proc/self/fd`` (macOS, the BSDs): the store cannot ask the
    kernel where an opened file is and must check the slow way."""
    real_readlink = os.readlink

    def readlink(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if str(path).startswith("/proc/self/fd/"):
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(path))
        return real_readlink(path, *args, **kwargs)

    monkeypatch.setattr(store_mod.os, "readlink", readlink)


def test_without_proc_memories_are_still_written_read_and_confined(no_proc: None, vault: Vault, tmp_path: Path) -> None:
    made = vault.remember("The staging database resets on Sundays", tags=["db"])["memory"]
    second = vault.remember("The VPN needs the hardware key")["memory"]  # into a folder that exists now
    assert second["path"].rsplit("/", 1)[0] == made["path"].rsplit("/", 1)[0]
    assert vault.update(made["id"], add_tags=["ops"])["changed"] is True
    assert vault.get(made["id"])["tags"] == ["db", "ops"]
    outside = tmp_path / "secret.md"
    outside.write_text("---\ntitle: Not a memory\n---\nA file outside the vault.\n")
    (vault.root / "link-out.md").symlink_to(outside)
    (vault.root / "inside.md").write_text("A note under two names.\n")
    (vault.root / "link-in.md").symlink_to(vault.root / "inside.md")
    vault.reconcile()
    assert vault.store.read("link-out.md") is None  # a symlink out of the vault is never read
    assert vault.store.read("link-in.md")[0] == b"A note under two names.\n"  # one inside is
    assert vault.search("outside the vault")["count"] == 0
    (vault.root / "elsewhere").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(VaultError, match="symlink"):
        vault.store.create("elsewhere", "n", b"must not land outside\n")
    assert not (tmp_path / "n.md").exists()
    assert_index_matches_files(vault)


def test_a_file_dated_after_2262_is_still_indexed_and_found(vault: Vault) -> None:
    """Its mtime in nanoseconds does not fit a signed 64-bit integer: the index stores
    it wrapped (``facts.signed64``), and the file is found, now and after a reopen."""
    (vault.root / "future.md").write_text("A note from a clock set far ahead.\n")
    far = 10**10  # the year 2286
    os.utime(vault.root / "future.md", (far, far))
    vault.reconcile()
    assert [h["path"] for h in vault.search("clock set far ahead")["hits"]] == ["future.md"]
    vault.close()
    with Vault(vault.root) as again:
        assert [h["path"] for h in again.search("clock set far ahead")["hits"]] == ["future.md"]
        assert_index_matches_files(again)


def test_a_symlink_loop_given_to_read_file_is_refused_by_name(vault: Vault) -> None:
    (vault.root / "loop.md").symlink_to(vault.root / "loop.md")
    with pytest.raises(PathRefused, match=r"^'loop.md' cannot be resolved .*give the path of a real file"):
        vault.read_file("loop.md")


def test_a_failure_after_the_swap_says_the_file_was_written_and_keeps_what_it_replaced(
    vault: Vault, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = vault.remember("The staging database resets on Sundays")["memory"]
    before = (vault.root / made["path"]).read_bytes()

    def fsync_fails(self: Store, folder: Path) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(Store, "fsync_dir", fsync_fails)
    with pytest.raises(VaultError, match=rf"^{made['path']} was written, but then: Input/output error\. What it "
                                         "replaced is kept"):
        vault.update(made["id"], add_tags=["ops"])
    monkeypatch.undo()
    assert "ops" in (vault.root / made["path"]).read_text()
    assert before in [p.read_bytes() for p in vault.store.parked_dir.glob("*.md")]  # the old bytes are not lost


def test_a_batch_whose_syncfs_fails_imports_nothing(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    import ctypes

    vault.remember("Already here before the import.")
    files = _files(vault.root)

    def syncfs_fails(_fd: int) -> int:
        ctypes.set_errno(errno.EIO)
        return -1

    monkeypatch.setattr(store_mod, "_syncfs", syncfs_fails)
    with pytest.raises(VaultError, match=r"^Could not stage the import: Input/output error\. Nothing was changed"):
        vault.import_memories([{"content": "Zanzibar ledger one."}, {"content": "Zanzibar ledger two."}])
    monkeypatch.undo()
    assert _files(vault.root) == files
    assert vault.search("Zanzibar ledger")["count"] == 0
    assert_index_matches_files(vault)


def test_a_damaged_parked_record_is_named_and_writes_go_on(vault: Vault, caplog: pytest.LogCaptureFixture) -> None:
    """A record this user's register does not list (damaged, planted) is set aside with
    its bytes, named, and writes go on."""
    made = vault.remember("The staging database resets on Sundays")["memory"]
    vault.store.parked_dir.mkdir(parents=True, exist_ok=True)
    damaged = vault.store.parked_dir / "1000-deadbeef.json"  # named long ago: past the grace time
    damaged.write_text("{half a record")
    (vault.store.parked_dir / "1000-deadbeef.md").write_text("bytes a crash left\n")
    assert vault.update(made["id"], add_tags=["ops"])["changed"] is True
    assert ".index/parked/1000-deadbeef.json was not acted on" in caplog.text
    [kept] = (vault.root / ".index" / "set-aside").glob("parked-*/record/1000-deadbeef.md")
    assert kept.read_text() == "bytes a crash left\n"  # nothing deleted


def test_without_syncfs_an_import_is_made_durable_file_by_file_and_lands(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_mod, "_syncfs", None)  # not Linux: each file and folder is fsynced instead
    result = vault.import_memories([{"content": "Zanzibar ledger one."}, {"content": "Zanzibar ledger two."}])
    assert result["imported"] == 2
    assert vault.search("Zanzibar ledger")["count"] == 2
    assert_index_matches_files(vault)


def test_init_that_cannot_name_its_files_says_why_and_leaves_no_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_memory.disk import locking

    def full(_src: Path, _dst: Path) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(locking, "move_no_replace", full)
    with pytest.raises(VaultError, match=r"^Could not write \.gitignore: the disk is full\. Nothing was changed"):
        Vault.init(tmp_path / "new-vault")
    assert _leftovers(tmp_path / "new-vault") == []
