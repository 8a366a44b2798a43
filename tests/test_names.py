"""Notes have names (SPEC §2): the file name, aliases and a title key are searched
with title weight; a memory can be named as Obsidian resolves [[Note name]]; nested tags."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from agent_memory.errors import InvalidInput
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files

CORPORA_DIR = Path(__file__).resolve().parents[2] / "shared" / "corpora"


def write(vault: Vault, rel: str, text: str) -> None:
    path = vault.root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_a_note_is_found_by_its_name_and_titled_by_it(vault: Vault) -> None:
    write(vault, "places/Kessel Run.md", "Body of the spaceport note.\n")
    write(vault, "places/Other.md", "A note that mentions a kessel once, and a run.\n")
    vault.reconcile()
    hits = vault.search("Kessel Run")["hits"]
    assert hits[0]["path"] == "places/Kessel Run.md" and hits[0]["title"] == "Kessel Run"
    assert_index_matches_files(vault)


def test_an_alias_finds_its_note_first(vault: Vault) -> None:
    write(vault, "people/Priya Raman.md", "---\naliases: [PR, The billing lead]\n---\nLeads billing at ACME.\n")
    write(vault, "notes/billing.md", "The billing lead changes every year; billing is hard.\n")
    vault.reconcile()
    assert vault.search("the billing lead")["hits"][0]["path"] == "people/Priya Raman.md"
    assert vault.search("The Billing Lead?")["hits"][0]["path"] == "people/Priya Raman.md"
    # The alias removed by hand: the name no longer puts the note first.
    write(vault, "people/Priya Raman.md", "---\naliases: [PR]\n---\nLeads billing at ACME.\n")
    vault.reconcile()
    assert vault.search("the billing lead")["hits"][0]["path"] == "notes/billing.md"
    assert_index_matches_files(vault)


@pytest.mark.parametrize("name", ["Kessel Run", "kessel run", "places/Kessel Run", "KESSEL RUN.md"])
def test_a_memory_is_taken_by_its_note_name(vault: Vault, name: str) -> None:
    write(vault, "places/Kessel Run.md", "Body of the spaceport note.\n")
    vault.reconcile()
    assert vault.get(name)["path"] == "places/Kessel Run.md"
    assert vault.update(name, add_tags=["place"])["memory"]["tags"] == ["place"]


def test_a_name_written_in_nfd_resolves(vault: Vault) -> None:
    nfd = unicodedata.normalize("NFD", "Café notes.md")
    write(vault, nfd, "Where we meet.\n")
    vault.reconcile()
    assert vault.get("café notes")["content"] == "Where we meet.\n"


def test_an_ambiguous_name_lists_the_candidates(vault: Vault) -> None:
    write(vault, "a/Home.md", "One home.\n")
    write(vault, "b/Home.md", "Another home.\n")
    vault.reconcile()
    with pytest.raises(InvalidInput, match=r"2 notes are named 'Home': a/Home.md, b/Home.md"):
        vault.get("Home")
    assert vault.get("b/Home")["content"] == "Another home.\n"


def test_a_tag_filter_matches_nested_tags(vault: Vault) -> None:
    backend = vault.remember("The backend team owns the billing API", tags=["team/backend"])["memory"]
    vault.remember("The teamwork offsite is in May", tags=["teamwork"])
    assert [m["id"] for m in vault.list(tags=["team"])["memories"]] == [backend["id"]]
    assert [h["id"] for h in vault.search("billing", tags=["team"])["hits"]] == [backend["id"]]


def test_every_unique_english_obsidian_help_note_is_found_by_its_name(tmp_path: Path) -> None:
    """The whole set, not a sample: each English note whose name is unique is in the top 3
    for its own name."""
    root = CORPORA_DIR / "obsidian-help" / "en"
    if not root.is_dir():
        pytest.skip(f"the obsidian-help corpus is not at {root} (it is not part of the repository)")
    vault = Vault(root, index_dir=tmp_path / "index")
    try:
        names: dict[str, list[str]] = {}
        for path in root.rglob("*.md"):
            rel = path.relative_to(root).as_posix()
            if not any(part.startswith(".") for part in rel.split("/")):
                names.setdefault(path.stem.casefold(), []).append(rel)
        unique = {rels[0] for rels in names.values() if len(rels) == 1}
        missed = [rel for rel in sorted(unique)
                  if rel not in [h["path"] for h in vault.search(Path(rel).stem, limit=3)["hits"]]]
        assert len(unique) > 150
        assert missed == [], f"{len(missed)} of {len(unique)} notes not in the top 3 for their name: {missed[:10]}"
    finally:
        vault.close()


def test_a_description_property_is_searched_like_the_body(vault: Vault) -> None:
    write(vault, "tools/Canvas.md", "---\ndescription: An infinite whiteboard for laying out ideas\n---\nSee the docs.\n")
    vault.reconcile()
    assert [h["path"] for h in vault.search("infinite whiteboard")["hits"]] == ["tools/Canvas.md"]
    assert "whiteboard" not in vault.get("tools/Canvas.md")["content"]  # the content is the body alone
    assert_index_matches_files(vault)


def test_init_in_an_obsidian_vault_proposes_a_memories_folder_and_writes_it_when_asked(tmp_path: Path) -> None:
    from conftest import run_cli

    notes = tmp_path / "notes"
    (notes / ".obsidian").mkdir(parents=True)
    proposed = run_cli("init", vault=notes)
    assert proposed.returncode == 0 and "--memories-folder Agent" in proposed.stderr
    assert not (notes / ".agent-memory.toml").exists()
    done = run_cli("init", "--memories-folder", "Agent", vault=notes)
    assert done.returncode == 0, done.stderr
    assert "memories-folder" not in done.stderr
    added = run_cli("add", "A fact an agent learned", vault=notes)
    assert added.returncode == 0, added.stderr
    assert [p.relative_to(notes).parts[0] for p in notes.rglob("*.md")] == ["Agent"]
    refused = run_cli("init", "--memories-folder", "../outside", vault=tmp_path / "other")
    assert refused.returncode == 1 and "memories.folder" in refused.stderr
