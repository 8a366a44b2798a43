"""The write path as tuned for speed keeps its promises: a memory ``remember`` returned is
on disk and found (in this process, another one and the CLI), its new folder's name is
made durable, dedup and the credential guard answer as before, and an import's rows are
the ones a rebuild makes. No test here times anything (speed: benchmarks/scale.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agent_memory.disk import store as store_module
from agent_memory.disk.staging import NotPublished
from agent_memory.errors import SecretRefused
from agent_memory.note.parse import parse
from agent_memory.recall.language import language_of
from agent_memory.trust import credentials
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, cli_ok, deadline, symlink_swapped_before_publish

CHILD = textwrap.dedent(
    """
    import sys, time
    from agent_memory.vault.vault import Vault
    vault = Vault(sys.argv[1])
    memory = vault.remember(sys.argv[2], tags=["killed"])["memory"]
    print(memory["id"], memory["path"], flush=True)
    time.sleep(600)  # killed here, the moment remember has returned
    """
)


def test_a_memory_remember_returned_is_there_after_a_kill(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    Vault.init(root).close()
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(root), "The boiler code is in the blue binder"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=deadline(60))
    assert line, child.stderr.read() if child.stderr else ""
    memory_id, path = line.split()
    note = parse((root / path).read_bytes(), path)
    assert not note.unreadable and note.id == memory_id and "blue binder" in note.body
    with Vault(root) as reopened:
        hits = reopened.search("boiler binder")["hits"]
        assert [h["id"] for h in hits] == [memory_id]
        assert_index_matches_files(reopened)


def test_recall_right_after_remember_finds_it_here_elsewhere_and_in_the_cli(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    with Vault.init(root) as writer, Vault(root) as other:
        for n in range(30):
            made = writer.remember(f"Fact number {n} about the harbour crane rota")["memory"]
            assert [h["id"] for h in writer.search(f"harbour crane {n}", match="all")["hits"]][:1] == [made["id"]]
            assert other.get(made["id"])["content"] == made["content"]
        last = writer.remember("The warehouse alarm code changed on Monday")["memory"]
        assert last["id"] in cli_ok("search", "warehouse alarm", vault=root)
        assert_index_matches_files(writer)


def folders_fsynced(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every folder fsynced from now on, in order (the real fsync still runs)."""
    synced: list[Path] = []
    real = store_module.fsync_folder

    def recorded(folder: Path) -> None:
        synced.append(Path(folder))
        real(folder)

    monkeypatch.setattr(store_module, "fsync_folder", recorded)
    return synced


def test_a_new_day_folder_is_made_durable_in_its_parent_once(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    synced = folders_fsynced(monkeypatch)
    first = vault.remember("The first fact of the day")["memory"]
    day = vault.root / first["path"].rsplit("/", 1)[0]
    assert {day, day.parent, day.parent.parent, vault.root} <= set(synced)  # the file's folder, each new one's parent
    synced.clear()
    vault.remember("The second fact of the day")
    assert synced == [day]  # the folder is there already: only its new entry


def test_dedup_finds_the_twin_among_many_and_only_in_its_namespace(vault: Vault) -> None:
    first = vault.remember("Deploys happen on Fridays after the standup")["memory"]
    for n in range(200):
        vault.remember(f"Filler fact {n} about the office plants")
    again = vault.remember("Deploys happen on Fridays after the standup", tags=["deploy"])
    assert again["deduplicated"] and again["memory"]["id"] == first["id"]
    assert vault.get(first["id"])["tags"] == ["deploy"]  # merged into the one file
    elsewhere = vault.remember("Deploys happen on Fridays after the standup", namespace="ops")
    assert not elsewhere["deduplicated"] and elsewhere["memory"]["id"] != first["id"]
    assert vault.stats()["total"] == 202
    assert_index_matches_files(vault)


def test_the_credential_guard_refuses_each_time_and_names_stay_clean(vault: Vault) -> None:
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    for _ in range(2):  # the second scan of the same text answers as the first
        with pytest.raises(SecretRefused):
            vault.remember(f"The CI token is {token}")
    found = credentials.find_credentials(f"token {token}")
    found.clear()  # a caller's list is its own: the next scan still finds it
    assert len(credentials.find_credentials(f"token {token}")) == 1
    made = vault.remember("The wifi password: hunter2, ask Bo")["memory"]
    assert "hunter2" not in made["path"]


@pytest.mark.parametrize(("text", "language"), [
    ("The deploy is on Friday and the team is ready for it", "en"),
    ("Der Server ist nicht erreichbar und die Datenbank wird neu gestartet", "de"),
    ("Le serveur est en panne et les clients sont dans le noir", "fr"),
    ("El servidor de la empresa no funciona para los clientes", "es"),
    ("Kubernetes pod node cluster backup", "latin"),
    ("12345 -- 678", ""),
])
def test_language_of_mostly_ascii_text_is_the_same_with_other_characters_beside(text: str, language: str) -> None:
    assert language_of(text) == language
    # The same letters with an ellipsis, a dash or an accented name beside: counted one by one.
    assert language_of(text + " …") == language
    assert language_of("— " + text) == language
    if language not in ("", "latin"):
        assert language_of(text + " Zoë") == language


def test_an_import_of_many_items_is_all_there_after_a_reopen(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    items = [{"content": f"Imported fact {n} about shipment {n * 7}", "namespace": "imports",
              "tags": ["shipping"], "created": f"2025-0{1 + n % 9}-1{n % 10}T10:00:00Z"} for n in range(400)]
    items.append(dict(items[3]))  # a duplicate: skipped
    with Vault.init(root) as vault:
        vault.remember("A memory from before the import")
        result = vault.import_memories(items)
        assert (result["imported"], result["duplicates"]) == (400, 1)
        assert_index_matches_files(vault)
    with Vault(root) as reopened:
        assert reopened.stats()["total"] == 401
        assert reopened.search("shipment 21", namespace="imports")["hits"][0]["id"] == result["ids"][3]
        assert reopened.import_memories(items)["duplicates"] == 401  # all there: nothing imported twice


def test_an_import_refuses_a_folder_made_a_symlink_after_it_was_planned(vault: Vault, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (vault.root / "2025/03").mkdir(parents=True)
    (vault.root / "2025/03/04").mkdir()
    symlink_swapped_before_publish(monkeypatch, vault.root / "2025/03/04", outside)
    with pytest.raises(NotPublished):
        vault.import_memories([{"content": "Kept inside", "created": "2025-03-04T10:00:00Z"},
                               {"content": "Also kept inside", "created": "2025-03-05T10:00:00Z"}])
    assert list(outside.iterdir()) == []
    assert not (vault.root / "2025/03/05").exists() or not any((vault.root / "2025/03/05").iterdir())
    assert vault.stats()["total"] == 0



def test_a_new_file_in_new_folders_has_each_folder_made_durable(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    """``write_new_file`` (a move's copy where hard links are refused, init's files)."""
    synced = folders_fsynced(monkeypatch)
    vault.store.write_new_file("projects/alpha/fact.md", b"A fact in a folder of its own\n")
    assert (vault.root / "projects/alpha/fact.md").read_bytes() == b"A fact in a folder of its own\n"
    assert {vault.root / "projects/alpha", vault.root / "projects", vault.root} <= set(synced)


def test_a_move_makes_the_new_name_durable_before_the_old_one_goes(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    """A power cut in the middle of ``mv`` leaves the note under both names, never neither:
    the new folder (and each folder made for it) is fsynced before the old name is retired."""
    memory = vault.remember("The reactor manual lives in the blue binder")["memory"]
    old_folder = vault.root / memory["path"].rsplit("/", 1)[0]
    synced = folders_fsynced(monkeypatch)
    moved = vault.move(memory["id"], "projects/alpha/")
    new_folder = vault.root / "projects/alpha"
    assert (new_folder / memory["path"].rsplit("/", 1)[1]).exists() and moved["new_path"].startswith("projects/alpha/")
    assert {new_folder, vault.root / "projects", vault.root} <= set(synced)
    assert synced.index(new_folder) < len(synced) - 1 - synced[::-1].index(old_folder)
