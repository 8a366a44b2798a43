"""Markdown links between notes (`[text](Note%20name.md)`, Obsidian's other link format):
followed like wikilinks (backlinks, related, recall's depth, doctor's broken links), and
rewritten by `mv` in the style they were written, every other byte kept."""

from __future__ import annotations

from pathlib import Path

from agent_memory.note.links import markdown_links
from agent_memory.vault.doctor import check_vault
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files


def write(vault: Vault, rel: str, text: str) -> Path:
    path = vault.root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_a_markdown_link_is_a_link_in_every_spelling_obsidian_writes() -> None:
    body = ("See [a](Three%20laws%20of%20motion.md), [b](<My Note.md#Heading>), [c](../Other/c.md \"title\"), "
            "[d](/top.md), [e](./sib.md), [web](https://example.com/x.md), ![image](pic.md), [pdf](doc.pdf), "
            "[out](../../outside.md), `[code](code.md)`.\n")
    assert markdown_links(body, "Projects/x.md") == [
        "Three laws of motion.md", "My Note.md", "Other/c.md", "top.md", "Projects/sib.md"]


def test_backlinks_related_and_broken_links_follow_markdown_links(vault: Vault) -> None:
    write(vault, "people/Priya Raman.md", "Leads billing.\n")
    write(vault, "projects/billing.md", "Owner: [Priya](../people/Priya%20Raman.md). Old: [x](gone.md).\n")
    write(vault, "notes/meeting.md", "Ask [Priya](<people/Priya Raman.md>) about invoices.\n")
    vault.reconcile()
    backlinks = vault.related("people/Priya Raman.md", direction="in")
    assert sorted(n["path"] for n in backlinks["nodes"][1:]) == ["notes/meeting.md", "projects/billing.md"]
    hits = vault.search("invoices", depth=1)
    assert "people/Priya Raman.md" in {n["path"] for n in hits["related"]["nodes"]}
    broken = next(c for c in check_vault(vault.root) if c.name == "broken links")
    assert [item for item in broken.items if "gone" in item] and not [i for i in broken.items if "Priya" in i]


def test_mv_rewrites_markdown_links_as_they_were_written_and_nothing_else(vault: Vault) -> None:
    write(vault, "people/Priya Raman.md", "Leads billing. Team page: [team](./team.md).\n")
    write(vault, "people/team.md", "The billing team.\n")
    relative = write(vault, "projects/billing.md",
                     "---\nowner: x\n---\nOwner: [Priya](../people/Priya%20Raman.md#Role), "
                     "web: [site](https://example.com/Priya%20Raman.md), `[code](../people/Priya%20Raman.md)`.\n")
    absolute = write(vault, "notes/meeting.md", "Ask [Priya](<people/Priya Raman.md>) and [P](/people/Priya%20Raman.md).\n")
    vault.reconcile()
    result = vault.move("people/Priya Raman.md", "staff/Priya R.md")
    assert sorted((r["path"], r["links"]) for r in result["rewritten"]) == [
        ("notes/meeting.md", 2), ("projects/billing.md", 1), ("staff/Priya R.md", 1)]
    assert relative.read_text() == ("---\nowner: x\n---\nOwner: [Priya](../staff/Priya%20R.md#Role), "
                                    "web: [site](https://example.com/Priya%20Raman.md), `[code](../people/Priya%20Raman.md)`.\n")
    assert absolute.read_text() == "Ask [Priya](<staff/Priya R.md>) and [P](/staff/Priya%20R.md).\n"
    # The moved note's own relative link still reaches the same note from its new folder.
    assert (vault.root / "staff" / "Priya R.md").read_text() == "Leads billing. Team page: [team](../people/team.md).\n"
    backlinks = vault.related("staff/Priya R.md", direction="in")
    assert sorted(n["path"] for n in backlinks["nodes"][1:]) == ["notes/meeting.md", "projects/billing.md"]
    outgoing = vault.related("staff/Priya R.md", direction="out")
    assert [n["path"] for n in outgoing["nodes"][1:]] == ["people/team.md"]
    assert_index_matches_files(vault)


def test_mv_keeps_the_moved_notes_plain_named_link_on_the_note_it_reached(vault: Vault) -> None:
    """A plain ``[o](Other.md)`` is found nearest first: from ``a/`` it reached
    ``a/Other.md``. Moved into ``b/``, beside another ``Other.md``, the same text would
    reach that one (and, read as a relative path as GitHub or VS Code read it, too), so
    the link is rewritten to reach the note it reached before; a plain link whose note
    is the same from the new folder is left as it was."""
    write(vault, "a/Other.md", "Other in a.\n")
    write(vault, "b/Other.md", "Other in b.\n")
    write(vault, "a/Unique.md", "Only one of these.\n")
    write(vault, "a/Mover.md", "See [o](Other.md) and [u](Unique.md).\n")
    vault.reconcile()
    result = vault.move("a/Mover.md", "b/Mover.md")
    assert (vault.root / "b" / "Mover.md").read_text() == "See [o](../a/Other.md) and [u](Unique.md).\n"
    assert result["rewritten"] == [{"path": "b/Mover.md", "links": 1}]
    outgoing = vault.related("b/Mover.md", direction="out")
    assert sorted(n["path"] for n in outgoing["nodes"][1:]) == ["a/Other.md", "a/Unique.md"]
    assert_index_matches_files(vault)


def test_mv_rebases_the_moved_notes_relative_links_to_attachments(vault: Vault) -> None:
    """The moved note's ``./`` and ``../`` links to what is not a note (an image, a PDF)
    are read from its folder too: moved elsewhere, they pointed at nothing. They are
    rebased like its note links; a plain name, a web address and code stay as written."""
    (vault.root / "a").mkdir()
    (vault.root / "a" / "pic one.png").write_bytes(b"\x89PNG")
    (vault.root / "files").mkdir()
    (vault.root / "files" / "doc.pdf").write_bytes(b"%PDF")
    write(vault, "a/Mover.md", "![pic](./pic%20one.png \"t\") [doc](../files/doc.pdf#page=2) ![x](<./pic one.png>) "
                               "[plain](doc.pdf) [web](https://example.com/x.png) `![c](./pic.png)`\n")
    vault.reconcile()
    result = vault.move("a/Mover.md", "b/c/Mover.md")
    assert (vault.root / "b" / "c" / "Mover.md").read_text() == (
        "![pic](../../a/pic%20one.png \"t\") [doc](../../files/doc.pdf#page=2) ![x](<../../a/pic one.png>) "
        "[plain](doc.pdf) [web](https://example.com/x.png) `![c](./pic.png)`\n")
    assert result["rewritten"] == [{"path": "b/c/Mover.md", "links": 3}]
    assert_index_matches_files(vault)
