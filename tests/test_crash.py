"""kill -9 of a real import: all or nothing after the next open (SPEC §3).

Each test runs ``import_memories`` in a child process and SIGKILLs it: after a random
delay, right after its manifest (the commit point) appears in ``.index/import/``, or
while it is still staging files there. No hook in the library: the tests watch the
staging folder from outside. The long version is ``benchmarks/crash.py``.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agent_memory.note.parse import parse
from agent_memory.errors import VaultError
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, wait_until

ITEMS = 600
CHILD = textwrap.dedent(
    """
    import sys
    from agent_memory.vault.vault import Vault
    root, batch, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    items = [{"content": f"Imported fact tok-{batch}-{k} of a crash test.", "namespace": "imports"} for k in range(n)]
    vault = Vault(root)
    print("ready", flush=True)
    vault.import_memories(items)
    print("done", flush=True)
    """
)


def _start_import(root: Path, batch: str, n: int = ITEMS) -> subprocess.Popen[str]:
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(root), batch, str(n)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "ready\n", child.stderr.read() if child.stderr else ""
    return child


def _kill_when(child: subprocess.Popen[str], appeared: Path, timeout: float = 120.0) -> None:
    """SIGKILL the child as soon as ``appeared`` exists (polled from outside)."""
    def there() -> bool:
        assert child.poll() is None, f"the import ended before {appeared.name} appeared: {child.communicate()}"
        return appeared.exists()

    try:
        wait_until(there, f"{appeared} appears", seconds=timeout, every=0.0005)
        child.kill()
    finally:
        child.kill()
        child.communicate()


def _present(root: Path, batch: str) -> int:
    """How many items of ``batch`` are memory files in the vault (by the token each holds)."""
    token = f"tok-{batch}-".encode()
    count = 0
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        count += sum(token in (Path(folder) / name).read_bytes() for name in names if name.endswith(".md"))
    return count


def _reopened(root: Path) -> Vault:
    vault = Vault(root)
    assert not (root / ".index" / "import").exists(), "the staging folder is still there after the reopen"
    return vault


@pytest.fixture
def root(tmp_path: Path) -> Path:
    Vault.init(tmp_path / "vault").close()
    return tmp_path / "vault"


@pytest.mark.parametrize("seed", range(3))
def test_an_import_killed_at_a_random_moment_is_all_or_nothing(root: Path, seed: int) -> None:
    delay = random.Random(seed).uniform(0.0, 0.6)  # an import of 600 items takes ~0.6 s here
    child = _start_import(root, "rand")
    try:
        time.sleep(delay)
    finally:
        child.kill()
        child.communicate()
    with _reopened(root) as vault:
        assert _present(root, "rand") in (0, ITEMS), f"killed after {delay:.3f} s"
        assert_index_matches_files(vault)


def test_an_import_killed_right_after_its_manifest_is_finished_on_the_next_open(root: Path) -> None:
    _kill_when(_start_import(root, "late"), root / ".index" / "import" / "manifest.json")
    assert (root / ".index" / "import" / "manifest.json").exists()
    with _reopened(root) as vault:
        assert _present(root, "late") == ITEMS
        assert vault.list(namespace="imports")["total"] == ITEMS
        assert_index_matches_files(vault)


def test_an_import_killed_before_its_manifest_is_dropped_on_the_next_open(root: Path) -> None:
    _kill_when(_start_import(root, "early"), root / ".index" / "import" / "files")
    assert not (root / ".index" / "import" / "manifest.json").exists()
    with _reopened(root) as vault:
        assert _present(root, "early") == 0
        assert vault.list(namespace="imports")["total"] == 0
        assert_index_matches_files(vault)


def test_an_import_in_a_process_opened_before_a_crash_never_drops_the_interrupted_one(root: Path) -> None:
    """Found by benchmarks/crash.py: a long-lived process (a server, or a CLI import that
    opened the vault first) imports while an earlier import, killed past its manifest,
    is still staged. ``stage`` refuses, and the refusal's clean-up used to remove the
    staging folder: the manifest and every item not yet published were gone, leaving a
    partial import after the next open."""
    opened_before = Vault(root)
    try:
        _kill_when(_start_import(root, "first"), root / ".index" / "import" / "manifest.json")
        try:
            opened_before.import_memories([{"content": f"Second batch tok-second-{k}.", "namespace": "imports"}
                                           for k in range(5)])
        except VaultError as exc:  # refused until the interrupted import is finished (reopen)
            assert "still staged" in str(exc)
    finally:
        opened_before.close()
    with _reopened(root) as vault:
        assert _present(root, "first") == ITEMS
        assert _present(root, "second") in (0, 5)
        assert_index_matches_files(vault)


def _link_first_unpublished(root: Path) -> str:
    """The state of an import killed between ``Store.publish``'s hard link and the unlink
    of the staged name (the link's folder fsync is most of that time): the first item not
    yet published is linked into the vault by hand, its staged name left. Returns its path."""
    staging = root / ".index" / "import"
    for item in json.loads((staging / "manifest.json").read_text(encoding="utf-8"))["items"]:
        staged = staging / "files" / f"{item['n']}.md"
        if staged.exists() and staged.stat().st_nlink > 1:
            # The kill itself landed there: this item is linked, its staged name left. Only
            # one item is ever in that state, so it is the one (linking another would make a
            # state no crash can leave).
            inode = staged.stat().st_ino
            folder = (root / item["path"]).parent
            [linked] = [p for p in folder.glob("*.md") if p.stat().st_ino == inode]
            return linked.relative_to(root).as_posix()
        if staged.exists() and staged.stat().st_nlink == 1:
            target = root / item["path"]
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(staged, target)
            return item["path"]
    raise AssertionError("the import was published in full before it was killed")


def _files_with_id(root: Path, memory_id: str) -> list[Path]:
    found = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in names:
            path = Path(folder) / name
            if name.endswith(".md") and parse(path.read_bytes(), name).id == memory_id:
                found.append(path)
    return found


@pytest.mark.parametrize("change", ["forget", "update"])
def test_an_item_published_before_a_crash_and_changed_since_is_not_published_again(root: Path, change: str) -> None:
    """A process that had the vault open (a server with its watcher) forgets or edits an
    item that a crashed import had already published; the next open finishes the import
    and must not publish that item a second time (a forgotten memory back, or two files
    with one id: the edited one and the original)."""
    opened_before = Vault(root)
    try:
        _kill_when(_start_import(root, "pub"), root / ".index" / "import" / "manifest.json")
        rel = _link_first_unpublished(root)
        memory_id = opened_before.get(rel)["id"]
        if change == "forget":
            opened_before.forget(rel)
        else:
            opened_before.update(rel, append="Edited after the crash.")
            opened_before.store.settle_parked(grace=0)  # what its next write does a few seconds later
    finally:
        opened_before.close()
    with _reopened(root) as vault:
        kept = _files_with_id(root, memory_id)
        if change == "forget":
            assert kept == [], "a forgotten memory was published again"
            assert _present(root, "pub") == ITEMS - 1
        else:
            assert len(kept) == 1, f"one id, {len(kept)} files"
            assert b"Edited after the crash." in kept[0].read_bytes()
            assert _present(root, "pub") == ITEMS
        assert_index_matches_files(vault)
