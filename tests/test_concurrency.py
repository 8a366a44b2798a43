"""Several processes on one vault: nothing lost, nothing stored twice.

Four real processes each make 120 mixed writes (remember, update, forget, and
remembering the same shared facts at the same time) while a fifth rebuilds the
index and the console script adds memories too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent_memory.errors import NotFound
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, deadline

WORKER = r'''
import json, random, sys
from agent_memory.vault.vault import Vault

root, k, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rng = random.Random(k)
vault = Vault(root)
own, shared = {}, {}
for i in range(120):
    alive = [m for m, c in own.items() if c is not None]
    r = rng.random()
    if r < 0.35 or not alive:
        content = f"process {k} fact number {i}"
        own[vault.remember(content, tags=[f"p{k}"])["memory"]["id"]] = content
    elif r < 0.55:
        content = f"a fact every process learns, number {rng.randrange(8)}"
        result = vault.remember(content, namespace="shared", tags=[f"p{k}"])
        shared.setdefault(content, set()).add(result["memory"]["id"])
    elif r < 0.8:
        memory_id = rng.choice(alive)
        content = f"process {k} fact number {i}, revised"
        vault.update(memory_id, expected_version=vault.get(memory_id)["version"], content=content, add_tags=["revised"])
        own[memory_id] = content
    else:
        memory_id = rng.choice(alive)
        vault.forget(memory_id)
        own[memory_id] = None
vault.close()
json.dump({"own": own, "shared": {c: sorted(ids) for c, ids in shared.items()}}, open(out, "w"))
'''

REINDEXER = r'''
import sys, time
from agent_memory.vault.vault import Vault
vault = Vault(sys.argv[1])
for _ in range(3):
    vault.reindex()
    time.sleep(0.2)
vault.close()
'''


def test_four_processes_making_a_hundred_and_twenty_writes_each(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    Vault.init(root).close()
    (tmp_path / "worker.py").write_text(WORKER)
    (tmp_path / "reindexer.py").write_text(REINDEXER)
    script = Path(sys.executable).with_name("agent-memory")

    workers = [
        subprocess.Popen([sys.executable, str(tmp_path / "worker.py"), str(root), str(k), str(tmp_path / f"out{k}.json")],
                         stderr=subprocess.PIPE, text=True)
        for k in range(4)
    ]
    reindexer = subprocess.Popen([sys.executable, str(tmp_path / "reindexer.py"), str(root)], stderr=subprocess.PIPE, text=True)
    cli_ids = []
    for i in range(10):
        content = f"a fact every process learns, number {i % 8}" if i % 5 == 0 else f"added from the command line {i}"
        namespace = "shared" if i % 5 == 0 else "default"
        done = subprocess.run([str(script), "--dir", str(root), "add", content, "-n", namespace, "-t", "cli"],
                              capture_output=True, text=True, timeout=deadline(120))
        assert done.returncode == 0, done.stderr
        cli_ids.append((content, namespace, done.stdout.strip()))
    for proc in [*workers, reindexer]:
        _, err = proc.communicate(timeout=deadline(240))
        assert proc.returncode == 0, err

    vault = Vault(root)
    try:
        outputs = [json.loads((tmp_path / f"out{k}.json").read_text()) for k in range(4)]
        expected_files = 0
        for out in outputs:
            for memory_id, content in out["own"].items():
                if content is None:
                    with pytest.raises(NotFound):
                        vault.get(memory_id)
                else:
                    assert vault.get(memory_id)["content"].strip() == content  # no lost write
                    expected_files += 1

        shared: dict[str, set[str]] = {}
        for out in outputs:
            for content, ids in out["shared"].items():
                shared.setdefault(content, set()).update(ids)
        for content, namespace, memory_id in cli_ids:
            if namespace == "shared":
                shared.setdefault(content, set()).add(memory_id)
            else:
                assert vault.get(memory_id)["content"].strip() == content
                expected_files += 1
        for content, ids in shared.items():
            assert len(ids) == 1, f"{content!r} stored as {ids}"  # stored once, whoever raced
            hits = vault.search(content, namespace="shared", match="all", limit=20)["hits"]
            assert [h["id"] for h in hits if h["title"] == content] == list(ids)

        files = [rel for rel, _ in vault.store.walk()]
        assert len(files) == expected_files + len(shared)  # no duplicate file
        ids_on_disk = [vault.index.by_path(rel)["id"] for rel in files]
        assert len(set(ids_on_disk)) == len(ids_on_disk)  # no duplicate id
        assert vault.stats()["duplicate_ids"] == {}
        assert_index_matches_files(vault)
    finally:
        vault.close()
