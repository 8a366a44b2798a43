"""Semantic recall: the optional extra's vectors and how recall uses them.

Skipped with a reason where the extra (numpy, tokenizers) or the all-MiniLM-L6-v2
weights are not installed; ``test_semantic_off.py`` checks the vault without them.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from pathlib import Path

import pytest

from agent_memory.semantic.model_files import VECTORS_FILE
from agent_memory.semantic.status import extra_installed

# CI's second environment installs the extra and its weights and sets this: there a
# missing piece is a failure, not a skip.
REQUIRED = os.environ.get("AGENT_MEMORY_TEST_SEMANTIC") == "required"

if not extra_installed():
    if REQUIRED:
        raise RuntimeError('AGENT_MEMORY_TEST_SEMANTIC=required, but the semantic extra is not installed')
    pytest.skip('the semantic extra is not installed (pip install "agent-memory[semantic]")', allow_module_level=True)

import numpy as np

from agent_memory.semantic import embed, vectors
from agent_memory.vault.vault import Vault
from agent_memory.semantic.vectors import (EXACT_MAX, Loaded, VectorIndex, VectorStore, digests, embedded_text, hexes,
                                           quantize, sign_codes)
from conftest import deadline, run_cli, wait_until


@pytest.fixture(autouse=True)
def use_model(model_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_MEMORY_MODEL", str(model_folder))


CAR = "The family vehicle is a leased Skoda Octavia, returned to the dealer in 2027."
COFFEE = "Kenji takes his coffee black with no sugar."
DEPLOY = "Production deploys happen on Tuesdays and Thursdays after the standup."
QUESTION = "What car do they drive?"  # no word of it is in any memory


def ids_of(result: dict) -> list[str]:
    return [hit["id"] for hit in result["hits"]]


# --------------------------------------------------------------------------- the encoder


def test_the_encoder_reproduces_sentence_transformers_similarities() -> None:
    """sentence-transformers' own example for this model (its README) prints 0.6660,
    0.1046 and 0.1411 for these three sentences: our numpy forward pass must agree."""
    vectors = embed.shared_encoder().encode(["The weather is lovely today.", "It's so sunny outside!",
                                             "He drove to the stadium."])
    sims = vectors @ vectors.T
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert sims[0, 1] == pytest.approx(0.6660, abs=2e-3)
    assert sims[0, 2] == pytest.approx(0.1046, abs=2e-3)
    assert sims[1, 2] == pytest.approx(0.1411, abs=2e-3)


def test_an_obvious_paraphrase_is_nearer_than_an_unrelated_sentence() -> None:
    question, car, coffee = embed.shared_encoder().encode([QUESTION, CAR, COFFEE])
    assert question @ car > question @ coffee + 0.2


def test_the_forward_pass_stays_in_float32() -> None:
    """A float64 anywhere in the layers made every product copy its weights to float64
    first: a question took five times as long."""
    encoder = embed.shared_encoder()
    ids = encoder.tokenizer.encode("what car does the family drive").ids
    assert encoder._forward([ids]).dtype == np.float32
    assert encoder._forward([ids, ids[:3]]).dtype == np.float32


def test_weights_read_as_half_and_bfloat16_keep_their_values(tmp_path: Path) -> None:
    """read_safetensors on a real file: float16 and bfloat16 copies are within their
    precision of the stored float32, the others exact, and each keeps its shape."""
    rng = np.random.default_rng(3)
    tensors = {"a": rng.standard_normal((300, 7)).astype(np.float32),
               "b": rng.standard_normal((5, 70000)).astype(np.float32),  # more than one block
               "c": rng.standard_normal(9).astype(np.float32)}
    header, offset, data = {}, 0, b""
    for name, value in tensors.items():
        raw = value.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(value.shape), "data_offsets": [offset, offset + len(raw)]}
        offset, data = offset + len(raw), data + raw
    head = json.dumps(header).encode()
    (tmp_path / "m.safetensors").write_bytes(len(head).to_bytes(8, "little") + head + data)
    read = embed.read_safetensors(tmp_path / "m.safetensors", f16=frozenset({"a"}), bf16=frozenset({"b"}))
    assert read["a"].dtype == np.float16 and read["a"].shape == (300, 7)
    assert np.allclose(read["a"], tensors["a"], rtol=1e-3, atol=1e-4)
    wide = embed.widen(read["b"], np.empty(read["b"].size, dtype=np.uint32))
    assert wide.dtype == np.float32 and wide.shape == (5, 70000)
    assert np.abs(wide - tensors["b"]).max() <= np.abs(tensors["b"]).max() * 2.0 ** -8
    assert np.array_equal(read["c"], tensors["c"])


def test_file_versions_survive_the_compact_form() -> None:
    """A sha256 ending in zero bytes (an S32 item drops them) comes back whole."""
    found = ["00" * 32, "ab" * 31 + "00", "0f" * 32]
    assert hexes(digests(found)) == found


def row_of(loaded: Loaded, keys: list[str]) -> np.ndarray:
    """The live row of each one-chunk file version, -1 where it has none."""
    out = np.full(len(keys), -1, dtype=np.int64)
    owner, rows = loaded.rows_of(digests(keys))
    out[owner] = rows
    return out


def test_loaded_vectors_take_new_ones_in_place(tmp_path: Path) -> None:
    """Vectors committed after the load are read alone and appended: rows already
    loaded are neither re-read nor moved (a search holding them keeps its answers),
    a dropped one stops being found, and one that comes back is found again."""
    rng = np.random.default_rng(11)

    def unit(n: int) -> np.ndarray:
        v = rng.standard_normal((n, embed.DIMENSIONS)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    key = [f"{i:062x}00" for i in range(1, 8)]  # trailing zero bytes, which an S32 item drops when read back
    store = VectorStore(tmp_path)
    try:
        first = unit(4)
        store.put(key[:4], first)
        loaded = Loaded.read(store)
        codes, before = loaded.codes, loaded.codes[:4].copy()
        assert row_of(loaded, key[:5]).tolist() == [0, 1, 2, 3, -1]
        store.put(key[4:6], unit(2))
        store.drop({key[1]})
        assert loaded.refresh(store, store.keys()) is True
        assert loaded.codes is codes and np.array_equal(loaded.codes[:4], before)
        rows = row_of(loaded, key[:6])
        assert rows[1] == -1 and sorted(rows[[0, 2, 3]].tolist()) == [0, 2, 3] and sorted(rows[4:].tolist()) == [4, 5]
        assert np.array_equal(loaded.codes[rows[0]], quantize(first[:1])[0][0])
        store.put([key[1]], first[1:2])
        assert loaded.refresh(store, store.keys()) is True
        assert row_of(loaded, [key[1]]).tolist() == [1]
        # Past the room kept at load time, refresh asks for a new load instead.
        many = [f"{i:064x}" for i in range(100, 100 + len(loaded.keys))]
        store.put(many, unit(len(many)))
        assert loaded.refresh(store, store.keys()) is False
        again = Loaded.read(store)
        assert (row_of(again, key[:6] + many) >= 0).all()
    finally:
        store.close()


def test_a_large_index_ranks_by_sign_codes_then_exactly() -> None:
    """Past EXACT_MAX memories the first pass is by Hamming distance of sign codes: a
    memory whose vector is the query's still comes first, with its exact cosine."""
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((EXACT_MAX + 500, embed.DIMENSIONS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    codes, scales = quantize(vectors)
    rids = np.arange(1, len(vectors) + 1, dtype=np.int64)
    index = VectorIndex(rids, np.arange(len(vectors)), codes, scales, np.ascontiguousarray(sign_codes(codes).T))
    target = 12345
    found = index.nearest(vectors[target], lambda rids: set(rids) if rids is not None else set(rids_all(index)), 5)
    assert found[0][0] == target + 1
    assert found[0][1] == pytest.approx(1.0, abs=0.02)
    # A filter that keeps only even row numbers still gets what it asked for.
    kept = index.nearest(vectors[target], lambda rids: {r for r in (rids if rids is not None else rids_all(index))
                                                         if r % 2 == 0}, 5)
    assert all(rid % 2 == 0 for rid, _ in kept) and len(kept) >= 5
    # A filter none of the nearest pass: the memories within it, scored exactly, best first.
    few = {7, 20_001, 333, 4_000}
    widened = index.nearest(vectors[target], lambda rids: {r for r in rids if r in few} if rids is not None else few, 3)
    exact = {rid: float(codes[rid - 1].astype(np.float32) @ vectors[target] / scales[rid - 1]) for rid in few}
    best = sorted(few, key=lambda rid: -exact[rid])[:3]
    assert [rid for rid, _ in widened] == best
    assert [s for _, s in widened] == pytest.approx([exact[rid] for rid in best], abs=1e-5)


def rids_all(index: VectorIndex) -> list[int]:
    return [int(r) for r in index.rids]


# --------------------------------------------------------------------------- recall


@pytest.fixture
def filled(vault: Vault) -> dict[str, str]:
    ids = {
        "car": vault.remember(CAR, namespace="home", tags=["family"])["memory"]["id"],
        "coffee": vault.remember(COFFEE, namespace="work", tags=["people"])["memory"]["id"],
        "deploy": vault.remember(DEPLOY, namespace="work", tags=["ops"])["memory"]["id"],
    }
    return ids


def test_a_paraphrase_finds_its_memory_only_with_semantic_on(vault: Vault, filled: dict[str, str]) -> None:
    lexical = vault.search(QUESTION, semantic=False)
    assert filled["car"] not in ids_of(lexical)
    found = vault.search(QUESTION, semantic=True)
    assert ids_of(found)[0] == filled["car"]
    assert found["hits"][0]["found_by"] == "semantic"
    assert "closest in meaning" in found["note"]
    assert found["hits"][0]["snippet"]  # no term matched: the memory's opening words


def test_questions_some_memory_answers_word_for_word_keep_the_lexical_order(vault: Vault, filled: dict[str, str]) -> None:
    on, off = vault.search("Kenji coffee", semantic=True), vault.search("Kenji coffee", semantic=False)
    assert ids_of(on) == ids_of(off) == [filled["coffee"]]
    assert "found_by" not in on["hits"][0]


@pytest.mark.parametrize("filters, allowed", [
    ({"namespace": "work"}, {"coffee", "deploy"}),
    ({"tags": ["ops"]}, {"deploy"}),
    ({"path_prefix": "nowhere"}, set()),
    ({"until": "2000-01-01"}, set()),
    ({"type": "decision"}, set()),
    ({"min_importance": 5}, set()),
])
def test_filters_apply_to_semantic_hits(vault: Vault, filled: dict[str, str], filters: dict, allowed: set[str]) -> None:
    found = vault.search(QUESTION, semantic=True, **filters)
    names = {name for name, memory_id in filled.items() if memory_id in ids_of(found)}
    assert names <= allowed
    assert filled["car"] not in ids_of(found)


def test_expired_memories_are_not_semantic_hits(vault: Vault, clock) -> None:
    gone = vault.remember(CAR, ttl_days=1)["memory"]["id"]
    assert ids_of(vault.search(QUESTION, semantic=True)) == [gone]
    clock.advance(days=2)
    assert gone not in ids_of(vault.search(QUESTION, semantic=True))


def test_the_setting_and_the_argument_switch_it(vault: Vault, filled: dict[str, str]) -> None:
    assert ids_of(vault.search(QUESTION))[:1] == [filled["car"]]  # unset: on, the extra is installed
    (vault.root / ".agent-memory.toml").write_text("[recall]\nsemantic = false\n")
    assert filled["car"] not in ids_of(vault.search(QUESTION))
    assert ids_of(vault.search(QUESTION, semantic=True))[:1] == [filled["car"]]
    assert vault.stats()["semantic"]["enabled"] is False


def test_explain_says_which_signal_found_each_hit(vault: Vault, filled: dict[str, str]) -> None:
    found = vault.search("What car do they drive to the standup?", semantic=True, explain=True)
    by_id = {s["id"]: s["parts"] for s in found["explain"]["scores"]}
    assert "semantic" in by_id[filled["car"]]
    assert {hit["found_by"] for hit in found["hits"]} <= {"semantic", "lexical"}


def test_the_cli_switch(vault_dir: Path, vault: Vault, filled: dict[str, str]) -> None:
    from click.testing import CliRunner

    from agent_memory.cli.app import cli

    runner = CliRunner()
    vault.close()
    on = runner.invoke(cli, ["--dir", str(vault_dir), "--json", "search", QUESTION])
    off = runner.invoke(cli, ["--dir", str(vault_dir), "--json", "search", "--no-semantic", QUESTION])
    assert on.exit_code == 0 and off.exit_code == 0, on.output + off.output
    assert ids_of(json.loads(on.output))[:1] == [filled["car"]]
    assert filled["car"] not in ids_of(json.loads(off.output))


@pytest.mark.anyio
async def test_the_recall_tool_takes_semantic(vault: Vault, filled: dict[str, str]) -> None:
    from mcp import Client

    from agent_memory.server.app import build_server

    async with Client(build_server(vault)) as client:
        on = (await client.call_tool("recall", {"query": QUESTION})).structured_content
        off = (await client.call_tool("recall", {"query": QUESTION, "semantic": False})).structured_content
    assert ids_of(on)[:1] == [filled["car"]] and on["hits"][0]["found_by"] == "semantic"
    assert filled["car"] not in ids_of(off)


# --------------------------------------------------------------------------- vectors as an index


def vector_keys(vault: Vault) -> set[str]:
    """The file versions the vectors file holds: none while it is not made yet (a
    watcher starts the embedder after its first sweep)."""
    path = vault.index_dir / VECTORS_FILE
    if not path.exists():
        return set()
    conn = sqlite3.connect(path)
    try:
        return {row[0] for row in conn.execute("SELECT sha256 FROM vectors")}
    except sqlite3.OperationalError:  # made, its table not yet
        return set()
    finally:
        conn.close()


def file_versions(vault: Vault) -> set[str]:
    return {row[0] for row in vault.index.query("SELECT sha256 FROM memories")}


def test_reindex_rebuilds_missing_or_broken_vectors(vault_dir: Path, vault: Vault, filled: dict[str, str]) -> None:
    vault.search(QUESTION)  # embeds them
    vault.close()
    (vault_dir / ".index" / VECTORS_FILE).write_bytes(b"not a database at all")
    for suffix in ("-wal", "-shm"):
        (vault_dir / ".index" / f"{VECTORS_FILE}{suffix}").unlink(missing_ok=True)
    again = Vault(vault_dir)
    try:
        embedded: list[tuple[int, int]] = []
        report = again.reindex(
            progress=lambda step: embedded.append((step.done, step.total)) if step.phase == "embedding memories" else None)
        assert report["embedded"] == 3 and embedded[-1] == (3, 3)
        assert vector_keys(again) == file_versions(again)
        status = again.stats()["semantic"]
        assert status["current"] and status["vectors"] == status["memories"] == 3
        assert ids_of(again.search(QUESTION))[:1] == [filled["car"]]
        assert again.reindex()["embedded"] == 0  # a file's vector depends on its bytes: kept
    finally:
        again.close()


def test_the_cli_reindex_says_what_it_embedded_and_nothing_when_all_were_kept(
        vault_dir: Path, vault: Vault, filled: dict[str, str]) -> None:
    vault.search(QUESTION)  # embeds them
    vault.close()
    (vault_dir / ".index" / VECTORS_FILE).write_bytes(b"not a database at all")
    for suffix in ("-wal", "-shm"):
        (vault_dir / ".index" / f"{VECTORS_FILE}{suffix}").unlink(missing_ok=True)
    first = run_cli("reindex", vault=vault_dir)
    assert first.returncode == 0, first.stderr
    assert "Embedded 3 memories for semantic recall" in first.stdout
    second = run_cli("reindex", vault=vault_dir)
    assert second.returncode == 0 and second.stdout.startswith("Indexed 3 files")
    assert "Embedded" not in second.stdout  # every vector kept: nothing to say


def test_writes_are_embedded_in_the_background_and_never_touch_files(vault: Vault) -> None:
    vault.keep_vectors()
    written = vault.remember(CAR)["memory"]
    path = vault.root / written["path"]
    before = path.read_bytes()
    wait_until(lambda: vault.stats()["semantic"].get("current") is True, "the new memory's vector", seconds=120)
    assert path.read_bytes() == before  # the vector is in the index folder only
    assert not any(VECTORS_FILE in p.name for p in vault.root.rglob("*") if ".index" not in p.parts)
    vault.update(written["id"], content=COFFEE, expected_version=written["version"])
    wait_until(lambda: vector_keys(vault) == file_versions(vault), "the edited memory's vector, the old one dropped", seconds=120)
    assert ids_of(vault.search("How does Kenji like it?"))[:1] == [written["id"]]


def test_remember_does_not_wait_for_the_model(vault: Vault) -> None:
    """The background embedder is held on its lock; remember still returns."""
    vault.keep_vectors()
    embedder = vault.vectors.embedder()
    assert embedder is not None
    with embedder._work:  # the embedder is busy (a long batch)
        done = threading.Event()

        def write() -> None:
            vault.remember(DEPLOY)
            done.set()

        writer = threading.Thread(target=write)
        writer.start()
        writer.join(timeout=deadline(120))
        assert done.is_set()
        assert vault.stats()["semantic"]["current"] is False
    wait_until(lambda: vault.stats()["semantic"].get("current") is True, "the memory's vector once the embedder is free", seconds=120)


def test_a_hand_edit_seen_by_the_watcher_gets_its_vector(vault: Vault) -> None:
    from agent_memory.watch.watcher import Watcher

    with Watcher(vault, debounce=0.05, sweep_interval=3600):
        (vault.root / "car.md").write_text(f"# Car\n\n{CAR}\n")
        wait_until(lambda: vault.index.by_path("car.md") is not None, "the watcher to index car.md", seconds=120)
        wait_until(lambda: vector_keys(vault) >= file_versions(vault), "car.md's vector", seconds=120)
        found = vault.search(QUESTION)
        assert found["hits"][0]["path"] == "car.md"
        (vault.root / "car.md").write_text(f"# Coffee\n\n{COFFEE}\n")
        wait_until(lambda: vault.index.by_path("car.md")["title"] == "Coffee", "the watcher to see the edit", seconds=120)
        wait_until(lambda: vector_keys(vault) == file_versions(vault), "the edited file's vector, the old one dropped", seconds=120)
        assert vault.search("How does Kenji like it?")["hits"][0]["path"] == "car.md"


def test_the_conversation_profile_fuses_both_rankings(vault: Vault, filled: dict[str, str]) -> None:
    """Dialog is served better by words (LoCoMo): the conversation profile keeps the
    lexical ranking and adds memories by meaning at half weight, so a paraphrase is
    still found and a memory holding every word stays first."""
    found = vault.search(QUESTION, profile="conversation")
    assert ids_of(found)[:1] == [filled["car"]] and found["hits"][0]["found_by"] == "semantic"
    words = vault.search("Kenji coffee", profile="conversation")
    assert ids_of(words)[0] == filled["coffee"] and words["hits"][0]["found_by"] == "both"
    assert words["hits"][0]["complete"] is True


def test_doctor_and_stats_say_whether_vectors_are_current(vault: Vault, filled: dict[str, str]) -> None:
    from click.testing import CliRunner

    from agent_memory.cli.app import cli

    vault.search(QUESTION)  # embeds the three
    (vault.root / "new.md").write_text(f"# New\n\n{DEPLOY} Also on Fridays.\n")
    vault.reconcile()  # indexed, no vector yet: no background thread in this process
    status = vault.stats()["semantic"]
    assert status["vectors"] == 3 and status["memories"] == 4 and status["current"] is False
    assert "have no vector yet" in status["hint"]

    def doctor() -> dict:
        done = CliRunner().invoke(cli, ["--dir", str(vault.root), "--json", "doctor"])
        found = json.loads(done.output)
        return next(c for c in (found["checks"] if isinstance(found, dict) else found) if c["name"] == "semantic recall")

    stale = doctor()
    assert not stale["ok"] and "1 of 4 memories have no vector" in stale["detail"] and stale["items"] == ["new.md"]
    vault.reindex()
    assert doctor()["ok"] and "vectors current" in doctor()["detail"]
    stats = CliRunner().invoke(cli, ["--dir", str(vault.root), "stats"])
    assert "Semantic   on: 4 of 4 memories have vectors (current)" in stats.output


# --------------------------------------------------------------------------- every chunk, resuming, waiting

FILLER = "The garden log lists tomatoes, basil, compost and the rain gauge readings for each week. "
CORPUS = Path(__file__).resolve().parents[1] / ".." / "shared" / "corpora" / "obsidian-help"


def vector_rows(vault: Vault) -> list[str]:
    conn = sqlite3.connect(vault.index_dir / VECTORS_FILE)
    try:
        return [row[0] for row in conn.execute("SELECT sha256 FROM vectors")]
    finally:
        conn.close()


def test_a_sentence_deep_in_a_long_memory_is_found_by_meaning(vault: Vault) -> None:
    """Every chunk of a long memory is embedded: a paraphrase of a sentence past its
    first 256 tokens finds it, and it is one hit however many chunks match."""
    car_section = "\n\n## Vehicle\n\n" + CAR + " The Skoda needs winter tyres before November, and its insurance renews in March."
    long_one = vault.remember("Garden diary\n\n" + FILLER * 40 + car_section)["memory"]["id"]
    coffee = vault.remember(COFFEE)["memory"]["id"]
    hits = ids_of(vault.search(QUESTION))
    assert hits[:1] == [long_one] and coffee not in hits[:1]
    rows = vector_rows(vault)
    assert len(rows) > 3 and len(set(rows)) == 2  # several chunks of one file version, one of the other


def test_chunks_cover_every_token_within_the_model_and_stop_at_the_cap() -> None:
    encoder = embed.shared_encoder()
    words = [f"w{i}" for i in range(3_000)]  # each word its own few tokens, in order
    text = " ".join(words)
    body = encoder.tokenizer.encode(text, add_special_tokens=False).ids
    chunks = encoder.chunks(text, head="Log")
    assert all(len(c) <= embed.MAX_TOKENS and c[0] == encoder.cls and c[-1] == encoder.sep for c in chunks)
    lead = encoder.tokenizer.encode("Log\n", add_special_tokens=False).ids
    assert all(c[1:1 + len(lead)] == lead for c in chunks[1:])  # each later window says whose it is
    seen = [c[1:-1] for c in chunks[:1]] + [c[1 + len(lead):-1] for c in chunks[1:]]
    joined: list[int] = list(seen[0])
    for window in seen[1:]:
        assert window[:embed.OVERLAP] == joined[-embed.OVERLAP:]  # overlapping: nothing falls between
        joined += window[embed.OVERLAP:]
    assert joined == body
    huge = encoder.chunks(text * 40, head="Log")
    assert len(huge) == embed.MAX_CHUNKS
    assert encoder.chunks("short") == [encoder.tokenizer.encode("short").ids]  # as the model reads a short text


def test_a_memory_of_many_chunks_is_one_hit_scored_by_its_best() -> None:
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((6, embed.DIMENSIONS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    codes, scales = quantize(vectors)
    rids = np.array([1, 1, 1, 2, 2, 3], dtype=np.int64)  # memory 1 has three chunks, 2 two, 3 one
    index = VectorIndex(rids, np.arange(6), codes, scales, np.ascontiguousarray(sign_codes(codes).T))
    found = index.nearest(vectors[4], lambda rids: set(rids) if rids is not None else {1, 2, 3}, 3)
    assert [rid for rid, _ in found] == [2, *sorted({1, 3}, key=lambda r: -max(
        float(vectors[i] @ vectors[4]) for i in range(6) if rids[i] == r))]
    assert found[0][1] == pytest.approx(1.0, abs=0.02)
    only = index.nearest(vectors[4], lambda rids: {1} & set(rids) if rids is not None else {1}, 2)
    best_of_1 = max(float(vectors[i] @ vectors[4]) for i in range(3))
    assert [rid for rid, _ in only] == [1] and only[0][1] == pytest.approx(best_of_1, abs=0.02)


def exact_gelu(h: np.ndarray) -> np.ndarray:
    """BERT's GELU by erf (Abramowitz and Stegun 7.1.26, within 1.5e-7): what the
    encoder computed before it took the tanh form."""
    x = h / np.float32(np.sqrt(2.0))
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.asarray(0.5 * h * (1.0 + np.sign(x) * (1.0 - poly * np.exp(-a * a))), dtype=np.float32)


def test_the_tanh_gelu_keeps_the_vectors_of_the_exact_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The faster GELU moves no vector of real notes' chunks below cosine 0.99 (they
    agree to about 0.99999)."""
    if not CORPUS.is_dir():
        pytest.skip(f"the obsidian-help corpus is not at {CORPUS}")
    encoder = embed.Encoder()
    pieces: list[list[int]] = []
    for path in sorted(CORPUS.rglob("*.md"))[::60]:  # every language
        pieces += encoder.chunks(path.read_text(encoding="utf-8"), head=path.stem)[-1:]
    fast = encoder.encode_ids(pieces)
    monkeypatch.setattr(embed, "_gelu", exact_gelu)
    exact = encoder.encode_ids(pieces)
    assert len(pieces) >= 15 and ((fast * exact).sum(axis=1) >= 0.99).all()


def test_threaded_batches_agree_with_one_forward_pass_per_chunk() -> None:
    """The chunks of real notes encoded together (sorted by length, batched, on
    threads) get the vectors each gets alone: cosine >= 0.99 per vector."""
    if not CORPUS.is_dir():
        pytest.skip(f"the obsidian-help corpus is not at {CORPUS}")
    encoder = embed.Encoder()
    pieces: list[list[int]] = []
    for path in sorted((CORPUS / "en").rglob("*.md"))[::20]:
        pieces += encoder.chunks(path.read_text(encoding="utf-8"), head=path.stem)[-1:]  # lengths vary
    assert len(pieces) >= 8 and len({len(p) for p in pieces}) > 3
    together = encoder.encode_ids(pieces)
    alone = np.concatenate([encoder._forward([p]) for p in pieces])
    assert ((together * alone).sum(axis=1) >= 0.99).all()


CHILD = """
import os, signal, sys
from pathlib import Path
from agent_memory.semantic import embed, vectors
from agent_memory.vault.vault import Vault

vectors.EMBED_BATCH = 4
calls = 0
real = embed.Encoder.encode_ids

def counted(self, pieces):
    global calls
    calls += 1
    if calls == int(sys.argv[2]):  # mid-build: two batches committed, the third being encoded
        os.kill(os.getpid(), signal.SIGKILL)
    return real(self, pieces)

embed.Encoder.encode_ids = counted
Vault(Path(sys.argv[1])).reindex()
"""


def test_a_build_killed_midway_resumes_without_redoing_done_chunks(vault_dir: Path, vault: Vault) -> None:
    """kill -9 while the third batch is encoded: the two committed batches keep their
    vectors, and the next open embeds only the rest."""
    import subprocess
    import sys

    for i in range(10):  # every other one long: several chunks, all committed with it or none
        vault.remember(f"Note {i}: " + FILLER * (1 + 30 * (i % 2)))
    vault.close()
    (vault_dir / ".index" / VECTORS_FILE).unlink(missing_ok=True)
    child = subprocess.run([sys.executable, "-c", CHILD, str(vault_dir), "3"], capture_output=True, text=True,
                           timeout=deadline(600))
    assert child.returncode == -9, child.stderr
    again = Vault(vault_dir)
    try:
        kept = set(vector_rows(again))
        assert len(kept) == 8  # two batches of four, each with all its chunks
        encoded: list[list[int]] = []
        real = embed.Encoder.encode_ids

        def counted(self: embed.Encoder, pieces: list[list[int]]) -> np.ndarray:
            encoded.extend(pieces)
            return real(self, pieces)

        embed.Encoder.encode_ids = counted  # type: ignore[method-assign]
        try:
            assert again.reindex()["embedded"] == 2
        finally:
            embed.Encoder.encode_ids = real  # type: ignore[method-assign]
        encoder = embed.Encoder()
        todo = [r for r in again.index.query("SELECT sha256, title, body FROM memories") if r["sha256"] not in kept]
        wanted = [p for r in todo for p in encoder.chunks(embedded_text(r["title"], r["body"]), head=r["title"])]
        assert sorted(encoded) == sorted(wanted)  # the rest's chunks, each once, none of the done ones
        assert set(vector_rows(again)) == file_versions(again)
    finally:
        again.close()


def test_words_find_memories_while_their_vectors_are_being_built(vault: Vault) -> None:
    """The background embedder is stuck in the middle of a batch: a search still
    answers by words at once, and says the vectors are not current."""
    ids = [vault.remember(text)["memory"]["id"] for text in (CAR, COFFEE, DEPLOY)]
    inside, go = threading.Event(), threading.Event()
    real = embed.Encoder.encode_ids

    def slow(self: embed.Encoder, pieces: list[list[int]]) -> np.ndarray:
        if threading.current_thread().name == "agent-memory-embedder":
            inside.set()
            go.wait(deadline(120))
        return real(self, pieces)

    embed.Encoder.encode_ids = slow  # type: ignore[method-assign]
    try:
        vault.keep_vectors()
        wait_until(inside.is_set, "the embedder in the middle of a batch")
        assert ids_of(vault.search("coffee sugar"))[:1] == [ids[1]]
        assert vault.stats()["semantic"]["current"] is False
    finally:
        go.set()
        embed.Encoder.encode_ids = real  # type: ignore[method-assign]
    wait_until(lambda: vault.stats()["semantic"].get("current") is True, "the vectors built after all", seconds=300)


def test_a_search_leaves_a_long_note_without_vectors_to_the_background(vault: Vault,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A one-shot search embeds a few short memories itself, not a long note of many
    chunks: it answers by words and the note is embedded by reindex (or a server). The
    budget is made small here so that a note of three chunks exceeds it."""
    monkeypatch.setattr(vectors, "INLINE_CHARS", 1_000)
    vault.remember("Garden log\n\n" + FILLER * 25)
    coffee = vault.remember(COFFEE)["memory"]["id"]
    sizes: list[int] = []
    real = embed.Encoder.encode_ids

    def counted(self: embed.Encoder, pieces: list[list[int]]) -> np.ndarray:
        sizes.append(len(pieces))
        return real(self, pieces)

    embed.Encoder.encode_ids = counted  # type: ignore[method-assign]
    try:
        assert ids_of(vault.search("coffee sugar"))[:1] == [coffee]
        assert max(sizes, default=0) <= 1  # the question at most
        assert vault.stats()["semantic"]["vectors"] == 0
        assert vault.reindex()["embedded"] == 2 and max(sizes) > 2
    finally:
        embed.Encoder.encode_ids = real  # type: ignore[method-assign]
    assert vault.stats()["semantic"]["current"] is True
