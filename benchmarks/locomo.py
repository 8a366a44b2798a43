"""LoCoMo recall benchmark: how well ``Vault.search`` finds the dialog turns that answer a question.

Every turn of every conversation is written as one memory through ``Vault.remember``
(namespace = the conversation, ``created`` = the session date set through the vault's
clock, the speaker and any shared image's caption in the text). Each question of
categories 1-4 is then asked with ``Vault.search(question, namespace=conversation)``,
exactly what an agent's ``recall`` does, and the turns found are compared with the
question's evidence turns.

    python benchmarks/locomo.py                 # all ten conversations
    python benchmarks/locomo.py --quick         # the first conversation only (CI)
    python benchmarks/locomo.py PATH/locomo10.zip --vault /tmp/locomo-vault  # keep the vault
    python benchmarks/locomo.py --semantic      # lexical-only and with semantic recall, side by side

Conversations 1-5 are the tuning set, 6-10 the held-out set; both and all ten are
reported, so the numbers are not only fitted to what they report. The data is research
data and is never committed: without the zip the script says where it looked and exits 0.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import datetime as dt
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent_memory.recall.rank import DEFAULT, PROFILES, RecallConfig  # noqa: E402
from agent_memory.vault.vault import Vault  # noqa: E402

DEFAULT_ZIP = REPO.parent / "shared" / "corpora" / "locomo" / "locomo10.zip"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
TUNE, HELD_OUT = range(0, 5), range(5, 10)
LIMIT = 10
MAP_FILE = "locomo-map.json"  # not a .md file, so the vault ignores it
# Evidence ids as written in the data: "D8:6", "D:11:26", "D30:05", "D8:6; D9:17".
_EVIDENCE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")


@dataclass
class Turn:
    dia_id: str
    session: int
    when: dt.datetime
    text: str


@dataclass
class Question:
    text: str
    category: int
    evidence: list[str]


@dataclass
class Conversation:
    name: str
    turns: list[Turn]
    questions: list[Question]
    dropped: list[str] = field(default_factory=list)  # evidence ids that name no turn
    unanswerable: int = 0  # questions left without any valid evidence


# --------------------------------------------------------------------------- loading


def _session_time(text: str) -> dt.datetime:
    """'1:56 pm on 8 May, 2023' -> an aware UTC datetime."""
    moment = dt.datetime.strptime(" ".join(text.split()), "%I:%M %p on %d %B, %Y")
    return moment.replace(tzinfo=dt.timezone.utc)


def turn_text(turn: dict, with_date: str = "") -> str:
    """What a memory holds: the speaker, the words, and a shared image's caption."""
    text = f"{turn['speaker']}: {turn.get('text', '').strip()}"
    if turn.get("blip_caption"):
        text += f" [shared an image: {turn['blip_caption']}]"
    return f"[{with_date}] {text}" if with_date else text


def clean_evidence(raw: list[str], known: set[str]) -> tuple[list[str], list[str]]:
    """Tolerant parse of evidence ids; returns (turn ids that exist, what was dropped)."""
    kept, dropped = [], []
    for item in raw:
        found = _EVIDENCE.findall(item)
        if not found:
            dropped.append(item)
        for session, turn in found:
            dia_id = f"D{int(session)}:{int(turn)}"
            if dia_id in known:
                kept.append(dia_id)
            else:
                dropped.append(item if len(found) == 1 else f"{item} ({dia_id})")
    return list(dict.fromkeys(kept)), dropped


def _conversation(name: str, data: dict, date_in_text: bool, same_instant: bool = False) -> Conversation:
    conv = data.get("conversation", data)
    turns: list[Turn] = []
    for key in sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1])):
        number = int(key.split("_")[1])
        raw_date = conv.get(f"{key}_date_time", "")
        when = _session_time(raw_date)
        for n, turn in enumerate(conv[key]):
            # A second apart keeps turn order within a session; ``same_instant`` stamps every
            # turn with the session's time, as an import or a log often does.
            stamp = when if same_instant else when + dt.timedelta(seconds=n)
            turns.append(Turn(turn["dia_id"], number, stamp, turn_text(turn, raw_date if date_in_text else "")))
    known = {t.dia_id for t in turns}
    out = Conversation(name, turns, [])
    for qa in data["qa"]:
        if qa.get("category") not in CATEGORIES:
            continue
        evidence, dropped = clean_evidence(qa.get("evidence", []), known)
        out.dropped.extend(dropped)
        if evidence:
            out.questions.append(Question(qa["question"], qa["category"], evidence))
        else:
            out.unanswerable += 1
    return out


def load(path: Path, date_in_text: bool = False, same_instant: bool = False) -> list[Conversation]:
    """The conversations in the zip, in LoCoMo's own order (conv-26 ... conv-50)."""
    samples: list[tuple[str, dict]] = []
    with zipfile.ZipFile(path) as archive:
        for member in archive.namelist():
            if not member.endswith(".json"):
                continue
            data = json.loads(archive.read(member))
            items = data if isinstance(data, list) else [data]
            for n, item in enumerate(items):
                if "qa" not in item:
                    continue
                stem = Path(member).stem
                name = str(item.get("sample_id") or (stem if len(items) == 1 else f"{stem}-{n}"))
                samples.append((name if name.startswith("conv-") else f"conv-{name}", item))
    samples.sort(key=lambda s: [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", s[0])])
    return [_conversation(name, item, date_in_text, same_instant) for name, item in samples]


# --------------------------------------------------------------------------- the vault


class Clock:
    """The vault's clock, set to each session's date while its turns are written."""

    def __init__(self) -> None:
        self.now = dt.datetime.now(dt.timezone.utc)

    def __call__(self) -> dt.datetime:
        return self.now


def build(vault: Vault, clock: Clock, conversations: list[Conversation]) -> dict[str, list[str]]:
    """Write every turn through ``remember``; returns memory id -> the turns it holds
    (an exact duplicate turn is deduplicated into the first one)."""
    held: dict[str, list[str]] = {}
    for conv in conversations:
        for turn in conv.turns:
            clock.now = turn.when
            result = vault.remember(turn.text, namespace=conv.name)
            held.setdefault(result["memory"]["id"], []).append(turn.dia_id)
    return held


def open_vault(folder: Path | None, conversations: list[Conversation]) -> tuple[Vault, Clock, dict[str, list[str]], float]:
    """A vault holding the conversations: reused from ``folder`` when it already does."""
    clock = Clock()
    wanted = sorted(c.name for c in conversations)
    if folder is not None and (folder / MAP_FILE).exists():
        saved = json.loads((folder / MAP_FILE).read_text())
        if saved["conversations"] == wanted and saved["texts"] == _fingerprint(conversations):
            return Vault(folder, clock=clock), clock, saved["held"], float("nan")
    folder = folder or Path(tempfile.mkdtemp(prefix="locomo-")) / "vault"  # removed by main()
    if folder.exists() and any(folder.iterdir()):
        raise SystemExit(f"{folder} exists and holds something else; give an empty or new folder to --vault.")
    vault = Vault.init(folder, clock=clock)
    started = time.perf_counter()
    held = build(vault, clock, conversations)
    seconds = time.perf_counter() - started
    (folder / MAP_FILE).write_text(json.dumps({"conversations": wanted, "texts": _fingerprint(conversations), "held": held}))
    return vault, clock, held, seconds


def _fingerprint(conversations: list[Conversation]) -> str:
    import hashlib

    digest = hashlib.sha256()
    for conv in conversations:
        for turn in conv.turns:
            digest.update(f"{conv.name}\0{turn.dia_id}\0{turn.text}\0{turn.when.isoformat()}\0".encode())
    return digest.hexdigest()[:16]


# --------------------------------------------------------------------------- measuring


@dataclass
class Outcome:
    conversation: int
    category: int
    recall5: float
    recall10: float
    hit10: float
    rr: float
    session_recall5: float
    seconds: float


def ask(vault: Vault, conv_no: int, conv: Conversation, held: dict[str, list[str]], match: str = "auto",
        config: RecallConfig = DEFAULT, semantic: bool = False) -> list[Outcome]:
    session_of = {t.dia_id: t.session for t in conv.turns}
    out = []
    for q in conv.questions:
        started = time.perf_counter()
        result = vault.search(q.text, namespace=conv.name, limit=LIMIT, match=match, config=config, semantic=semantic)
        seconds = time.perf_counter() - started
        ranked = [d for hit in result["hits"] for d in held.get(hit["id"], [])]
        gold = set(q.evidence)
        first = next((n for n, d in enumerate(ranked, 1) if d in gold), None)
        gold_sessions = {session_of[d] for d in gold}
        found_sessions = {session_of[d] for d in ranked[:5]}
        out.append(
            Outcome(
                conversation=conv_no,
                category=q.category,
                recall5=len(gold & set(ranked[:5])) / len(gold),
                recall10=len(gold & set(ranked[:10])) / len(gold),
                hit10=1.0 if first is not None and first <= 10 else 0.0,
                rr=1.0 / first if first is not None and first <= 10 else 0.0,
                session_recall5=len(gold_sessions & found_sessions) / len(gold_sessions),
                seconds=seconds,
            )
        )
    return out


def metrics(outcomes: list[Outcome]) -> dict[str, float]:
    if not outcomes:
        return {"n": 0}
    mean = lambda name: 100 * statistics.fmean(getattr(o, name) for o in outcomes)  # noqa: E731
    return {
        "n": len(outcomes),
        "R@5": mean("recall5"),
        "R@10": mean("recall10"),
        "hit@10": mean("hit10"),
        "MRR": mean("rr"),
        "session R@5": mean("session_recall5"),
    }


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def report(outcomes: list[Outcome], count: int) -> dict[str, dict[str, dict[str, float]]]:
    splits = {"all": range(count)}
    if count == 10 and len({o.conversation for o in outcomes}) == 10:
        splits = {"tune 1-5": TUNE, "held-out 6-10": HELD_OUT, "all 1-10": range(10)}
    table: dict[str, dict[str, dict[str, float]]] = {}
    for split, members in splits.items():
        chosen = [o for o in outcomes if o.conversation in members]
        table[split] = {"1-4": metrics(chosen)}
        for cat, name in CATEGORIES.items():
            table[split][f"{cat} {name}"] = metrics([o for o in chosen if o.category == cat])
    return table


def print_table(table: dict[str, dict[str, dict[str, float]]]) -> None:
    columns = ["R@5", "R@10", "hit@10", "MRR", "session R@5"]
    print(f"| split | category | n | {' | '.join(columns)} |")
    print("|---|---|---|" + "---|" * len(columns))
    for split, rows in table.items():
        for category, row in rows.items():
            if not row["n"]:
                continue
            values = " | ".join(f"{row[c]:.1f}" for c in columns)
            print(f"| {split} | {category} | {row['n']} | {values} |")


def configure(settings: list[str], base: RecallConfig = DEFAULT) -> RecallConfig:
    """``--set question_boost=1.0``: try a variant of the ranking without editing code
    (any field of ``RecallConfig``; a ``context_window`` in minutes)."""
    names = {f.name for f in dataclasses.fields(RecallConfig)}
    changes = {}
    for item in settings:
        name, _, value = item.partition("=")
        if name not in names:
            raise SystemExit(f"--set {item}: RecallConfig has no {name}; one of {', '.join(sorted(names))}")
        parsed = ast.literal_eval(value)
        changes[name] = dt.timedelta(minutes=parsed) if name == "context_window" else parsed
    return dataclasses.replace(base, **changes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("zip", nargs="?", type=Path, default=DEFAULT_ZIP, help=f"locomo10.zip (default {DEFAULT_ZIP})")
    parser.add_argument("--quick", action="store_true", help="only the first conversation (what CI runs)")
    parser.add_argument("--vault", type=Path, help="build the vault here and reuse it on later runs")
    parser.add_argument("--date-in-text", action="store_true", help="also write the session date into each memory's text")
    parser.add_argument("--same-instant", action="store_true",
                        help="stamp every turn of a session with the session's time (as an import or a log often "
                             "does) instead of a second apart")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override a RecallConfig field")
    parser.add_argument("--match", default="auto", choices=("auto", "all", "any"), help="recall's match mode (default auto, as agents call it)")
    parser.add_argument("--profile", default="conversation", choices=tuple(PROFILES), help="recall profile (default conversation: LoCoMo is dialog)")
    parser.add_argument("--ask", metavar="FIRST-LAST", help="ask only these conversations' questions (e.g. 1-5 while tuning)")
    parser.add_argument("--json", type=Path, help="also write the numbers to this file")
    parser.add_argument("--semantic", action="store_true",
                        help="also ask every question with semantic recall on (needs the semantic extra and its model)")
    args = parser.parse_args(argv)

    if not args.zip.exists():
        print(f"LoCoMo data not found at {args.zip}; skipping. Pass the path to locomo10.zip to run the benchmark.")
        return 0
    config = configure(args.set, PROFILES[args.profile])
    conversations = load(args.zip, date_in_text=args.date_in_text, same_instant=args.same_instant)
    if args.quick:
        conversations = conversations[:1]

    vault, clock, held, write_seconds = open_vault(args.vault, conversations)
    try:
        started = time.perf_counter()
        vault.reindex(sweep=False)
        reindex_seconds = time.perf_counter() - started
        clock.now = max(t.when for c in conversations for t in c.turns) + dt.timedelta(days=1)
        first, _, last = (args.ask or f"1-{len(conversations)}").partition("-")
        asked = range(int(first) - 1, int(last or first))
        outcomes = [o for n, conv in enumerate(conversations) if n in asked for o in ask(vault, n, conv, held, args.match, config)]
        semantic: list[Outcome] = []
        if args.semantic:
            started = time.perf_counter()
            embedded = vault.vectors.rebuild()
            print(f"semantic: {embedded} turns embedded in {time.perf_counter() - started:.1f} s "
                  f"(the others kept their vectors); profile uses it: {config.semantic}")
            semantic = [o for n, conv in enumerate(conversations) if n in asked
                        for o in ask(vault, n, conv, held, args.match, config, semantic=True)]
    finally:
        vault.close()
        if args.vault is None:
            shutil.rmtree(vault.root.parent, ignore_errors=True)

    turns = sum(len(c.turns) for c in conversations)
    dropped = Counter(d for c in conversations for d in c.dropped)
    unanswerable = sum(c.unanswerable for c in conversations)
    latencies = [o.seconds * 1000 for o in outcomes]
    print(f"LoCoMo: {len(conversations)} conversations, {turns} turns as memories, "
          f"{len(outcomes)} questions (categories 1-4), top {LIMIT} of Vault.search")
    if dropped or unanswerable:
        print(f"evidence ids dropped (no such turn): {dict(dropped)}; questions left without evidence: {unanswerable}")
    table = report(outcomes, len(conversations))
    if semantic:
        print("\nlexical only:")
    print_table(table)
    p50, p95 = percentile(latencies, 50), percentile(latencies, 95)
    if semantic:
        print("\nwith semantic recall:")
        print_table(report(semantic, len(conversations)))
        timed = [o.seconds * 1000 for o in semantic]
        print(f"query latency with semantic: p50 {percentile(timed, 50):.2f} ms, p95 {percentile(timed, 95):.2f} ms")
    written = "reused" if write_seconds != write_seconds else f"{write_seconds:.1f} s through remember"
    print(f"query latency: p50 {p50:.2f} ms, p95 {p95:.2f} ms; index: {written}, full reindex {reindex_seconds:.2f} s")
    instant = " same-instant" if args.same_instant else ""
    print(f"settings: profile={args.profile} match={args.match}{instant} {' '.join(args.set)}".rstrip())
    if args.json:
        args.json.write_text(json.dumps({"table": table, "p50_ms": p50, "p95_ms": p95, "settings": args.set}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
