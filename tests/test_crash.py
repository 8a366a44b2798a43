"""kill -9 of a real import: all or nothing after the next open (SPEC §3).

Each test runs ``import_memories`` in a child process that SIGKILLs itself at an exact
step of the import: while it is still staging files in ``.index/import/``, just before
its manifest (the commit point), right after it, or halfway through publishing. The
child counts the steps by wrapping two methods that still run (a staged file written,
an item published); the kill lands where the test says on any machine, however busy
(a parent polling the staging folder from outside killed late under load). The long
version, with kills from outside at random times, is ``benchmarks/crash.py``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agent_memory.note.parse import parse
from agent_memory.errors import VaultError
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, deadline

ITEMS = 600
# The steps of an import of ITEMS new memories, as the child counts them: ITEMS staged
# files, then the manifest (step MANIFEST_STEP), then one step per item published.
MANIFEST_STEP = ITEMS + 1
CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from agent_memory.disk import staging, store
    from agent_memory.vault.vault import Vault
    root, batch, n, kill_at = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    steps = 0

    def step():
        global steps
        steps += 1
        if steps == kill_at:  # kill -9 of this very process, before the step runs
            os.kill(os.getpid(), signal.SIGKILL)

    write_temp, publish_one = store.Store.write_temp, staging.Staging._publish_one

    def counted_write_temp(self, folder, *args, **kwargs):
        if folder in (self.control_dir / staging.STAGING_DIRNAME, self.control_dir / staging.STAGING_DIRNAME / "files"):
            step()  # a staged file, or the manifest
        return write_temp(self, folder, *args, **kwargs)

    def counted_publish_one(self, *args, **kwargs):
        step()
        return publish_one(self, *args, **kwargs)

    store.Store.write_temp = counted_write_temp
    staging.Staging._publish_one = counted_publish_one
    items = [{"content": f"Imported fact tok-{batch}-{k} of a crash test.", "namespace": "imports"} for k in range(n)]
    Vault(root).import_memories(items)
    print(f"not killed: the import ended after {steps} steps", file=sys.stderr)
    """
)


def _import_killed_at(root: Path, batch: str, step: int) -> None:
    """Run an import of ITEMS memories in a child that kills itself (SIGKILL) just before
    its ``step``-th step (see ``MANIFEST_STEP``)."""
    child = subprocess.run([sys.executable, "-c", CHILD, str(root), batch, str(ITEMS), str(step)],
                           capture_output=True, text=True, timeout=deadline(300))
    assert child.returncode == -signal.SIGKILL, f"exit {child.returncode}: {child.stderr}"


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
def test_an_import_killed_at_a_random_step_is_all_or_nothing(root: Path, seed: int) -> None:
    step = random.Random(seed).randint(1, MANIFEST_STEP + ITEMS)
    _import_killed_at(root, "rand", step)
    with _reopened(root) as vault:
        # Killed before its manifest: dropped; after it: finished.
        assert _present(root, "rand") == (0 if step <= MANIFEST_STEP else ITEMS), f"killed before step {step}"
        assert_index_matches_files(vault)


@pytest.mark.parametrize("published", [0, ITEMS // 2])
def test_an_import_killed_after_its_manifest_is_finished_on_the_next_open(root: Path, published: int) -> None:
    _import_killed_at(root, "late", MANIFEST_STEP + 1 + published)
    assert (root / ".index" / "import" / "manifest.json").exists()
    assert _present(root, "late") == published
    with _reopened(root) as vault:
        assert _present(root, "late") == ITEMS
        assert vault.list(namespace="imports")["total"] == ITEMS
        assert_index_matches_files(vault)


@pytest.mark.parametrize("step", [ITEMS // 2, MANIFEST_STEP])
def test_an_import_killed_before_its_manifest_is_dropped_on_the_next_open(root: Path, step: int) -> None:
    _import_killed_at(root, "early", step)
    assert (root / ".index" / "import" / "files").is_dir()
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
        _import_killed_at(root, "first", MANIFEST_STEP + 1)
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
    of the staged name (the link's folder fsync is most of that time), made from one
    killed just before publishing: the first item is linked into the vault by hand, its
    staged name left. Returns its path."""
    staging = root / ".index" / "import"
    item = json.loads((staging / "manifest.json").read_text(encoding="utf-8"))["items"][0]
    staged = staging / "files" / f"{item['n']}.md"
    assert staged.stat().st_nlink == 1, "the first item was published before the kill"
    target = root / item["path"]
    target.parent.mkdir(parents=True, exist_ok=True)
    os.link(staged, target)
    return item["path"]


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
        _import_killed_at(root, "pub", MANIFEST_STEP + 1)
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
