"""The file format as tables: what a file says (note.parse), how the tool changes one
(note.patch: only the keys that change, every other byte kept) and how it writes a new
one (note.render: deterministic, and it parses back to what was written)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from agent_memory import limits
from agent_memory.note import parse as parsing
from agent_memory.note.links import BODY_LINK_RELATION
from agent_memory.note.parse import Note, derive_title
from agent_memory.note.patch import patch
from agent_memory.note.render import render_new, to_utc
from agent_memory.note.tags import as_tag_list, normalise_tag


def parse(text: str | bytes, path: str = "notes/x.md") -> Note:
    return parsing.parse(text if isinstance(text, bytes) else text.encode("utf-8"), path)


# --------------------------------------------------------------------------- front matter


FRONT_MATTER_CASES = [
    # name, file text, expected meta, expected body, expected problem (substring) or None
    ("plain", "---\nid: a1\ntags: [x]\n---\nBody.\n", {"id": "a1", "tags": ["x"]}, "Body.\n", None),
    ("bom", "\ufeff---\nid: a1\n---\nBody.\n", {"id": "a1"}, "Body.\n", None),
    ("crlf", "---\r\nid: a1\r\ntags: [x, y]\r\n---\r\nBody.\r\n", {"id": "a1", "tags": ["x", "y"]}, "Body.\r\n", None),
    ("bom and crlf", "\ufeff---\r\nid: a1\r\n---\r\nBody.\r\n", {"id": "a1"}, "Body.\r\n", None),
    ("empty front matter", "---\n---\nBody.\n", {}, "Body.\n", None),
    ("blank front matter", "---\n\n---\nBody.\n", {}, "Body.\n", None),
    ("no front matter", "Body only.\n", {}, "Body only.\n", None),
    ("closing dots", "---\nid: a1\n...\nBody.\n", {"id": "a1"}, "Body.\n", None),
    ("fence with trailing spaces", "--- \nid: a1\n---  \nBody.\n", {"id": "a1"}, "Body.\n", None),
    ("nothing after the fence", "---\nid: a1\n---", {"id": "a1"}, "", None),
    ("a later --- is body", "---\nid: a1\n---\nabove\n---\nbelow\n", {"id": "a1"}, "above\n---\nbelow\n", None),
    ("unclosed fence", "---\nid: a1\nBody.\n", {}, "---\nid: a1\nBody.\n", "not closed"),
    ("non-string keys", "---\non: push\nyes: 1\n2024: a year\n---\nB\n", {"on": "push", "yes": 1, "2024": "a year"}, "B\n", None),
    ("nested non-string keys", "---\nci:\n  on: [push]\n  3: three\n---\nB\n", {"ci": {"on": ["push"], "3": "three"}}, "B\n", None),
    ("list front matter", "---\n- a\n- b\n---\nB\n", {}, "B\n", "must be a mapping"),
    ("scalar front matter", "---\njust words\n---\nB\n", {}, "B\n", "must be a mapping"),
    ("broken yaml", "---\ntags: [a, b\n---\nStill indexed.\n", {}, "Still indexed.\n", "broken YAML"),
    ("tab-indented yaml", "---\nid: a1\n\tbad: x\n---\nB\n", {}, "B\n", "broken YAML"),
    ("dates become text", "---\nday: 2026-07-20\n---\nB\n", {"day": "2026-07-20"}, "B\n", None),
]


@pytest.mark.parametrize(
    "text, meta, body, problem", [c[1:] for c in FRONT_MATTER_CASES], ids=[c[0] for c in FRONT_MATTER_CASES]
)
def test_front_matter_is_read_as_far_as_it_can_be(text: str, meta: dict, body: str, problem: str | None) -> None:
    note = parse(text)
    assert note.meta == meta
    assert note.body == body
    if problem is None:
        assert note.problems == []
    else:
        assert len(note.problems) == 1 and problem in note.problems[0]


def test_invalid_utf8_is_read_with_replacement_and_reported() -> None:
    note = parse(b"---\nid: a1\n---\ncaf\xe9 au lait\n")
    assert note.id == "a1"
    assert "caf\ufffd au lait" in note.body
    assert note.problems == ["file is not valid UTF-8"]


def _bomb(levels: int) -> str:
    """A "billion laughs" front matter: each level is nine aliases of the one before."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "---\n" + "\n".join(lines) + "\n---\nThe body is still read.\n"


UNREADABLE_CASES = [
    # name, file (text or bytes), unreadable: whether the front matter could not be read
    # as written, so a tool must not patch the file
    ("plain", "---\nid: a1\ntags: [x]\n---\nBody.\n", False),
    ("no front matter", "Body only.\n", False),
    ("empty front matter", "---\n---\nBody.\n", False),
    ("comments only", "---\n# just a comment\n---\nBody.\n", False),
    ("bom and crlf", "\ufeff---\r\nid: a1\r\n---\r\nBody.\r\n", False),
    ("non-string keys", "---\non: push\n2024: a year\n---\nB\n", False),
    ("a bad timestamp is one key's problem", "---\ncreated: 2026-02-30T09:00:00Z\n---\nB\n", False),
    ("a date YAML cannot build loses the whole front matter", "---\nday: 2026-02-30\n---\nB\n", True),
    ("conflict markers are flagged apart", "---\nid: a\n---\n<<<<<<< ours\nA\n=======\nB\n>>>>>>> theirs\n", False),
    ("aliases within the budget", "---\nd: &d {x: 1}\ne: {<<: *d, y: 2}\nf: [*d, *d]\n---\nB\n", False),
    ("a body that is a rule", "Text\n\n---\n", False),
    ("broken yaml", "---\ntags: [a, b\n---\nB\n", True),
    ("list front matter", "---\n- a\n- b\n---\nB\n", True),
    ("scalar front matter", "---\njust words\n---\nB\n", True),
    ("null front matter", "---\n~\n---\nB\n", True),
    ("not closed", "---\nid: a1\nBody.\n", True),
    ("an opening fence only", "---\n", True),
    ("the first bytes of a fence", "--", True),
    ("empty file", "", True),
    ("whitespace only", " \n\n", True),
    ("not utf-8", b"---\nid: a1\n---\ncaf\xe9\n", True),
    ("an alias bomb", _bomb(7), True),
    ("an alias inside what it names", "---\na: &a [1, *a]\n---\nB\n", True),
    ("nested deeper than the parser goes", "---\nk: " + "[" * 5000 + "]" * 5000 + "\n---\nB\n", True),
]


@pytest.mark.parametrize("text, unreadable", [c[1:] for c in UNREADABLE_CASES], ids=[c[0] for c in UNREADABLE_CASES])
def test_unreadable_says_whether_the_front_matter_was_read_as_written(text: str | bytes, unreadable: bool) -> None:
    note = parse(text)
    assert note.unreadable is unreadable
    if unreadable and text.strip():
        assert note.problems, "an unreadable file that holds something says why"


def test_an_alias_bomb_is_refused_and_the_body_is_still_read() -> None:
    # 7 levels: 4.8 million strings once expanded (deeper bombs, which took minutes and
    # gigabytes, are run in a subprocess with a memory cap in test_hostile_files.py)
    note = parse(_bomb(7))
    assert note.unreadable and note.meta == {}
    assert len(note.problems) == 1 and "aliases" in note.problems[0] and "limit" in note.problems[0]
    assert note.body == "The body is still read.\n"


def test_the_alias_budget_counts_what_expansion_adds(monkeypatch: pytest.MonkeyPatch) -> None:
    # 20 aliases of a 3-node list of 4-character strings: each adds 1 + 3 * (1 + 4) = 16.
    text = "---\nbase: &b [abcd, efgh, ijkl]\nuses: [" + ", ".join(["*b"] * 20) + "]\n---\nB\n"
    monkeypatch.setattr(limits, "MAX_YAML_ALIAS_EXPANSION", 20 * 16)
    assert parse(text).meta["uses"] == [["abcd", "efgh", "ijkl"]] * 20
    monkeypatch.setattr(limits, "MAX_YAML_ALIAS_EXPANSION", 20 * 16 - 1)
    assert parse(text).unreadable and parse(text).meta == {}


def test_merge_keys_are_counted_like_any_alias(monkeypatch: pytest.MonkeyPatch) -> None:
    levels = ["m0: &m0 {a: 1, b: 2}"] + [f"m{i}: &m{i} {{<<: [*m{i - 1}], k{i}: {i}}}" for i in range(1, 30)]
    text = "---\n" + "\n".join(levels) + "\n---\nB\n"
    note = parse(text)  # each level repeats all before it: quadratic, well within the budget
    assert not note.unreadable and note.meta["m29"]["k29"] == 29 and note.meta["m29"]["a"] == 1
    monkeypatch.setattr(limits, "MAX_YAML_ALIAS_EXPANSION", 100)
    assert parse(text).unreadable


@pytest.mark.parametrize(
    "text",
    ["---\nid: a1\n---\nB\n", "---\nid: 'a1'\n---\nB\n", '---\nid: "a1"\n---\nB\n', "---\nid: a1   # mine\n---\nB\n"],
)
def test_own_id(text: str) -> None:
    note = parse(text)
    assert (note.id, note.own_id) == ("a1", True)


@pytest.mark.parametrize("text", ["No front matter.\n", "---\nid:\n---\nB\n", "---\nid: ''\n---\nB\n", "---\n- a\n---\nB\n"])
def test_a_file_without_id_has_its_path_as_id(text: str) -> None:
    note = parse(text, "people/priya.md")
    assert (note.id, note.own_id) == ("people/priya.md", False)


@pytest.mark.parametrize(
    "text, namespace",
    [("B\n", "default"), ("---\nnamespace: support\n---\nB\n", "support"), ("---\nnamespace: ''\n---\nB\n", "default"),
     ("---\nnamespace: '  ops '\n---\nB\n", "ops")],
)
def test_namespace(text: str, namespace: str) -> None:
    assert parse(text).namespace == namespace


# --------------------------------------------------------------------------- tags and aliases


TAG_CASES = [
    ("flow list", "---\ntags: [customer, Deploy]\n---\nB\n", ["customer", "deploy"]),
    ("block list", "---\ntags:\n  - customer\n  - deploy\n---\nB\n", ["customer", "deploy"]),
    ("one string", "---\ntags: customer\n---\nB\n", ["customer"]),
    ("comma string", "---\ntags: customer, deploy,ops\n---\nB\n", ["customer", "deploy", "ops"]),
    ("space string", "---\ntags: customer deploy\n---\nB\n", ["customer", "deploy"]),
    ("hash prefixed", "---\ntags: ['#Customer', '#deploy']\n---\nB\n", ["customer", "deploy"]),
    ("duplicates by case", "---\ntags: [A, a, B]\n---\nB\n", ["a", "b"]),
    ("null and empty items", "---\ntags: [a, null, '', b]\n---\nB\n", ["a", "b"]),
    ("numbers", "---\ntags: [2024, q3]\n---\nB\n", ["2024", "q3"]),
    ("no tags key", "---\nid: a1\n---\nB\n", []),
    ("tags: null", "---\ntags:\n---\nB\n", []),
    ("nested tags", "---\ntags: [project/acme]\n---\nB\n", ["project/acme"]),
]


@pytest.mark.parametrize("text, tags", [c[1:] for c in TAG_CASES], ids=[c[0] for c in TAG_CASES])
def test_front_matter_tags(text: str, tags: list[str]) -> None:
    assert parse(text).tags == tags


INLINE_TAG_CASES = [
    ("a tag", "Call #ACME today.", ["acme"]),
    ("at line start", "#todo call them", ["todo"]),
    ("nested", "see #project/acme.", ["project/acme"]),
    ("with dash and underscore", "#follow-up #on_call", ["follow-up", "on_call"]),
    ("unicode", "#café", ["café"]),
    ("heading is no tag", "# Heading\n## Sub heading", []),
    ("all digits is no tag", "issue #123 and #2024/05", []),
    ("digits with letters", "#y2024", ["y2024"]),
    ("inline code", "run `grep #notatag` now", []),
    ("fenced code", "```\n#include <stdio.h>\n```\n#real", ["real"]),
    ("tilde fenced code", "~~~\n#include <stdio.h>\n~~~\n#real", ["real"]),
    ("inside a word or url", "a#b http://x.org/page#frag", []),
    ("trailing punctuation", "done #shipped, then #next.", ["shipped", "next"]),
    ("repeated", "#a #A #a", ["a"]),
    ("after any whitespace", "x\n#one\ty\t#two\u00a0#three\u3000#four\r\n#five", ["one", "two", "three", "four", "five"]),
    ("not after a letter or mark", "x#no é#no ,#no", []),
    ("typographic quotes and dashes", "\u201csee #project\u201d and #ops\u2014today, #later\u2026", ["project", "ops", "later"]),
    ("CJK and full-width stops", "\u5219\u5c06\u5c55\u793a #tag\u3002 #\u6807\u7b7e\uff0c #\u65e5\u672c\u8a9e\u300d", ["tag", "\u6807\u7b7e", "\u65e5\u672c\u8a9e"]),
    ("Arabic and Devanagari stops", "#\u0645\u0631\u062d\u0628\u0627\u060c #\u0928\u092e\u0938\u094d\u0924\u0947\u0964", ["\u0645\u0631\u062d\u0628\u0627", "\u0928\u092e\u0938\u094d\u0924\u0947"]),
    ("a Catalan middle dot stays", "#col\u00b7lecci\u00f3 #intel\u00b7lig\u00e8ncia.", ["col\u00b7lecci\u00f3", "intel\u00b7lig\u00e8ncia"]),
    ("a keycap or a lone mark is no tag", "#\ufe0f\u20e3 #\u0301x #\u200dx #1\ufe0f\u20e3 #\U0001f680",
     ["1\ufe0f\u20e3", "\U0001f680"]),
    ("joiners inside a word stay", "#\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645 #\U0001f468\u200d\U0001f4bb", ["\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645", "\U0001f468\u200d\U0001f4bb"]),
]


@pytest.mark.parametrize("body, tags", [c[1:] for c in INLINE_TAG_CASES], ids=[c[0] for c in INLINE_TAG_CASES])
def test_inline_tags(body: str, tags: list[str]) -> None:
    assert parse(body + "\n").tags == tags


def test_inline_tags_add_to_front_matter_tags_without_repeats() -> None:
    note = parse("---\ntags: [customer]\n---\nCall #customer about #billing.\n")
    assert note.tags == ["customer", "billing"]


@pytest.mark.parametrize(
    "text, aliases",
    [("---\naliases: [Pri, P. Rao]\n---\nB\n", ["Pri", "P. Rao"]), ("---\naliases: Pri\n---\nB\n", ["Pri"]),
     ("---\naliases: Pri, Priya R\n---\nB\n", ["Pri", "Priya R"]), ("---\naliases:\n  - Pri\n---\nB\n", ["Pri"]),
     ("B\n", [])],
)
def test_aliases(text: str, aliases: list[str]) -> None:
    assert parse(text).aliases == aliases


# --------------------------------------------------------------------------- links


LINK_CASES = [
    ("plain", "See [[acme-billing]].", ["acme-billing"]),
    ("alias", "See [[acme-billing|billing]].", ["acme-billing"]),
    ("heading", "See [[acme-billing#Contacts]].", ["acme-billing"]),
    ("heading and alias", "See [[acme-billing#Contacts|the contacts]].", ["acme-billing"]),
    ("block ref", "See [[acme-billing#^abc123]].", ["acme-billing"]),
    ("path", "See [[people/priya]] and [[people/priya.md]].", ["people/priya", "people/priya.md"]),
    ("embed", "![[diagram.png]]", ["diagram.png"]),
    ("same-file heading is no link", "See [[#Contacts]].", []),
    ("in code is no link", "`[[not-a-link]]`\n```\n[[nor-this]]\n```", []),
    ("escaped pipe in a table", "| [[acme-billing\\|billing]] |", ["acme-billing"]),
    ("repeated once", "[[a]] [[a|again]]", ["a"]),
]


@pytest.mark.parametrize("body, targets", [c[1:] for c in LINK_CASES], ids=[c[0] for c in LINK_CASES])
def test_body_wikilinks(body: str, targets: list[str]) -> None:
    note = parse(body + "\n")
    assert note.links == [(BODY_LINK_RELATION, t) for t in targets]


def test_front_matter_relation_properties_are_links() -> None:
    note = parse(
        '---\nid: a1\nrelated_to: ["[[acme-billing]]", "[[people/priya|Priya]]"]\n'
        "supersedes: '[[old-deploy-rule]]'\nurl: https://example.org\ncount: 3\n---\nBody [[x]].\n"
    )
    assert note.links == [
        ("related_to", "acme-billing"),
        ("related_to", "people/priya"),
        ("supersedes", "old-deploy-rule"),
        (BODY_LINK_RELATION, "x"),
    ]


def test_reserved_keys_are_not_relations() -> None:
    note = parse("---\ntitle: '[[not a relation]]'\naliases: ['[[nor this]]']\n---\nB\n")
    assert note.links == []


# --------------------------------------------------------------------------- titles


TITLE_CASES = [
    ("title key", "---\ntitle: Deploy rules\n---\n# A heading\nText.\n", "Deploy rules"),
    ("numeric title key", "---\ntitle: 2027\n---\nText.\n", "2027"),
    ("empty title key falls back", "---\ntitle: ''\n---\n# A heading\n", "A heading"),
    ("first heading", "\n\n# Deploy rules #\nText.\n", "Deploy rules"),
    ("second-level heading", "## Deploy rules\nText.\n", "Deploy rules"),
    ("first words", "Customer **ACME** prefers deploys on Fridays.\nMore.\n", "Customer ACME prefers deploys on Fridays."),
    ("long first line is shortened", "word " * 40, ("word " * 16).strip() + "…"),
    ("empty body: file name", "---\nid: a1\n---\n", "x"),
    ("links read as shown", "Call [[people/priya|Priya]] about [[acme-billing]] and [the docs](https://x.org/a).\n",
     "Call Priya about acme-billing and the docs."),
    ("link in a heading", "# Meeting with [[people/priya|Priya]]\n", "Meeting with Priya"),
]


@pytest.mark.parametrize("text, title", [c[1:] for c in TITLE_CASES], ids=[c[0] for c in TITLE_CASES])
def test_title(text: str, title: str) -> None:
    """A memory in the tool's dated layout is titled by its text."""
    assert parse(text, "2026/07/20/x.md").title == title


HAND_NAMED_TITLES = [
    ("no heading: the note's name", "Body of the spaceport note.\n", "places/Kessel Run.md", "Kessel Run"),
    ("a first-line heading wins", "# The Kessel Run\nBody.\n", "places/Kessel Run.md", "The Kessel Run"),
    ("a title key wins", "---\ntitle: Smuggling\n---\nBody.\n", "places/Kessel Run.md", "Smuggling"),
    ("a heading further down is not the title", "Intro line.\n# Later\n", "Home.md", "Home"),
    ("in the dated layout under a folder: first words", "Customer ACME deploys.\n", "Agent/2026/07/20/x.md",
     "Customer ACME deploys."),
]


@pytest.mark.parametrize("text, path, title", [c[1:] for c in HAND_NAMED_TITLES], ids=[c[0] for c in HAND_NAMED_TITLES])
def test_a_hand_named_file_is_titled_by_its_name(text: str, path: str, title: str) -> None:
    """Obsidian's note name is its file name; most notes have no H1."""
    assert parse(text, path).title == title


# --------------------------------------------------------------------------- timestamps


TIME_CASES = [
    ("canonical", "2026-07-20T09:00:00Z", "2026-07-20T09:00:00Z"),
    ("positive offset", "2026-07-20T11:00:00+02:00", "2026-07-20T09:00:00Z"),
    ("negative offset", "2026-07-20T04:00:00-05:00", "2026-07-20T09:00:00Z"),
    ("offset crossing a day", "2026-07-21T01:30:00+05:30", "2026-07-20T20:00:00Z"),
    ("fraction of a second", "2026-07-20T09:00:00.789Z", "2026-07-20T09:00:00Z"),
    ("space separator", "2026-07-20 09:00:00", "2026-07-20T09:00:00Z"),
    ("no zone means UTC", "2026-07-20T09:00:00", "2026-07-20T09:00:00Z"),
    ("a date", "2026-07-20", "2026-07-20T00:00:00Z"),
    ("quoted with offset", "'2026-07-20T11:00:00+02:00'", "2026-07-20T09:00:00Z"),
]


@pytest.mark.parametrize("written, canonical", [c[1:] for c in TIME_CASES], ids=[c[0] for c in TIME_CASES])
@pytest.mark.parametrize("key", ["created", "updated", "expires"])
def test_timestamps_are_canonical_utc(key: str, written: str, canonical: str) -> None:
    own = "id: 01jd8x4k2m9q7r3t\n" if key == "expires" else ""  # only the tool's own memories expire
    note = parse(f"---\n{own}{key}: {written}\n---\nB\n")
    assert getattr(note, key) == canonical
    assert note.problems == []


def test_timestamp_in_meta_is_json_ready() -> None:
    note = parse("---\ncreated: 2026-07-20T11:00:00+02:00\nday: 2026-07-20\n---\nB\n")
    assert note.meta == {"created": "2026-07-20T09:00:00Z", "day": "2026-07-20"}


@pytest.mark.parametrize("written", ["next tuesday", "20/07/2026", "[2026]"])
def test_a_bad_timestamp_is_a_problem_not_a_crash(written: str) -> None:
    note = parse(f"---\ncreated: {written}\n---\nB\n")
    assert note.created is None
    assert len(note.problems) == 1 and note.problems[0].startswith("created:")


# --------------------------------------------------------------------------- conflicts


@pytest.mark.parametrize(
    "text, conflict",
    [
        ("<<<<<<< HEAD\nFridays\n=======\nThursdays\n>>>>>>> origin/main\n", True),
        ("---\nid: a1\n---\nA\n<<<<<<< ours\nx\n=======\ny\n>>>>>>> theirs\n", True),
        ("Just <<<<<<< inline, not at a line start >>>>>>>\n", False),
        ("<<<<<<< HEAD\nhalf a conflict\n", False),
        ("Plain text.\n", False),
    ],
)
def test_conflict_markers(text: str, conflict: bool) -> None:
    assert parse(text).conflict is conflict


# --------------------------------------------------------------------------- patch


HAND_WRITTEN = (
    "---\n"
    "title: Priya   # who she is\n"
    "zeta: 1\n"
    "aliases:\n"
    "  - Pri\n"
    "# a comment line\n"
    "tags:\n"
    "  - person\n"
    "  - acme\n"
    "alpha: [x, y]\n"
    "created: 2026-07-20T11:00:00+02:00\n"
    "---\n"
    "Priya leads billing.  \n"
    "\n"
    "Trailing blank lines stay.\n\n\n"
)


def test_patch_without_changes_is_byte_identical() -> None:
    assert patch(HAND_WRITTEN, {}) == HAND_WRITTEN


def test_patch_rewrites_only_the_changed_key() -> None:
    out = patch(HAND_WRITTEN, {"zeta": 2})
    assert out == HAND_WRITTEN.replace("zeta: 1\n", "zeta: 2\n")


def test_patch_keeps_block_list_style_of_a_changed_list() -> None:
    out = patch(HAND_WRITTEN, {"tags": ["person", "acme", "lead"]})
    assert out == HAND_WRITTEN.replace("  - acme\n", "  - acme\n  - lead\n")
    assert parse(out).tags == ["person", "acme", "lead"]


def test_patch_adds_a_new_key_at_the_end_of_the_front_matter() -> None:
    out = patch(HAND_WRITTEN, {"updated": "2026-07-21T09:00:00Z"})
    assert out == HAND_WRITTEN.replace("+02:00\n---\n", "+02:00\nupdated: 2026-07-21T09:00:00Z\n---\n")


def test_patch_removes_a_key_with_its_block() -> None:
    out = patch(HAND_WRITTEN, {"aliases": None})
    assert out == HAND_WRITTEN.replace("aliases:\n  - Pri\n", "")
    assert parse(out).aliases == []


def test_patch_removing_an_absent_key_changes_nothing() -> None:
    assert patch(HAND_WRITTEN, {"expires": None}) == HAND_WRITTEN


def test_patch_replaces_the_body_and_keeps_the_front_matter() -> None:
    out = patch(HAND_WRITTEN, {}, body="New body.")
    head = HAND_WRITTEN[: HAND_WRITTEN.index("---\nPriya") + 4]
    assert out == head + "New body.\n"


def test_patch_keeps_crlf_and_bom() -> None:
    text = "\ufeff" + HAND_WRITTEN.replace("\n", "\r\n")
    out = patch(text, {"zeta": 2, "source": "call"}, body="Line one\nLine two")
    head = text[: text.index("---\r\nPriya")]
    assert out.startswith("\ufeff---\r\n")
    assert "\n" not in out.replace("\r\n", "")
    assert out == head.replace("zeta: 1", "zeta: 2") + "source: call\r\n---\r\nLine one\r\nLine two\r\n"
    note = parse(out)
    assert (note.meta["zeta"], note.source, note.tags) == (2, "call", ["person", "acme"])


def test_patch_keeps_the_body_bytes_exactly() -> None:
    body = "  indented\r\nmixed\nline ends\t\n\n# heading\n---\nnot a fence\n\n\n"
    text = "---\nid: a1\nfoo: bar\n---\n" + body
    out = patch(text, {"foo": "baz", "tags": ["t"]})
    assert out == "---\nid: a1\nfoo: baz\ntags: [t]\n---\n" + body


def test_patch_adds_front_matter_to_a_file_without_any() -> None:
    assert patch("Just a body.\n", {"tags": ["a"]}) == "---\ntags: [a]\n---\nJust a body.\n"
    assert patch("\ufeffA body.\r\n", {"id": "a1"}) == "\ufeff---\r\nid: a1\r\n---\r\nA body.\r\n"


def test_patch_fills_empty_front_matter() -> None:
    assert patch("---\n---\nB\n", {"tags": ["a"]}) == "---\ntags: [a]\n---\nB\n"


def test_patch_finds_quoted_keys_and_leaves_nested_keys_alone() -> None:
    text = '---\nmeta:\n  tags: [nested]\n"tags": [top]\n---\nB\n'
    out = patch(text, {"tags": ["top", "more"]})
    assert out == '---\nmeta:\n  tags: [nested]\n"tags": [top, more]\n---\nB\n'


def test_patch_replaces_a_multi_line_flow_value() -> None:
    text = "---\ntags: [a,\n  b]\nnext: 1\n---\nB\n"
    assert patch(text, {"tags": ["c"]}) == "---\ntags: [c]\nnext: 1\n---\nB\n"


def test_patch_block_list_with_a_comment_inside_is_replaced_whole() -> None:
    text = "---\ntags:\n  - a\n# - retired\n  - b\n\n  - c\nnext: 1\n---\nB\n"
    out = patch(text, {"tags": ["a"]})
    assert out == "---\ntags:\n  - a\nnext: 1\n---\nB\n"
    assert patch(text, {"tags": None}) == "---\nnext: 1\n---\nB\n"


def test_patch_keeps_comments_after_a_changed_block() -> None:
    text = "---\ntags:\n  - a\n\n# about the next key\nnext: 1\n---\nB\n"
    out = patch(text, {"tags": ["a", "b"]})
    assert out == "---\ntags:\n  - a\n  - b\n\n# about the next key\nnext: 1\n---\nB\n"


# --------------------------------------------------------------------------- render_new


FIELDS = {
    "id": "01jd8x4k2m9q7r3t",
    "namespace": "support",
    "tags": ["customer", "deploy"],
    "created": "2026-07-20T09:00:00Z",
    "updated": "2026-07-20T09:00:00Z",
    "expires": "2026-08-20T09:00:00Z",
    "source": "user note 2026-07-20",
}
SPEC_FILE = (
    "---\n"
    "id: 01jd8x4k2m9q7r3t\n"
    "namespace: support\n"
    "tags: [customer, deploy]\n"
    "created: 2026-07-20T09:00:00Z\n"
    "updated: 2026-07-20T09:00:00Z\n"
    "expires: 2026-08-20T09:00:00Z\n"
    "source: user note 2026-07-20\n"
    "---\n"
    "Customer ACME prefers deploys on Fridays.\n"
)


def test_render_new_writes_the_spec_format() -> None:
    assert render_new(FIELDS, "Customer ACME prefers deploys on Fridays.") == SPEC_FILE


def test_render_new_has_a_fixed_key_order_whatever_the_dict_order() -> None:
    shuffled = dict(reversed(list(FIELDS.items())))
    assert render_new(shuffled, "Customer ACME prefers deploys on Fridays.") == SPEC_FILE


def test_render_new_uses_lf_one_trailing_newline_and_skips_empty_keys() -> None:
    fields = {**FIELDS, "expires": None, "source": "", "title": None, "tags": []}
    out = render_new(fields, "\n\nLine one\r\nLine two\n\n\n")
    assert out == (
        "---\nid: 01jd8x4k2m9q7r3t\nnamespace: support\ntags: []\ncreated: 2026-07-20T09:00:00Z\n"
        "updated: 2026-07-20T09:00:00Z\n---\nLine one\nLine two\n"
    )


def test_render_new_writes_lf_only_even_for_crlf_content() -> None:
    out = render_new(FIELDS, "\r\nLine one\r\nLine two\r\n\r\n")
    assert "\r" not in out
    assert out.endswith("---\nLine one\nLine two\n")


NEEDS_QUOTES = [
    "Deploy: Fridays", "a #comment", "#hashtag", "-leading dash", "- list item", "yes", "No", "on", "off", "true",
    "null", "~", " padded ", "trailing ", "123", "1.5", "1e-5", "+1", "-7", "0o17", "1_000", ".5", "12:30",
    "2026-07-20", "[brackets]", "{braces}", "*star", "&anchor", "!tag", "%percent", "@at", "`tick", "|pipe", ">gt",
    "?q", "a, b", "it's", 'say "hi"', "back\\slash", "tab\there", "new\nline", "ünïcødé", "日本語のメモ", "emoji 😀",
    "0x1F", "0b101", "line\u2028separator", "\u2029", "next\x85line", "del\x7f", "bom\ufeff",
]


@pytest.mark.parametrize("text", NEEDS_QUOTES)
def test_render_new_strings_parse_back_unchanged(text: str) -> None:
    out = render_new({**FIELDS, "title": text, "source": text}, "Body.")
    note = parse(out)
    assert note.problems == []
    assert note.meta["title"] == text
    assert note.meta["source"] == text


@pytest.mark.parametrize("text", ["support", "user note 2026-07-20", "Customer ACME", "a.b-c_d/e", "café au lait"])
def test_render_new_writes_plain_strings_unquoted(text: str) -> None:
    assert f"source: {text}\n" in render_new({**FIELDS, "source": text}, "Body.")


def _random_text(rng: random.Random, alphabet: str, low: int, high: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(low, high)))


TEXT_ALPHABET = "abcXYZ019 -_:#,'\"[]{}!&*?|>%@`~\\/.+=\t\né日😀\u00a0\u2028\x85\x7f"
TAG_ALPHABET = "abcxyz019-_/+.#:'\"[]{}!&*?|>%@`~é日😀"  # no ',': it separates tags (note.tags.split_tags)


def _random_fields(rng: random.Random) -> tuple[dict[str, Any], str]:
    fields: dict[str, Any] = {
        "id": notes_id(rng),
        "namespace": _random_text(rng, "abcz019-_.", 1, 12),
        "tags": list(dict.fromkeys(normalise_tag(_random_text(rng, TAG_ALPHABET, 1, 10)) for _ in range(rng.randint(0, 5)))),
        "created": f"2026-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}T0{rng.randint(0, 9)}:00:00Z",
        "updated": "2026-09-19T09:30:00Z",
    }
    fields["tags"] = [t for t in fields["tags"] if t]
    if rng.random() < 0.5:
        fields["title"] = _random_text(rng, TEXT_ALPHABET, 1, 30).strip() or "t"
    if rng.random() < 0.5:
        fields["source"] = _random_text(rng, TEXT_ALPHABET, 1, 30).strip() or "s"
    if rng.random() < 0.5:
        fields["expires"] = "2027-01-01T00:00:00Z"
    body = _random_text(rng, "abc XYZ\n-:#[]|`'\"é😀\u2028", 1, 80).strip("\n") or "b"
    return fields, body


def notes_id(rng: random.Random) -> str:
    """An id as the tool makes them: its first ten characters a time before 2^43 ms."""
    return "0" + rng.choice("01234567") + "".join(rng.choice("0123456789abcdefghjkmnpqrstvwxyz") for _ in range(14))


def test_render_new_then_parse_gives_back_what_was_written() -> None:
    rng = random.Random(20260720)
    for _ in range(1500):
        fields, body = _random_fields(rng)
        text = render_new(fields, body)
        assert text == render_new(fields, body)  # deterministic
        note = parse(text)
        case = (fields, body, text)
        assert note.problems == [], case
        assert note.meta == {k: v for k, v in fields.items()}, case
        assert (note.id, note.own_id, note.namespace) == (fields["id"], True, fields["namespace"]), case
        assert note.body == body + "\n", case
        assert as_tag_list(note.meta["tags"]) == fields["tags"], case
        assert (note.created, note.updated, note.expires) == (fields["created"], fields["updated"], fields.get("expires")), case
        if "title" in fields:
            assert note.title == fields["title"], case
        assert note.source == fields.get("source", ""), case


def test_patch_then_parse_gives_back_what_was_written() -> None:
    rng = random.Random(7)
    for _ in range(500):
        fields, _body = _random_fields(rng)
        original = HAND_WRITTEN if rng.random() < 0.5 else "\ufeff" + HAND_WRITTEN.replace("\n", "\r\n")
        changes = {k: v for k, v in fields.items() if k in ("title", "source", "tags", "expires", "namespace")}
        out = patch(original, changes)
        note = parse(out)
        case = (changes, out)
        assert note.problems == [], case
        for key, value in changes.items():
            assert note.meta[key] == value, case
        assert note.meta["zeta"] == 1 and note.meta["alpha"] == ["x", "y"], case
        nl = "\r\n" if "\r" in original else "\n"
        assert out.endswith("---" + nl + original[original.index("Priya leads") :]), case


@pytest.mark.parametrize("body", ["***\n\nReal text here\n", "> \n> Real text here\n", "___\n\nReal text here"])
def test_a_line_of_markup_only_is_not_the_title(body: str) -> None:
    assert derive_title(body, "2026/07/20/x.md") == "Real text here"


def test_patch_changes_the_copy_of_a_duplicated_key_that_yaml_reads() -> None:
    text = "---\ntags: [old]\ntitle: T\ntags: [current]\n---\nbody\n"
    patched = patch(text, {"tags": ["current", "new"]})
    assert patched == "---\ntags: [old]\ntitle: T\ntags: [current, new]\n---\nbody\n"
    assert parsing.parse(patched.encode(), "x.md").tags == ["current", "new"]
    removed = patch(text, {"tags": None})
    assert removed == "---\ntitle: T\n---\nbody\n"


def test_patching_a_block_list_keeps_the_lines_of_items_that_stay() -> None:
    text = "---\ntitle: X\ntags:\n  - One   # the first\n  # between\n  - \"two\"\n  - three\n---\nbody\n"
    added_and_removed = patch(text, {"tags": ["One", "two", "four"]})
    assert added_and_removed == "---\ntitle: X\ntags:\n  - One   # the first\n  # between\n  - \"two\"\n  - four\n---\nbody\n"
    reordered = patch(text, {"tags": ["three", "One"]})  # cannot keep lines: written afresh
    assert parsing.parse(reordered.encode(), "x.md").meta["tags"] == ["three", "One"]


def test_patching_a_block_list_with_an_item_over_several_lines_writes_it_afresh() -> None:
    text = "---\ntags:\n  - customer\n    success\n  - billing\n---\nbody\n"
    out = patch(text, {"tags": ["billing"]})
    assert out == "---\ntags:\n  - billing\n---\nbody\n"
    assert parsing.parse(out.encode(), "x.md").meta["tags"] == ["billing"]


def test_an_impossible_canonical_timestamp_is_named_in_the_error() -> None:
    with pytest.raises(ValueError, match="not a timestamp: '2026-02-30T09:00:00Z'"):
        to_utc("2026-02-30T09:00:00Z")


def test_a_title_ends_at_any_line_break() -> None:
    assert derive_title("# Title\rmore text", "x.md") == "Title"
