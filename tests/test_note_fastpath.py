"""The YAML-free fast path for simple front matter must read exactly what YAML reads."""

from __future__ import annotations

import json
import random

import pytest
import yaml

from agent_memory.note import fast_yaml, safe_yaml
from agent_memory.note.parse import parse
from agent_memory.note.render import MAYBE_TYPED, plain_tag, reads_as_text, render_new

CASES = [
    "id: 01kxte43w0m6r68r\nnamespace: support\ntags: [customer, deploy]\ncreated: 2026-07-20T09:00:00Z\n",
    "title: ACME billing contact\nsource: call with ACME ops 2026-07-14\n",
    'related_to: ["[[acme-billing]]", "[[people/priya]]"]\n',
    "tags: []\n",
    "id: 0b101\n", "id: 0x1f\n", "id: 01234\n", "id: 1e3\n", "id: 1_000\n", "a: 1.5\n", "a: .inf\n",
    "a: yes\n", "a: No\n", "a: on\n", "a: OFF\n", "a: null\n", "a: Null\n", "a: ~\n", "a: y\n",
    "a: 2024-01-01\n", "a: 2026-07-20 09:00:00\n", "a: 2026-07-20T09:00:00+02:00\n",
    "a: [on, x]\n", "a: [1, 2]\n", "a: [x, 2024]\n", "tags: [a, b]  \n",
    "a: b # comment\n", "a: 1:20\n", "a: b\na: c\n", "a: 'quoted'\n", 'a: "x\\ty"\n',
    "a: -leading dash\n", "a: [a,b]\n", "a:\n  - x\n", "on: push\n", "2024: year\n",
    "a: über straße\n", 'tags: ["\x01"]\n', 'tags: ["\x85"]\n', 'tags: ["\u2028"]\n', "a: path/to/file.md\n", "id: 01kxte43w0m6r68r\r\nnamespace: x\r\n",
]


def _yaml(text: str) -> dict:
    loaded = yaml.load(text, Loader=safe_yaml.KeepKeysLoader) or {}
    return {k: safe_yaml.jsonable(v) for k, v in loaded.items()}


@pytest.mark.parametrize("text", CASES)
def test_fast_path_agrees_with_yaml_or_declines(text: str) -> None:
    fast = fast_yaml.read_simple(text)
    try:
        expected = _yaml(text)
    except yaml.YAMLError:  # YAML refuses it: the fast path must too, and the file says why
        assert fast is None
        assert parse(f"---\n{text}---\nbody\n".encode(), "x.md").problems
        return
    if fast is not None:
        assert fast == expected
    # And the public reader gives YAML's answer either way.
    parsed = parse(f"---\n{text}---\nbody\n".encode(), "x.md")
    assert parsed.meta == _yaml(text)


def test_files_the_tool_writes_take_the_fast_path() -> None:
    fields = {
        "id": "01kxte43w0m6r68r", "namespace": "support", "title": "ACME billing contact",
        "tags": ["customer", "acme-billing", "2024"], "created": "2026-07-20T09:00:00Z",
        "updated": "2026-07-20T09:00:00Z", "expires": "2026-08-20T09:00:00Z", "source": "user note",
        "related_to": ["[[acme-billing]]"],
    }
    text = render_new(fields, "Customer ACME prefers deploys on Fridays")
    fm = text.split("---\n")[1]
    bare = fm.replace('"2024"', "2024")  # a bare number is YAML's int, and the fast path's
    assert fast_yaml.read_simple(bare) == _yaml(bare) and _yaml(bare)["tags"][-1] == 2024
    assert fast_yaml.read_simple(fm) == _yaml(fm) == {**fields}


# Generated front matter: seeded, so a failure reproduces; each piece is something a
# person or a tool writes, or one character away from it.
_ODD = list(":#-?[]{},&*!|>'\"%@`~=< \t\\/.") + ["\r", "\x85", "\u2028", "\ufeff", "\x7f", "é", "字", "🙂"]
_KEYS = ["id", "tags", "aliases", "title", "publish", "on", "2024", "Date created", "作者", "a-b", "_x", "<<", "?",
         "- k", "k ", "k#x", "k:x", "x y z", "[k]", "'q'", "\"q\""]
_WORDS = ["deploy", "ACME billing", "über straße", "字数统计", "path/to/file.md", "http://x.y/z", "b:c", "a#b",
          "x]", "[[link]]", "-dash", "- dash", ".hidden", "~", "=", "<<", "!tag", "&a", "*a", "|", ">", "%x", "@x",
          "`x`", "a: b", "a #c", "a  b", "it's", "say \"hi\"", "1:20", "0x1f", "0o17", "017", "1_000", "1e3", "1.5",
          ".inf", "-.NaN", "+5", "-0", "0", "12", "007", "yes", "No", "ON", "off", "tRue", "y", "null", "Null", "NULL",
          "2024-01-01", "2024-02-30", "2024-1-1", "2026-07-20T09:00:00Z", "2026-02-30T09:00:00Z",
          "2026-07-20 09:00:00", "2026-07-20T09:00:00+02:00", "2026-07-20t09:00:00z", ""]


def _word(rng: random.Random) -> str:
    word = rng.choice(_WORDS)
    if rng.random() < 0.25:  # one odd character somewhere
        at = rng.randint(0, len(word))
        word = word[:at] + rng.choice(_ODD) + word[at:]
    return word


def _quoted(rng: random.Random, word: str) -> str:
    if rng.random() < 0.5:
        return json.dumps(word, ensure_ascii=rng.random() < 0.3)
    return "'" + word.replace("'", "''" if rng.random() < 0.9 else "'") + "'"


def _scalar(rng: random.Random) -> str:
    word = _word(rng)
    return _quoted(rng, word) if rng.random() < 0.3 else word


def _value(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.55:
        return " " * rng.choice([1, 1, 1, 2]) + _scalar(rng)
    if kind < 0.8:
        items = [_scalar(rng) for _ in range(rng.randint(0, 4))]
        return " [" + rng.choice([", ", ",", " , "]).join(items) + "]" + rng.choice(["", "", " ", " # c", ","])
    indent = " " * rng.choice([0, 2, 2, 4])
    items = [f"{indent}-" + ("" if rng.random() < 0.05 else " " + _scalar(rng)) for _ in range(rng.randint(0, 3))]
    if items and rng.random() < 0.1:
        items[-1] = " " + items[-1]  # a misaligned item
    return "\n".join([rng.choice(["", "", " "]), *items])


def _front_matter(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(1, 7)):
        key = rng.choice(_KEYS) if rng.random() < 0.4 else rng.choice(["id", "namespace", "tags", "note", "status"])
        line = f"{key}:{_value(rng)}"
        if rng.random() < 0.05:
            line = rng.choice(["  ", "# ", "\t", "- "]) + line
        lines.append(line)
        if rng.random() < 0.05:
            lines.append(rng.choice(["", "# a comment", "   ", "  continued words"]))
    text = "\n".join(lines) + "\n"
    return text.replace("\n", "\r\n") if rng.random() < 0.05 else text


def _full(text: str) -> object:
    """What the full parser reads: a mapping, or the reason it gives none."""
    try:
        loaded = yaml.load(text, Loader=safe_yaml.KeepKeysLoader)
    except (yaml.YAMLError, ValueError, OverflowError) as exc:
        return type(exc)
    if not isinstance(loaded, dict):
        return loaded
    return {k: safe_yaml.jsonable(v) for k, v in loaded.items()}


def test_generated_front_matter_reads_as_yaml_reads_it_or_is_declined() -> None:
    rng = random.Random(20261205)
    accepted = 0
    for _ in range(20_000):
        text = _front_matter(rng)
        fast = fast_yaml.read_simple(text)
        if fast is None:
            continue
        accepted += 1
        full = _full(text)
        if full is None and not fast:  # comments only: nothing either way
            continue
        # The one deliberate difference: an impossible timestamp stays text in the fast path.
        assert fast == full or _impossible_timestamp(text), (text, fast, full)
    assert accepted > 1_500  # odd on purpose, yet the fast path reads a good share: the test is not empty


def _impossible_timestamp(text: str) -> bool:
    return "2026-02-30T09:00:00Z" in text


def test_the_resolver_types_only_plain_scalars_starting_with_the_characters_the_fast_path_checks() -> None:
    """The fast path takes a plain scalar for text without asking YAML when its first
    character keys none of YAML's implicit resolvers: true only while the set matches."""
    keyed = {key for key in yaml.resolver.Resolver.yaml_implicit_resolvers if key}  # "": the empty value, null
    # Indicators (``!``, ``&``, ``*``) never reach that shortcut: such values are declined.
    assert keyed <= MAYBE_TYPED | fast_yaml._INDICATORS
    assert fast_yaml.read_simple("a: &x\n") is None and fast_yaml.read_simple("a:\n") == {"a": None}
    assert None not in yaml.resolver.Resolver.yaml_implicit_resolvers


def test_text_is_told_apart_from_numbers_as_yaml_resolves_it() -> None:
    """``reads_as_text`` settles most scalars by their first character (and an id-like
    one by a letter no number holds) without asking PyYAML: the same answer as asking,
    for numbers, dates, booleans, the tool's ids and every mix of their characters."""
    keyed = {key for key in yaml.resolver.Resolver.yaml_implicit_resolvers if key}
    assert keyed <= MAYBE_TYPED  # (the empty value too: ``reads_as_text("")`` asks)
    rng = random.Random(20261206)
    alphabet = "0123456789abcdefxobeEtTzZgG_.:+-~=< yYnN"
    texts = ["", "0", "01kxte43w0m6r68r", "0x1F", "0b101", "0o17", "1e3", "1_000", "1:20", "2026-07-20T09:00:00Z",
             "2026-07-20t09:00:00z", "2024-01-01", ".inf", ".nan", "yes", "No", "on", "~", "null", "=", "<<", "12z",
             "1g", "0.5", "-1", "+.5e+3", "release", "team", "&x", "?x"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(20_000)]
    for text in texts:
        assert reads_as_text(text) == (plain_tag(text) == "tag:yaml.org,2002:str"), text


def test_the_ascii_shortcut_of_content_normalising_is_nfkc_and_casefold() -> None:
    """Dedup compares normalised content; ASCII skips NFKC, which must change nothing."""
    import unicodedata

    from agent_memory.note.parse import normalise_content

    rng = random.Random(7)
    texts = ["".join(map(chr, range(128))), *("".join(chr(rng.randrange(128)) for _ in range(30)) for _ in range(2000))]
    for text in texts:
        assert normalise_content(text) == " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    assert normalise_content("Straße  ＡＢＣ") == "strasse abc"  # and the rest still folds


def test_a_hostile_line_is_read_in_one_pass() -> None:
    """Long runs of spaces where a list item or a block item could end: a pattern that
    backtracked would take hours on these (no clock here: it would simply not finish)."""
    spaces = " " * 200_000
    assert fast_yaml.read_simple(f"a: [x{spaces}y\n") is None  # never closed: declined
    assert fast_yaml.read_simple(f"a: [x{spaces}, y]\n") == {"a": ["x", "y"]}
    assert fast_yaml.read_simple(f"a:\n  - x{spaces}y\n") == {"a": [f"x{spaces}y"]}
    assert fast_yaml.read_simple(f'a: ["x"{spaces}, "y"]\n') == {"a": ["x", "y"]}
