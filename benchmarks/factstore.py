"""Fact-store recall benchmark: does ``Vault.search`` put the memory that answers first?

The data (``benchmarks/factstore/factstore.json``) is a hand-written store of one team's
facts, the kind an agent keeps: preferences, decisions, procedures, people, incidents,
customers, infrastructure. Every memory is written through ``Vault.remember`` with the
vault's clock set to its ``created`` date (in date order, as an agent would have written
them); a memory that replaces another gets ``supersedes: ["[[old]]"]`` through
``Vault.link``, and a memory edited later gets its text appended through ``Vault.update``
at that date. Each question is then asked with
``Vault.search(question, profile=P, limit=10)`` for both profiles, exactly an agent's
``recall`` with the default ``match="auto"``.

    python benchmarks/factstore.py            # every question, both profiles
    python benchmarks/factstore.py --quick    # a quarter of the questions (smoke run)
    python benchmarks/factstore.py --misses   # also list the held-out questions whose top hit is wrong
    python benchmarks/factstore.py --spacing 60  # the same memories written a minute apart in one session
    python benchmarks/factstore.py --semantic    # lexical-only and with semantic recall, side by side

Metrics per question: top-1 (the first hit answers), R@3 and R@10 (a question answered by
any one of its gold memories scores 1 when one is there; a multi-fact question,
``need: all``, scores the share of its gold memories there), MRR (1 / rank of the first
gold hit within the top 10). Questions with odd ``n`` are the tuning half, even ``n`` the
held-out half. No network; the vault lives in a temporary folder and is removed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent_memory.recall.rank import PROFILES  # noqa: E402
from agent_memory.vault.vault import Vault  # noqa: E402

DATA = Path(__file__).resolve().parent / "factstore" / "factstore.json"
# The hash written in benchmarks/README.md when the set was frozen (before any measuring).
FROZEN_SHA256 = "ab26330ef9e7f7ce747fbbc2c0a6477691655f10e57eb0d50c613a8d20475cc3"
LIMIT = 10
SESSION_START = dt.datetime(2025, 6, 12, 9, 0, tzinfo=dt.timezone.utc)
KINDS = ("lexical", "paraphrase", "typo", "recency", "multi")


def _when(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(dt.timezone.utc)


class Clock:
    """The vault's clock, set to each memory's date while it is written."""

    def __init__(self) -> None:
        self.now = dt.datetime.now(dt.timezone.utc)

    def __call__(self) -> dt.datetime:
        return self.now


def build(folder: Path, memories: list[dict], spacing: float = 0) -> tuple[Vault, Clock, dict[str, str], dict[str, dict]]:
    """A vault holding the memories; returns it, its clock, vault id -> data id, and data
    id -> the memory's data. ``spacing`` > 0 writes every memory and edit in the same
    order but that many seconds apart, from ``SESSION_START``: one agent storing the whole
    set in one session (a diagnostic for the neighbour lift of the conversation profile)."""
    clock = Clock()
    vault = Vault.init(folder, clock=clock)
    by_key = {m["id"]: m for m in memories}
    events: list[tuple[dt.datetime, int, str, str]] = []  # (when, order, what, data id)
    for m in memories:
        events.append((_when(m["created"]), 0, "create", m["id"]))
        if m.get("supersedes"):
            events.append((_when(m["created"]), 1, "supersede", m["id"]))
        if m.get("update"):
            events.append((_when(m["update"]["at"]), 0, "update", m["id"]))
    vault_id: dict[str, str] = {}
    for i, (when, _, what, key) in enumerate(sorted(events)):
        clock.now = SESSION_START + dt.timedelta(seconds=spacing * i) if spacing else when
        m = by_key[key]
        if what == "create":
            result = vault.remember(m["text"], tags=m.get("tags", []))
            vault_id[key] = result["memory"]["id"]
        elif what == "supersede":
            vault.link(vault_id[key], vault_id[m["supersedes"]], relation="supersedes")
        else:
            vault.update(vault_id[key], append=m["update"]["append"])
    return vault, clock, {v: k for k, v in vault_id.items()}, by_key


@dataclass
class Outcome:
    n: int
    kind: str
    profile: str
    top1: float
    r3: float
    r10: float
    rr: float
    seconds: float
    ranked: list[str]


def score(gold: list[str], need_all: bool, ranked: list[str], k: int) -> float:
    top = set(ranked[:k])
    found = sum(1 for g in gold if g in top)
    return found / len(gold) if need_all else float(found > 0)


def ask(vault: Vault, key_of: dict[str, str], questions: list[dict], profile: str,
        semantic: bool = False) -> list[Outcome]:
    """Each question through ``Vault.search``; ``semantic`` on or off whatever the
    vault's setting (the outcome's profile reads ``facts+semantic`` when on)."""
    out = []
    for q in questions:
        started = time.perf_counter()
        result = vault.search(q["q"], profile=profile, limit=LIMIT, semantic=semantic)
        seconds = time.perf_counter() - started
        ranked = [key_of.get(hit["id"], hit["id"]) for hit in result["hits"]]
        gold, need_all = q["gold"], q.get("need") == "all"
        first = next((i for i, key in enumerate(ranked[:LIMIT], 1) if key in gold), None)
        out.append(Outcome(
            n=q["n"], kind=q["kind"], profile=profile + ("+semantic" if semantic else ""),
            top1=float(bool(ranked) and ranked[0] in gold),
            r3=score(gold, need_all, ranked, 3), r10=score(gold, need_all, ranked, 10),
            rr=1.0 / first if first else 0.0, seconds=seconds, ranked=ranked,
        ))
    return out


def metrics(outcomes: list[Outcome]) -> tuple[int, float, float, float, float]:
    if not outcomes:
        return 0, float("nan"), float("nan"), float("nan"), float("nan")
    n = len(outcomes)
    return (n, 100 * sum(o.top1 for o in outcomes) / n, 100 * sum(o.r3 for o in outcomes) / n,
            100 * sum(o.r10 for o in outcomes) / n, 100 * sum(o.rr for o in outcomes) / n)


def half(o: Outcome) -> str:
    return "tune" if o.n % 2 else "held-out"


def print_table(outcomes: list[Outcome], profiles: list[str]) -> None:
    """One row per profile and question kind; the tuning and held-out halves side by side."""
    print("| profile | kind | n tune/held | tune top-1 | R@3 | R@10 | MRR | held-out top-1 | R@3 | R@10 | MRR "
          "| all top-1 | R@10 | MRR |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for profile in profiles:
        mine = [o for o in outcomes if o.profile == profile]
        for kind in ("all", *KINDS):
            rows = [o for o in mine if kind == "all" or o.kind == kind]
            tune = metrics([o for o in rows if half(o) == "tune"])
            held = metrics([o for o in rows if half(o) == "held-out"])
            every = metrics(rows)
            b = "**" if kind == "all" else ""
            cells = [profile, f"{b}{kind}{b}", f"{tune[0]}/{held[0]}",
                     *(f"{v:.1f}" for v in tune[1:]), f"{b}{held[1]:.1f}{b}", *(f"{v:.1f}" for v in held[2:]),
                     f"{every[1]:.1f}", f"{every[3]:.1f}", f"{every[4]:.1f}"]
            print("| " + " | ".join(cells) + " |")


def describe(vault: Vault, key: str, by_key: dict[str, dict]) -> str:
    m = by_key.get(key)
    return f"{key} ({m['created'][:10]}): {m['text'][:90]}" if m else key


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="?", type=Path, default=DATA, help="the question set (JSON)")
    parser.add_argument("--quick", action="store_true", help="a quarter of the questions, both halves (smoke run)")
    parser.add_argument("--profile", choices=sorted(PROFILES), action="append",
                        help="measure only this profile (repeatable; default both)")
    parser.add_argument("--misses", action="store_true",
                        help="list the held-out questions whose first hit is not gold, per profile")
    parser.add_argument("--semantic", action="store_true",
                        help="also ask every question with semantic recall on (needs the semantic extra and its model)")
    parser.add_argument("--spacing", type=float, default=0, metavar="SECONDS",
                        help="write the memories this many seconds apart in one session instead of at their dates")
    args = parser.parse_args(argv)

    raw = args.data.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    frozen = "frozen set" if digest == FROZEN_SHA256 else f"NOT the frozen set ({FROZEN_SHA256[:12]}…)"
    data = json.loads(raw)
    memories, questions = data["memories"], data["questions"]
    if args.quick:
        questions = [q for q in questions if q["n"] % 8 in (1, 2)]  # both halves, every kind
    profiles = args.profile or ["facts", "conversation"]

    tmp = Path(tempfile.mkdtemp(prefix="factstore-"))
    try:
        started = time.perf_counter()
        vault, clock, key_of, by_key = build(tmp / "vault", memories, args.spacing)
        built = time.perf_counter() - started
        latest = max(max(_when(m["created"]), _when(m["update"]["at"]) if m.get("update") else _when(m["created"]))
                     for m in memories)
        clock.now = max(latest, SESSION_START + dt.timedelta(seconds=args.spacing * 400)) + dt.timedelta(days=1)
        print(f"data {args.data.name} sha256 {digest[:16]}… ({frozen}); {len(memories)} memories written in "
              f"{built:.1f} s{f' ({args.spacing:g} s apart in one session)' if args.spacing else ''}; {len(questions)} questions; profile chosen for this vault: {vault.stats()['recall_profile']['name']}")
        outcomes: list[Outcome] = []
        for profile in profiles:
            outcomes += ask(vault, key_of, questions, profile)
        if args.semantic:
            started = time.perf_counter()
            embedded = vault.vectors.rebuild()
            print(f"semantic: {embedded} memories embedded in {time.perf_counter() - started:.1f} s "
                  f"({vault.stats()['semantic'].get('model', 'no model')})")
            for profile in profiles:
                outcomes += ask(vault, key_of, questions, profile, semantic=True)
            profiles = [name for profile in profiles for name in (profile, profile + "+semantic")]
        print()
        print_table(outcomes, profiles)
        print()
        for profile in profiles:
            times = sorted(o.seconds * 1000 for o in outcomes if o.profile == profile)
            p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
            print(f"{profile}: search p50 {statistics.median(times):.1f} ms, p95 {p95:.1f} ms")
        if args.misses:
            text = {q["n"]: q for q in questions}
            for profile in profiles:
                print(f"\nheld-out misses at top-1, profile {profile}:")
                for o in outcomes:
                    if o.profile != profile or half(o) != "held-out" or o.top1:
                        continue
                    q = text[o.n]
                    gold_rank = {g: (o.ranked.index(g) + 1 if g in o.ranked else None) for g in q["gold"]}
                    print(f"  q{o.n} [{o.kind}] {q['q']}")
                    ranks = ", ".join(f"{g}@{r or '-'}" for g, r in gold_rank.items())
                    print(f"    gold {ranks}: "
                          f"{describe(vault, q['gold'][0], by_key)}")
                    print(f"    1st  {describe(vault, o.ranked[0], by_key) if o.ranked else '(no hits)'}")
        vault.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
