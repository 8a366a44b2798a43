"""The YAML-free fast path for simple front matter must read exactly what YAML reads."""

from __future__ import annotations

import pytest
import yaml

from agent_memory.note import safe_yaml
from agent_memory.note.parse import parse
from agent_memory.note.render import render_new

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
    fast = safe_yaml._fast_yaml(text)
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
    assert safe_yaml._fast_yaml(fm.replace('"2024"', "2024")) is None  # a bare number is YAML's int: declined
    assert safe_yaml._fast_yaml(fm) == _yaml(fm) == {**fields}
