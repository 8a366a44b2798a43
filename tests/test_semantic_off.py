"""Without the semantic extra (or with it switched off) nothing changes: recall is
lexical, and numpy, tokenizers and the model are never imported."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_memory.cli.app import cli
from agent_memory.errors import InvalidInput
from agent_memory.recall import rank
from agent_memory.recall.rank import FACTS, Scored
from agent_memory.semantic.status import extra_installed
from agent_memory.vault.vault import Vault
from conftest import deadline

PROBE = r"""
import sys
from pathlib import Path
root = Path(sys.argv[1])
if sys.argv[2] == "off":
    root.mkdir(parents=True)
    (root / ".agent-memory.toml").write_text("[recall]\nsemantic = false\n")
import agent_memory.cli, agent_memory.vault.doctor, agent_memory.server.app
from agent_memory.server.app import build_server
from agent_memory.watch.watcher import Watcher
from agent_memory.vault.vault import Vault
vault = Vault.init(root)
vault.remember("The family vehicle is a leased Skoda Octavia.")
with Watcher(vault, sweep_interval=3600):
    vault.search("What car do they drive?")
    vault.search("Skoda")
    vault.stats()
    vault.reindex()
build_server(vault)
agent_memory.vault.doctor.diagnose(root)
vault.close()
print(sorted(m for m in ("numpy", "tokenizers", "agent_memory.semantic.embed", "agent_memory.semantic.vectors") if m in sys.modules))
"""


def test_nothing_optional_is_imported_without_the_extra_or_with_it_off(tmp_path: Path) -> None:
    """Every front end's path runs in a fresh interpreter: no numpy, no tokenizers, no
    encoder. With the extra installed, the vault's ``recall.semantic = false`` does it."""
    mode = "off" if extra_installed() else "absent"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_MEMORY")}
    done = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "vault"), mode], env=env, check=False,
                          capture_output=True, text=True, timeout=deadline(120))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.skipif(extra_installed(), reason="the semantic extra is installed here")
def test_without_the_extra_recall_says_how_to_get_semantic(vault: Vault) -> None:
    vault.remember("The family vehicle is a leased Skoda Octavia.")
    assert vault.search("What car do they drive?")["count"] == 0  # lexical: no word in common
    with pytest.raises(InvalidInput, match=r'pip install "agent-memory\[semantic\]"'):
        vault.search("What car do they drive?", semantic=True)
    status = vault.stats()["semantic"]
    assert status["enabled"] is False and status["installed"] is False and "pip install" in status["hint"]
    assert "embedded" not in vault.reindex()
    assert not (vault.index_dir / "vectors.sqlite3").exists()


@pytest.mark.skipif(extra_installed(), reason="the semantic extra is installed here")
def test_stats_and_doctor_say_semantic_recall_is_off(vault: Vault) -> None:
    vault.close()
    runner = CliRunner()
    stats = runner.invoke(cli, ["--dir", str(vault.root), "stats"])
    assert "Semantic   off (the optional extra is not installed)" in stats.output
    doctor = json.loads(runner.invoke(cli, ["--dir", str(vault.root), "--json", "doctor"]).output)
    checks = doctor["checks"] if isinstance(doctor, dict) else doctor
    found = [c for c in checks if c["name"] == "semantic recall"]
    assert found and found[0]["ok"] and "not installed" in found[0]["detail"]


# --------------------------------------------------------------------------- the rule, pure


def scored(rid: int, terms: tuple[str, ...] = ()) -> Scored:
    return Scored(rid, 1.0, terms, {"coverage": 1.0}, complete=False)


def test_by_meaning_puts_close_memories_first_then_the_partial_hits_left() -> None:
    nearest = [(7, 0.61), (3, 0.40), (9, 0.19)]  # 9 is below the floor
    partial = [scored(3, ("car",)), scored(5, ("drive",))]
    out = rank.by_meaning(nearest, partial, {}, FACTS)
    assert [(s.rid, s.found_by) for s in out] == [(7, "semantic"), (3, "semantic"), (5, "lexical")]
    assert out[1].matched == ("car",) and out[1].parts["semantic"] == 0.40


def test_by_meaning_prefers_the_newest_of_near_equals_when_asked_for_the_current_state() -> None:
    nearest = [(1, 0.70), (2, 0.67), (3, 0.50)]
    updated = {1: "2024-01-01T00:00:00Z", 2: "2025-06-01T00:00:00Z", 3: "2026-01-01T00:00:00Z"}
    assert [s.rid for s in rank.by_meaning(nearest, [], updated, FACTS, newest=True)] == [2, 1, 3]
    assert [s.rid for s in rank.by_meaning(nearest, [], updated, FACTS)] == [1, 2, 3]


def test_fuse_adds_a_weighted_place_in_the_semantic_ranking_to_the_lexical_one() -> None:
    config = dataclasses.replace(FACTS, fusion_weight=0.5, fusion_k=5, fusion_pool=3)
    lexical = [Scored(1, 9.0, ("a", "b"), {}, complete=True), scored(2, ("a",)), scored(3, ("b",)), scored(4, ("a",))]
    out = rank.fuse([(3, 0.7), (8, 0.6)], lexical, config)
    # 1: 1/6; 3: 1/8 + 0.5/6; 8: 0.5/7; 2: 1/7; 4 is past the pool and keeps its place after them.
    assert [s.rid for s in out] == [3, 1, 2, 8, 4]
    assert [s.found_by for s in out] == ["both", "lexical", "lexical", "semantic", "lexical"]
    assert out[1].complete and not out[3].complete and out[3].matched == ()
