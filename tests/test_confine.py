"""The confinement rule for the paths a record names (``confine.py``), over generated
paths: every spelling of ``.git`` git itself refuses on checkout, look-alikes, dot
segments, and a vault holding symlinked folders and a ``.git`` file with ``gitdir:``.
Whatever the rule accepts must resolve inside the vault, through no symlinked folder,
in no hidden folder: no generated path may escape."""

from __future__ import annotations

import itertools
import os
import random
from pathlib import Path

import pytest

from agent_memory.trust import confine
from agent_memory.errors import PathRefused

SAFE = ["a", "people", "2026", "Ünïcode", "git", "a.git", "hooks", "notes~draft", "x y"]
# Each is refused wherever it stands: git's own list (verify_path: .git in any case, with
# trailing dots or spaces, HFS+-ignored code points, the NTFS short name), look-alikes
# after Unicode normalisation, dot segments, empty parts, streams, separators, controls.
HOSTILE = [
    ".git", ".GIT", ".Git", ".git.", ".git ", ".git. . ", "\u200c.git", ".g\u200dit", "\ufeff.git", ".gi\u200ct",
    "git~1", "GIT~1", "Git~12", "GIT~1.", "\uff0egit", "\u2024git", ".git::$INDEX_ALLOCATION", ".git:x",
    "..", ".", "", "a\\..\\.git", ".trash", ".index", ".obsidian", ".prompts", "x" * 256, "é" * 128, "a\x00b",
    "a\nb", ".hidden.md",
]
LINKS = ["linked", "inner", "sub", "looped"]  # made on disk by the vault fixture below
FINALS = ["x.md", "post-merge", "config.md", ".git", "GIT~1.md", "x.md.", "alias.md", "ok.md"]


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    """A vault with what a synced folder or a pull can bring: a real .git/, a subfolder
    whose .git is a file holding gitdir:, a symlinked folder out of the vault, one into
    .git/, a symlink loop, a memory that is a symlink into .git/ and one to a memory."""
    root = tmp_path / "vault"
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n")
    (root / "people").mkdir()
    (root / "people" / "priya.md").write_text("Priya.\n")
    (root / "sub").mkdir()
    (root / "sub" / ".git").write_text("gitdir: ../.git\n")
    (tmp_path / "outside").mkdir()
    (root / "linked").symlink_to(tmp_path / "outside")
    (root / "inner").symlink_to(root / ".git")
    (root / "looped").symlink_to(root / "looped")
    (root / "alias.md").symlink_to(root / ".git" / "config")
    (root / "ok.md").symlink_to(root / "people" / "priya.md")
    return root


def generated() -> list[str]:
    """Every path of up to two folders and a last part from the tables, and a seeded
    sample of deeper ones joined with dot segments and look-alikes."""
    parts = SAFE + HOSTILE + LINKS
    out = [*FINALS, *(f"{p}/{f}" for p in parts for f in FINALS)]
    out += [f"{a}/{b}/{f}" for a, b in itertools.product(parts, repeat=2) for f in FINALS[:4]]
    rng = random.Random(20261205)
    for _ in range(3000):
        depth = rng.randint(3, 6)
        out.append("/".join(rng.choice(parts) for _ in range(depth)) + "/" + rng.choice(FINALS))
    out += ["/etc/passwd.md", "a/../.git/hooks/x.md", "./.git/./hooks/x.md", ".git/hooks/../../x.md", "a//x.md",
            "a/", "", "sub/.git/hooks/x.md", "inner/hooks/post-merge", "linked/x.md"]
    return out


def _escapes(root: Path, rel: str) -> str | None:
    """How an accepted path escapes, or None: it must resolve to the very path it names
    under the real vault (no symlinked folder on the way), in no hidden folder, and a
    last-part symlink must lead to a memory path of the vault."""
    real_root = os.path.realpath(root)
    parent = os.path.realpath(os.path.join(root, os.path.dirname(rel)))
    if parent != os.path.join(real_root, os.path.dirname(rel)).rstrip("/"):
        return f"its folder resolves to {parent}"
    target = os.path.realpath(os.path.join(root, rel))
    inside = os.path.relpath(target, real_root)
    if inside.startswith(".."):
        return f"it resolves to {target}, outside the vault"
    if any(confine.folded(part).startswith(".") for part in inside.split(os.sep)):
        return f"it resolves to {inside}, in a hidden folder"
    return None


def test_no_generated_memory_path_escapes(vault: Path) -> None:
    accepted = refused = 0
    for rel in generated():
        try:
            confine.memory_path(vault, rel)
        except PathRefused:
            refused += 1
            continue
        assert confine.memory_problem(rel) is None
        assert _escapes(vault, rel) is None, f"{rel!r} was accepted but {_escapes(vault, rel)}"
        accepted += 1
    assert accepted > 300 and refused > 5000  # the tables reach both sides


def test_no_generated_trash_path_escapes(vault: Path) -> None:
    (vault / ".trash").mkdir()
    for rel in generated()[::7]:
        try:
            confine.trash_path(vault, f".trash/{rel}")
        except PathRefused:
            continue
        assert _escapes(vault / ".trash", rel) is None, f".trash/{rel!r} was accepted"
    (vault / ".trash").rmdir()
    (vault / ".trash").symlink_to(vault / "people")  # a .trash that is a symlink holds no trash path
    with pytest.raises(PathRefused, match="symlink"):
        confine.trash_path(vault, ".trash/x.md")


@pytest.mark.parametrize("part", HOSTILE)
def test_every_hostile_part_is_refused_wherever_it_stands(part: str) -> None:
    for rel in (f"{part}/x.md", f"a/{part}/x.md", f"a/b/{part}" if part.endswith(".md") else f"a/{part}/b/x.md"):
        assert confine.memory_problem(rel) is not None, rel


@pytest.mark.parametrize("rel", ["people/priya.md", "2026/07/20/a-fact.md", "Ünïcode/é.md", "git/notes.md",
                                 "a.git/x.md", "notes~draft/x.md", "x y/z.md"])
def test_ordinary_memory_paths_pass(rel: str) -> None:
    assert confine.memory_problem(rel) is None


def test_a_symlinked_memory_is_accepted_only_when_it_leads_to_a_memory(vault: Path) -> None:
    assert confine.memory_path(vault, "ok.md") == vault / "ok.md"
    with pytest.raises(PathRefused, match="no memory path"):
        confine.memory_path(vault, "alias.md")
