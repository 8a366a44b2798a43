"""`import --from chatgpt|claude`: one dated note per conversation from a ChatGPT or
Claude data export (its zip or conversations.json), pinned by the small sample exports
in tests/data/chats/; read one conversation at a time; re-imports update."""

from __future__ import annotations

import copy
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from agent_memory.errors import InvalidInput
from agent_memory.limits import MAX_CONTENT
from agent_memory.transfer.importers import chats
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, cli_ok, run_cli
from conftest import tool_ok as ok

pytestmark = pytest.mark.anyio

SAMPLES = Path(__file__).parent / "data" / "chats"
CHATGPT = SAMPLES / "chatgpt_conversations.json"
AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"  # AWS's documented example id, detected on purpose


def _notes(vault: Vault) -> dict[str, str]:
    return {p.relative_to(vault.root).as_posix(): p.read_text() for p in vault.root.rglob("*.md")
            if not any(part.startswith(".") for part in p.relative_to(vault.root).parts)}


def _claude_zip(tmp_path: Path) -> Path:
    archive = tmp_path / "claude-export.zip"
    with zipfile.ZipFile(archive, "w") as out:
        for name in ("conversations.json", "users.json", "projects.json"):
            out.write(SAMPLES / "claude" / name, f"data-2024-06-03/{name}")
    return archive


def test_chatgpt_export_one_dated_note_per_conversation_the_current_branch_in_order(vault: Vault) -> None:
    result = vault.import_memories(CHATGPT, format="chatgpt")
    assert (result["conversations"], result["imported"], result["redacted"], result["refused"]) == (2, 2, [], [])
    notes = _notes(vault)
    acme = notes["2024/05/01/friday-deploys-at-acme.md"]
    body = acme.split("---\n", 2)[2]
    assert body.startswith("# Friday deploys at ACME\n\n- Date: 2024-05-01 10:00:00 UTC\n"
                           "- Participants: You, ChatGPT (gpt-4o), Tool (python), ChatGPT (gpt-4o-mini)\n"
                           "- ChatGPT conversation: 6650a2c4-1f0e-8000-a1b2-acme00000001\n")
    said = ["When does ACME prefer to deploy?", "ACME prefers deploys on Fridays.", "*[image_asset_pointer]*",
            "Which day is free?", "free_days = ['Friday']", "Friday is free on the calendar."]
    assert [body.index(s) for s in said] == sorted(body.index(s) for s in said)  # in the conversation's order
    assert "discarded regeneration" not in acme  # another branch of the tree, not the one shown
    memory = vault.get("2024/05/01/friday-deploys-at-acme.md")
    assert memory["tags"] == ["chatgpt", "conversation"] and memory["created"] == "2024-05-01T10:00:00Z"
    assert memory["source"] == "ChatGPT conversation 6650a2c4-1f0e-8000-a1b2-acme00000001"
    untitled = notes["2024/06/01/chatgpt-conversation-2024-06-01-00-00-00-utc.md"]
    assert "Globex pays by invoice, net 30." in untitled
    assert vault.search("Globex invoice")["hits"][0]["path"].startswith("2024/06/01/")
    assert_index_matches_files(vault)


def test_importing_again_updates_instead_of_duplicating(vault: Vault, tmp_path: Path) -> None:
    vault.import_memories(CHATGPT, format="chatgpt")
    before = _notes(vault)
    again = vault.import_memories(CHATGPT, format="chatgpt")
    assert (again["imported"], again["updated"], again["unchanged"]) == (0, 0, 2) and _notes(vault) == before
    data = json.loads(CHATGPT.read_text())
    second = data[1]
    second["mapping"]["m3"] = {"id": "m3", "parent": "m2", "children": [], "message": {
        "id": "m3", "author": {"role": "user"}, "create_time": 1717200120,
        "content": {"content_type": "text", "parts": ["And Initech pays by card."]}}}
    second["mapping"]["m2"]["children"] = ["m3"]
    second["current_node"] = "m3"
    grown = tmp_path / "conversations.json"
    grown.write_text(json.dumps(data))
    updated = vault.import_memories(grown, format="chatgpt")
    assert (updated["imported"], updated["updated"], updated["unchanged"]) == (0, 1, 1)
    notes = _notes(vault)
    assert len(notes) == 2 and "And Initech pays by card." in notes[updated["paths"][0]]


def test_claude_zip_with_users_and_projects_beside_the_conversations(vault: Vault, tmp_path: Path) -> None:
    out = cli_ok("import", "--from", "claude", str(_claude_zip(tmp_path)), vault=vault.root)
    assert "Read 2 conversations." in out and "Imported 2" in out
    notes = _notes(vault)
    staging = notes["2024/06/03/staging-reset-schedule.md"]
    assert "- Participants: Ana Example, Claude\n" in staging  # the account's name from users.json
    assert "### Ana Example · 2024-06-03 09:15:00 UTC\n\nWhen does staging reset?\n\n*[attached ops-runbook.md]*" in staging
    assert "*[used search_docs]*" in staging and "Staging resets on Sundays at 02:00 UTC." in staging
    assert "Priya owns billing." in notes["2024/01/10/old-style.md"]  # an older export: text only
    assert not any("ana@example.com" in text for text in notes.values())  # the account's email is not copied


def test_a_conversation_over_the_content_limit_becomes_linked_parts(vault: Vault) -> None:
    words = "The deploy window moved again. " * 1000  # ~31k characters a message
    messages = [{"uuid": f"x{n}", "sender": "human" if n % 2 == 0 else "assistant",
                 "created_at": "2024-02-01T10:00:00Z", "text": f"Message {n}. {words}"} for n in range(8)]
    long_one = {"uuid": "long-1", "name": "A very long chat", "created_at": "2024-02-01T10:00:00Z",
                "updated_at": "2024-02-01T11:00:00Z", "chat_messages": messages}
    result = vault.import_memories([long_one], format="claude")
    assert result["imported"] == 3
    parts = [vault.get(p) for p in sorted(result["paths"])]
    assert [p["title"] for p in parts] == [f"A very long chat (part {n} of 3)" for n in (1, 2, 3)]
    assert all(len(p["content"]) <= MAX_CONTENT for p in parts)
    joined = "".join(p["content"] for p in parts)
    assert [joined.index(f"Message {n}.") for n in range(8)] == sorted(joined.index(f"Message {n}.") for n in range(8))
    first, second = (p for p in parts if "part 1" in p["title"]), (p for p in parts if "part 2" in p["title"])
    assert next(second)["front_matter"]["continues"] == [f"[[{Path(next(first)['path']).stem}]]"]


def test_a_conversation_holding_a_credential_is_redacted_and_said_the_rest_untouched(vault: Vault) -> None:
    data = json.loads(CHATGPT.read_text())
    data[1]["mapping"]["m1"]["message"]["content"]["parts"] = [f"Use the key {AWS_KEY} for the Globex bucket."]
    result = vault.import_memories(data, format="chatgpt")
    assert result["imported"] == 2 and result["refused"] == []
    assert [(r["conversation"], r["kinds"]) for r in result["redacted"]] == [
        ("6650a2c4-1f0e-8000-a1b2-globex000002", ["AWS access key id"])]
    notes = _notes(vault)
    assert AWS_KEY not in "".join(notes.values())
    assert any("[redacted AWS access key id] for the Globex bucket" in text for text in notes.values())
    assert "ACME prefers deploys on Fridays." in notes["2024/05/01/friday-deploys-at-acme.md"]


def test_the_reader_takes_one_conversation_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chats, "READ_CHUNK", 64)  # windows far smaller than one conversation
    many = json.loads(CHATGPT.read_text()) * 20
    text = json.dumps(many, indent=1)
    stream = io.StringIO(text)
    reader = chats.iter_array(stream, "sample")
    first = next(reader)
    assert stream.tell() < len(text) / 4  # about one conversation read, not the export
    assert [first, *reader] == many


@pytest.mark.parametrize(("text", "reason"), [
    ('[{"id": "a", "mapping": {}}, {"id": "b"', "cut short"),
    ('{"conversations": []}', "not a list of conversations"),
    ('[{"id": "a"}, nope]', "not valid JSON"),
])
def test_a_broken_export_is_one_clear_error(vault: Vault, tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "conversations.json"
    path.write_text(text)
    with pytest.raises(InvalidInput, match=reason):
        vault.import_memories(path, format="chatgpt")


def test_cli_errors_for_a_zip_without_conversations_and_a_missing_file(vault: Vault, tmp_path: Path) -> None:
    empty = tmp_path / "other.zip"
    with zipfile.ZipFile(empty, "w") as out:
        out.writestr("notes.txt", "hello")
    bad = run_cli("import", "--from", "chatgpt", str(empty), vault=vault.root)
    assert bad.returncode == 1 and "no conversations.json" in bad.stderr and "Traceback" not in bad.stderr
    gone = run_cli("import", "--from", "claude", str(tmp_path / "nope.zip"), vault=vault.root)
    assert gone.returncode == 1 and "Cannot read" in gone.stderr and _notes(vault) == {}


async def test_chat_import_over_mcp_takes_the_parsed_conversations(client: Any, vault: Vault) -> None:
    data: list[Any] = json.loads((SAMPLES / "claude" / "conversations.json").read_text())
    result = await ok(client, "import_memories", items=copy.deepcopy(data), format="claude")
    assert (result["conversations"], result["imported"]) == (2, 2)
    again = await ok(client, "import_memories", items=data, format="claude")
    assert (again["imported"], again["unchanged"]) == (0, 2)
