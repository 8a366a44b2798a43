"""How fast, and in how much memory, a large chat export imports.

Writes a ChatGPT (or Claude) ``conversations.json`` of about ``--mb`` MB (default 200)
into a temporary folder, one conversation at a time, with conversations of 4-120
messages and a few over the content limit (split into parts); then imports it into a
fresh vault there with ``Vault.import_memories(path, format=...)``, as
``agent-memory import --from chatgpt`` does, and prints conversations/s, notes/s and
the process's peak RSS. The reference is the same file read whole with ``json.load``
in a child process: the peak RSS a reader that is not streaming needs just to parse it.

    python benchmarks/chat_import.py [--mb 200] [--format chatgpt|claude] [--keep]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_memory.vault.vault import Vault  # noqa: E402

WORDS = ("deploy release customer acme invoice staging window friday rollback incident owner billing "
         "migration schema index query latency budget review plan decision lesson note the a of to and "
         "is we should because after before it this that with on for").split()


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 22))).capitalize() + "."


def _message_text(rng: random.Random, long: bool) -> str:
    paragraphs = rng.randint(30, 60) if long else rng.randint(1, 6)
    return "\n\n".join(" ".join(_sentence(rng) for _ in range(rng.randint(2, 8))) for _ in range(paragraphs))


def _chatgpt(n: int, rng: random.Random) -> dict[str, Any]:
    start = 1_700_000_000 + n * 3_600
    long = n % 97 == 0  # now and then a conversation over the content limit
    count = rng.randint(60, 120) if long else rng.randint(4, 40)
    mapping: dict[str, Any] = {"root": {"id": "root", "message": None, "parent": None, "children": ["m0"]}}
    parent = "root"
    for i in range(count):
        node = f"m{i}"
        role = "user" if i % 2 == 0 else "assistant"
        mapping[node] = {"id": node, "parent": parent, "children": [f"m{i + 1}"] if i + 1 < count else [],
                         "message": {"id": node, "author": {"role": role}, "create_time": start + i * 30,
                                     "content": {"content_type": "text", "parts": [_message_text(rng, long)]},
                                     "metadata": {"model_slug": "gpt-4o"} if role == "assistant" else {}}}
        parent = node
    return {"title": f"Conversation {n}: " + _sentence(rng)[:40], "create_time": start, "update_time": start + count * 30,
            "id": f"conv-{n:08d}", "current_node": parent, "mapping": mapping}


def _claude(n: int, rng: random.Random) -> dict[str, Any]:
    start = 1_700_000_000 + n * 3_600
    long = n % 97 == 0
    count = rng.randint(60, 120) if long else rng.randint(4, 40)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start))
    messages = [{"uuid": f"{n}-{i}", "sender": "human" if i % 2 == 0 else "assistant", "created_at": stamp,
                 "text": "", "content": [{"type": "text", "text": _message_text(rng, long)}]} for i in range(count)]
    return {"uuid": f"conv-{n:08d}", "name": f"Conversation {n}", "created_at": stamp, "updated_at": stamp,
            "chat_messages": messages}


def write_export(path: Path, megabytes: int, kind: str) -> int:
    """A ``conversations.json`` of about ``megabytes`` MB, written as it is made."""
    rng = random.Random(28)
    make = _chatgpt if kind == "chatgpt" else _claude
    target = megabytes * 1_000_000
    n = 0
    with open(path, "w", encoding="utf-8") as out:
        out.write("[")
        while out.tell() < target:
            _write(out, make(n, rng), first=n == 0)
            n += 1
        out.write("]\n")
    return n


def _write(out: IO[str], conversation: dict[str, Any], first: bool) -> None:
    out.write(("" if first else ",\n") + json.dumps(conversation, ensure_ascii=False))


def reference_rss(path: Path) -> int:
    """Peak RSS (KB) of a child process that only parses the file whole with json.load."""
    code = ("import json, resource, sys; json.load(open(sys.argv[1], encoding='utf-8')); "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    return int(done.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--format", choices=("chatgpt", "claude"), default="chatgpt")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="chat-import-bench-"))
    try:
        export = folder / "conversations.json"
        started = time.perf_counter()
        written = write_export(export, args.mb, args.format)
        size = export.stat().st_size
        print(f"export: {args.format}, {written:,} conversations, {size / 1e6:.1f} MB "
              f"(written in {time.perf_counter() - started:.1f} s)")
        vault = Vault.init(folder / "vault")
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.perf_counter()
        result = vault.import_memories(export, format=args.format)
        took = time.perf_counter() - started
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        vault.close()
        notes = result["imported"] + result["updated"] + result["unchanged"]
        print(f"import: {result['conversations']:,} conversations -> {notes:,} notes in {took:.1f} s: "
              f"{result['conversations'] / took:,.0f} conversations/s, {notes / took:,.0f} notes/s, "
              f"{size / 1e6 / took:.1f} MB/s")
        print(f"peak RSS: {peak / 1024:.0f} MB (before the import: {before / 1024:.0f} MB)")
        print(f"reference: json.load of the same file peaks at {reference_rss(export) / 1024:.0f} MB RSS")
    finally:
        if args.keep:
            print(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
