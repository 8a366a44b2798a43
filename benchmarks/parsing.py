"""How often front matter takes the fast path, per corpus, and whether it agrees with
the full YAML parser: a script, not a test.

    python benchmarks/parsing.py                       # the corpora found here
    python benchmarks/parsing.py --corpus PATH ...     # other folders of notes

For each corpus (the obsidian-help vault in six languages, the repository's
``.memory.example``, and 10,000 notes written the way the tool writes them): files,
files with front matter, how many the fast path reads and how many fall back to YAML
(with the first line it declined, grouped by key), disagreements with the full parser
(must be 0), and the CPU time of reading every front matter both ways.
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import yaml  # noqa: E402

from agent_memory.note import fast_yaml, safe_yaml  # noqa: E402
from agent_memory.note.split import split  # noqa: E402

CORPORA = [HERE.parents[1] / "shared" / "corpora" / "obsidian-help", Path("/work/shared/corpora/obsidian-help"),
           HERE.parent / ".memory.example"]


def tool_notes(n: int = 10_000) -> list[str]:
    """Front matter as the tool writes it (``scale.py``'s generator)."""
    sys.path.insert(0, str(HERE))
    import scale

    from agent_memory.disk.layout import new_id
    from agent_memory.note.render import render_new

    rng = random.Random(3)
    texts = []
    for i in range(n):
        fields = {"id": new_id(1_780_000_000_000 + i * 60_000), "namespace": rng.choice(scale.NAMESPACES),
                  "title": scale.sentence(rng, 5)[:-1] if i % 3 == 0 else None,
                  "tags": sorted(set(rng.sample(scale.TAGS, rng.randint(0, 4)))),
                  "created": "2026-07-20T09:00:00Z", "updated": "2026-07-21T10:30:00Z",
                  "source": "agent" if i % 2 else None, "related_to": [f"[[memory-{i - 1}]]"] if i % 5 == 0 else None}
        texts.append(split(render_new(fields, "body\n")).fm_text or "")
    return texts


def full(text: str) -> object:
    try:
        loaded = yaml.load(text, Loader=safe_yaml.KeepKeysLoader)
    except (yaml.YAMLError, ValueError, OverflowError) as exc:
        return type(exc)
    return {k: safe_yaml.jsonable(v) for k, v in loaded.items()} if isinstance(loaded, dict) else loaded


def first_declined(text: str) -> str:
    """The first line the fast path would not read alone, by its key."""
    for line in text.replace("\r\n", "\n").split("\n"):
        if line.strip() and not line.startswith((" ", "-")) and fast_yaml.read_simple(line + "\n") is None:
            return line.split(":", 1)[0][:30] + ":"
    return "(a block list or line break)"


def report(name: str, texts: list[str]) -> None:
    with_fm = [t for t in texts if t.strip()]
    t0 = time.process_time()
    fast = [fast_yaml.read_simple(t) for t in with_fm]
    fast_s = time.process_time() - t0
    t0 = time.process_time()
    slow = [full(t) for t in with_fm]
    full_s = time.process_time() - t0
    fell = [t for t, f in zip(with_fm, fast) if f is None]
    wrong = [t for t, f, s in zip(with_fm, fast, slow) if f is not None and f != s]
    share = 100 * len(fell) / max(1, len(with_fm))
    print(f"| {name} | {len(texts):,} | {len(with_fm):,} | {len(with_fm) - len(fell):,} | {len(fell):,} ({share:.1f}%) "
          f"| {len(wrong)} | {fast_s * 1000:.0f} ms | {full_s * 1000:.0f} ms |")
    for key, count in collections.Counter(first_declined(t) for t in fell).most_common(5):
        print(f"|   falls back at `{key}` | | | | {count:,} | | | |")
    for text in wrong[:3]:
        print("DISAGREES:", repr(text)[:300], file=sys.stderr)


def corpus_texts(folder: Path) -> list[str]:
    texts = []
    for path in sorted(folder.rglob("*.md")):
        parts = split(path.read_bytes().decode("utf-8", "replace"))
        texts.append(parts.fm_text or "")
    return texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, nargs="*", help="folders of notes (default: the corpora found here)")
    args = parser.parse_args()
    folders = args.corpus or [c for c in dict.fromkeys(CORPORA) if c.exists()]
    print("| corpus | files | with front matter | fast path | fell back to YAML | disagree | fast path CPU | "
          "full parser CPU |")
    print("|---|---|---|---|---|---|---|---|")
    seen: set[Path] = set()
    for folder in folders:
        if folder.resolve() in seen:
            continue
        seen.add(folder.resolve())
        report(folder.name, corpus_texts(folder))
    report("tool-written (generated)", tool_notes())


if __name__ == "__main__":
    main()
