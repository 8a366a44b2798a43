"""A person saving a memory file while the tool edits it: is any of their saves lost?

Real processes on real files. A "saver" process plays the person: it loops reading the
memory file, adding a line ``human save N`` to the end and writing it back, either
in place (``open(path, "w").write(text)``: truncate, then write, as Node's
``fs.writeFile`` and many editors and sync tools do) or atomically (a temp file, then
``os.replace``). Meanwhile the tool edits the same memory:

  inplace-cli   the saver in place; ``agent-memory edit ID --add-tag tN`` as separate runs
  inplace-lib   the saver in place; ``Vault(root).update(id, add_tags=[...])`` in another process
  atomic-lib    the saver atomic, every ~3 ms; library updates in another process, every
                other one replacing the content with ``expected_version`` (read with get
                first), the others ``add_tags`` without a version
  inplace-mcp   the saver in place; the MCP server over stdio, ``update_memory`` with
                ``add_tags`` and with ``append``

When both stop, the saver writes down every line it saved, and each round checks:

- the file still parses, with its id, namespace and first body line (never reduced to a
  bare front matter), and the saver never read a broken file;
- every ``human save N`` line is in the final file or in a conflict copy the tool put in
  ``.trash/`` (recorded in its ledger): a line in neither was silently lost;
- every tool edit succeeded or was refused with one of the errors that say a person was
  saving (``SavedMeanwhile``, ``StillSaving``, ``VersionConflict``); anything else
  ("not found", a traceback) is a failure;
- the index equals a rebuild from the files.

The person saves in bursts (a few saves 0-5 ms apart, then a pause of up to a fifth of a
second), as typing and autosave do: a file saved every few milliseconds without a pause
never settles, so every tool edit would be refused (``StillSaving``) and nothing would
race. The pauses are where the tool's edits land, and their ends are where saves race them.

Usage::

    python benchmarks/races.py                      # every scenario for 60 s
    python benchmarks/races.py --seconds 10 inplace-lib atomic-lib
    python benchmarks/races.py --rounds 3 --seconds 0

Prints a table; exits 1 if any human save was lost, a file was damaged, a tool edit
failed other than by a refusal, or the index differed from a rebuild.
``tests/test_races.py`` runs one short round of each scenario.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve()
MARKER = "human save "
ORIGINAL_BODY = "The release train leaves on Thursdays; the kettle is in room 4."
SAVER_MAX_SECONDS = 600.0  # a saver whose parent died stops on its own
REFUSALS = ("SavedMeanwhile", "StillSaving", "VersionConflict")
# How the CLI and the MCP server say each refusal (they print the error's text).
REFUSAL_TEXT = {
    "SavedMeanwhile": "while you were changing it",
    "StillSaving": "as a file looks while an editor is saving it",
    "VersionConflict": "changed on disk since you read it",
}
TAG_POOL = 20  # tags cycle through this many names, each edit removing the previous one: under the limit of 50
SCENARIOS = ("inplace-cli", "inplace-lib", "atomic-lib", "inplace-mcp")


def _child_env() -> dict[str, str]:
    """The environment a user's process would have: the vault comes from --dir only."""
    return {k: v for k, v in os.environ.items() if not k.startswith("AGENT_MEMORY")}


# --------------------------------------------------------------------------- the person


def saver_main(path: str, mode: str, stop: str, out: str, seed: int) -> None:
    """Save ``path`` in bursts until ``stop`` exists; then write what was saved to ``out``.

    Only a save whose write completed is recorded. A read that finds the file missing
    or not a complete note (the tool must never leave it so) is recorded and not saved
    over: the person would see a broken file."""
    rng = random.Random(seed)
    target = Path(path)
    written: list[int] = []
    broken: list[str] = []
    missing = 0
    n = 0
    started = time.monotonic()
    burst = 0
    while not os.path.exists(stop) and time.monotonic() - started < SAVER_MAX_SECONDS:
        if burst <= 0:
            time.sleep(rng.uniform(0.01, 0.2))  # the pause between bursts
            burst = rng.randint(1, 12)
        burst -= 1
        try:
            text = target.read_text(encoding="utf-8")
        except FileNotFoundError:
            missing += 1
            time.sleep(0.002)
            continue
        head = text.split("\n---\n", 1)
        if not text.startswith("---\n") or len(head) < 2 or not head[1].strip():
            broken.append(text[:300])
            time.sleep(0.002)
            continue
        n += 1
        new = text.rstrip("\n") + f"\n{MARKER}{n}\n"
        if mode == "inplace":
            with open(target, "w", encoding="utf-8") as handle:  # truncate, then write
                handle.write(new)
            time.sleep(rng.uniform(0, 0.005))
        else:
            tmp = target.with_name(f".{target.name}.saver-{n}.tmp")
            tmp.write_text(new, encoding="utf-8")
            os.replace(tmp, target)
            time.sleep(rng.uniform(0.002, 0.004))
        written.append(n)
    with open(out, "w", encoding="utf-8") as handle:
        json.dump({"written": written, "count": len(written), "broken_reads": broken, "missing_reads": missing},
                  handle)


class Saver:
    """The saver as a subprocess: start, then ``stop()`` (flag file, join) for its record."""

    def __init__(self, path: Path, mode: str, work: Path, seed: int) -> None:
        self.stop_flag = work / f"stop-{seed}"
        self.out = work / f"saver-{seed}.json"
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE), "_saver", str(path), mode, str(self.stop_flag), str(self.out), str(seed)],
            env=_child_env(),
        )

    def stop(self) -> dict:
        self.stop_flag.touch()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("the saver did not stop within 60 s") from None
        if self.proc.returncode != 0:
            raise RuntimeError(f"the saver exited with {self.proc.returncode}")
        return json.loads(self.out.read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- the tool


def _outcome_of_error(exc: BaseException) -> str:
    name = type(exc).__name__
    if name in REFUSALS:
        return name
    return f"failure: {name}: {exc}\n{''.join(traceback.format_exception(exc))}"


def library_main(root: str, memory_id: str, count: int, mode: str, out: str) -> None:
    """``count`` updates of one memory through the library, in this process; each one's
    outcome to ``out``. ``mode`` "tags": each adds a tag and removes the previous one (so
    a long run stays under the limit of tags); "mixed": every other update replaces the
    content instead (read with get first, passing its expected_version)."""
    from agent_memory.vault.vault import Vault

    outcomes: list[str] = []
    vault = Vault(root)
    try:
        for i in range(count):
            try:
                if mode == "mixed" and i % 2 == 0:
                    seen = vault.get(memory_id)
                    result = vault.update(memory_id, content=seen["content"].rstrip("\n") + f"\nagent line {i}\n",
                                          expected_version=seen["version"])
                else:
                    step = 2 if mode == "mixed" else 1
                    result = vault.update(memory_id, add_tags=[f"l{i % TAG_POOL}"],
                                          remove_tags=[f"l{(i - step) % TAG_POOL}"])
                outcomes.append("ok" if result["changed"] else "unchanged")
            except Exception as exc:  # noqa: BLE001 - every outcome is recorded and judged by the caller
                outcomes.append(_outcome_of_error(exc))
    finally:
        vault.close()
    with open(out, "w", encoding="utf-8") as handle:
        json.dump(outcomes, handle)


def run_library(root: Path, memory_id: str, count: int, mode: str, work: Path) -> list[str]:
    out = work / f"library-{time.time_ns()}.json"
    proc = subprocess.run([sys.executable, str(HERE), "_library", str(root), memory_id, str(count), mode, str(out)],
                          env=_child_env(), capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0:
        return [f"failure: the library process exited with {proc.returncode}: {proc.stderr.strip()}"]
    return json.loads(out.read_text(encoding="utf-8"))


def _outcome_of_text(text: str) -> str:
    for name, words in REFUSAL_TEXT.items():
        if words in text:
            return name
    return f"failure: {text.strip()}"


def cli_process(args: list[str]) -> tuple[int, str, str]:
    """``agent-memory ARGS`` in its own process, as a user types it: exit code, stdout, stderr."""
    proc = subprocess.run([sys.executable, "-m", "agent_memory", *args], env=_child_env(), capture_output=True,
                          text=True, timeout=120, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def run_cli_edits(root: Path, memory_id: str, count: int,
                  cli: Callable[[list[str]], tuple[int, str, str]] = cli_process) -> list[str]:
    """``agent-memory edit ID --add-tag tN --remove-tag tN-1`` (N modulo ``TAG_POOL``),
    ``count`` separate runs through ``cli`` (each opens the vault afresh, as a command does)."""
    outcomes = []
    for i in range(count):
        code, out, err = cli(["--dir", str(root), "edit", memory_id,
                              "--add-tag", f"t{i % TAG_POOL}", "--remove-tag", f"t{(i - 1) % TAG_POOL}"])
        if code == 0:
            outcomes.append("ok" if out.startswith("Updated") else "unchanged")
        else:
            outcomes.append(_outcome_of_text(err))
    return outcomes


async def run_mcp_calls(root: Path, memory_id: str, count: int) -> list[str]:
    """``count`` update_memory calls over stdio to a real server: add_tags and append, alternately."""
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "agent_memory", "serve", "--dir", str(root)],
                                   env=_child_env())
    outcomes = []
    async with Client(params) as client:
        for i in range(count):
            arguments: dict[str, object] = {"memory_id": memory_id}
            if i % 2:
                arguments["append"] = f"agent append {i}"
            else:
                arguments["add_tags"] = [f"m{i % TAG_POOL}"]
                arguments["remove_tags"] = [f"m{(i - 2) % TAG_POOL}"]
            result = await client.call_tool("update_memory", arguments)
            if result.is_error:
                outcomes.append(_outcome_of_text(" ".join(getattr(c, "text", "") for c in result.content)))
            else:
                outcomes.append("ok" if result.structured_content.get("changed") else "unchanged")
    return outcomes


# --------------------------------------------------------------------------- one round


@dataclasses.dataclass
class Round:
    scenario: str
    outcomes: list[str]
    saves: int = 0
    in_file: int = 0
    in_conflict_copies: int = 0
    lost: list[int] = dataclasses.field(default_factory=list)
    broken_reads: list[str] = dataclasses.field(default_factory=list)
    missing_reads: int = 0
    damage: list[str] = dataclasses.field(default_factory=list)  # what is wrong with the final file
    conflict_copies: int = 0
    parked_left: int = 0  # displaced files still in .index/parked/ after the settle: not where a person looks
    lost_but_on_disk: list[int] = dataclasses.field(default_factory=list)  # of ``lost``: in a file the ledger
    # does not vouch for (the trash, changed since it was recorded; or still parked), so restore cannot find them
    index_differs: bool = False

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes if o == outcome)

    @property
    def failures(self) -> list[str]:
        return [o for o in self.outcomes if o.startswith("failure")]

    @property
    def ok(self) -> bool:
        return not (self.lost or self.broken_reads or self.missing_reads or self.damage or self.failures
                    or self.index_differs or self.parked_left)


def new_vault(root: Path) -> tuple[str, str]:
    """A vault with the memory both sides will edit (and one bystander); its id and path."""
    from agent_memory.vault.vault import Vault

    with Vault.init(root) as vault:
        vault.remember("Priya owns the billing service.", namespace="team")
        stored = vault.remember(ORIGINAL_BODY, namespace="team", tags=["release"])["memory"]
    return stored["id"], stored["path"]


def settle(root: Path, memory_id: str, wait_grace: bool) -> None:
    """Let the tool look again at the files its swaps displaced (a person's editor may
    have written into one through a descriptor opened before the swap): a changed one
    becomes a conflict copy in the trash. The tool does this at the start of every write
    once a displaced file is ``PARKED_GRACE`` old; with ``wait_grace`` this waits for that
    and makes one more (no-op) write, as the next use of the tool would. Without it (every
    writer has been joined, so no descriptor is left open) it looks at them at once."""
    from agent_memory.disk import store
    from agent_memory.errors import AgentMemoryError
    from agent_memory.vault.vault import Vault

    with Vault(root) as vault:
        if wait_grace:
            time.sleep(store.PARKED_GRACE + 0.2)
            try:  # already there: changes nothing; every write first settles the parked files
                vault.update(memory_id, add_tags=["release"])
            except AgentMemoryError:
                pass  # a damaged file: check() reports it; the parked files were settled first
        else:
            vault.store.settle_parked(grace=0)


def check(root: Path, scenario: str, memory_id: str, rel: str, saver: dict, outcomes: list[str]) -> Round:
    """What the round left behind, judged as the module docstring says."""
    from agent_memory.note.parse import parse
    from agent_memory.vault.vault import Vault

    result = Round(scenario, outcomes, saves=saver["count"], broken_reads=saver["broken_reads"],
                   missing_reads=saver["missing_reads"])
    final = (root / rel).read_bytes()
    note = parse(final, rel)
    if note.unreadable or note.problems:
        result.damage.append(f"does not parse ({'; '.join(note.problems)})")
    if note.id != memory_id:
        result.damage.append(f"its id is {note.id!r}, not {memory_id!r}")
    if note.namespace != "team":
        result.damage.append(f"its namespace is {note.namespace!r}, not 'team'")
    if ORIGINAL_BODY not in note.body:
        result.damage.append("its body lost the original text")
    if result.damage:
        result.damage.append("final file:\n" + final.decode("utf-8", "replace")[:600])
    in_file = {line for line in note.body.splitlines() if line.startswith(MARKER)}
    in_copies: set[str] = set()
    with Vault(root) as vault:
        for entry in vault.store.trash.live():
            if entry.reason == "conflict" and entry.source == rel:
                result.conflict_copies += 1
                text = (root / entry.trash).read_text(encoding="utf-8", errors="replace")
                in_copies.update(line for line in text.splitlines() if line.startswith(MARKER))
        ledgered = {root / e.trash for e in vault.store.trash.live()}
        elsewhere: set[str] = set()  # for the report: trash files the ledger does not vouch for, parked files
        others = [p for p in vault.store.trash.files() if p not in ledgered]
        parked = [p for p in vault.store.parked_dir.iterdir() if p.suffix in (".md", ".held")] \
            if vault.store.parked_dir.exists() else []
        result.parked_left = len(parked)
        for path in (*others, *parked):
            text = path.read_text(encoding="utf-8", errors="replace")
            elsewhere.update(line for line in text.splitlines() if line.startswith(MARKER))
    written = {f"{MARKER}{n}": n for n in saver["written"]}
    result.in_file = sum(1 for m in written if m in in_file)
    result.in_conflict_copies = sum(1 for m in written if m not in in_file and m in in_copies)
    result.lost = sorted(n for m, n in written.items() if m not in in_file and m not in in_copies)
    result.lost_but_on_disk = sorted(n for n in result.lost if f"{MARKER}{n}" in elsewhere)
    result.index_differs = bool(index_differences(root))
    return result


_COMPARED = (
    "path, id, own_id, namespace, title, tags, body, created, updated, expires, source, "
    "content_hash, size, mtime_ns, sha256, problems, conflict, meta"
)


def index_differences(root: Path) -> list[str]:
    """Paths whose index row differs from a fresh rebuild of the files (the vault is
    opened first, as any command would: that reconciles what the person changed)."""
    from agent_memory.vault.vault import Vault

    def rows(db: Path) -> dict[str, tuple]:
        conn = sqlite3.connect(db)
        try:
            return {r[0]: r for r in conn.execute(f"SELECT {_COMPARED} FROM memories")}
        finally:
            conn.close()

    with Vault(root) as vault:
        live_path = vault.index.path
    fresh_dir = Path(tempfile.mkdtemp(prefix="races-fresh-index-"))
    try:
        with Vault(root, index_dir=fresh_dir, sync=False) as fresh:
            fresh.reindex(sweep=False)
        rebuilt = rows(fresh_dir / "index.sqlite3")
    finally:
        shutil.rmtree(fresh_dir, ignore_errors=True)
    live = rows(live_path)
    return sorted(p for p in set(live) | set(rebuilt) if live.get(p) != rebuilt.get(p))


@dataclasses.dataclass
class Setup:
    """A fresh vault with the memory both sides edit, and the saver already saving it."""

    scenario: str
    root: Path
    memory_id: str
    rel: str
    saver: Saver


def prepare(scenario: str, work: Path, seed: int) -> Setup:
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; one of {', '.join(SCENARIOS)}")
    root = work / f"vault-{scenario}-{seed}"
    memory_id, rel = new_vault(root)
    mode = "atomic" if scenario.startswith("atomic") else "inplace"
    return Setup(scenario, root, memory_id, rel, Saver(root / rel, mode, work, seed))


def finish(setup: Setup, record: dict, outcomes: list[str], wait_grace: bool = False) -> Round:
    """Judge a round whose saver has stopped (``record`` is what it saved)."""
    settle(setup.root, setup.memory_id, wait_grace)
    return check(setup.root, setup.scenario, setup.memory_id, setup.rel, record, outcomes)


def run_round(scenario: str, work: Path, seed: int, edits: int, wait_grace: bool = False,
              cli: Callable[[list[str]], tuple[int, str, str]] = cli_process) -> Round:
    """One round of ``scenario`` in a fresh vault under ``work``: ``edits`` tool edits
    against a saver started just before them and stopped (joined) right after."""
    setup = prepare(scenario, work, seed)
    try:
        if scenario == "inplace-cli":
            outcomes = run_cli_edits(setup.root, setup.memory_id, edits, cli)
        elif scenario == "inplace-lib":
            outcomes = run_library(setup.root, setup.memory_id, edits, "tags", work)
        elif scenario == "atomic-lib":
            outcomes = run_library(setup.root, setup.memory_id, edits, "mixed", work)
        else:
            import anyio

            outcomes = anyio.run(run_mcp_calls, setup.root, setup.memory_id, edits)
    finally:
        record = setup.saver.stop()
    return finish(setup, record, outcomes, wait_grace)


# --------------------------------------------------------------------------- the table

EDITS = {"inplace-cli": 60, "inplace-lib": 60, "atomic-lib": 150, "inplace-mcp": 60}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*", default=[], metavar="SCENARIO",
                        help=f"which to run (default all): {', '.join(SCENARIOS)}")
    parser.add_argument("--seconds", type=float, default=60.0,
                        help="run each scenario's rounds for about this long (0: no time limit; default 60)")
    parser.add_argument("--rounds", type=int, default=0, help="at most this many rounds per scenario (0: no limit)")
    parser.add_argument("--edits", type=int, default=0,
                        help="tool edits per round (default: 60; 150 for atomic-lib)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the vaults (their folder is printed)")
    args = parser.parse_args(argv)
    if not args.seconds and not args.rounds:
        parser.error("give --seconds or --rounds (or both)")
    unknown = [s for s in args.scenarios if s not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario {unknown[0]!r}; choose from {', '.join(SCENARIOS)}")
    work = Path(tempfile.mkdtemp(prefix="agent-memory-races-"))
    rounds: dict[str, list[Round]] = {}
    seed = args.seed
    try:
        for scenario in args.scenarios or SCENARIOS:
            started = time.monotonic()
            rounds[scenario] = []
            while True:
                rounds[scenario].append(run_round(scenario, work, seed, args.edits or EDITS[scenario], wait_grace=True))
                seed += 1
                print(_row(scenario, rounds[scenario], time.monotonic() - started), file=sys.stderr, flush=True)
                if args.rounds and len(rounds[scenario]) >= args.rounds:
                    break
                if args.seconds and time.monotonic() - started >= args.seconds:
                    break
    finally:
        if args.keep:
            print(f"vaults kept in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(_table(rounds))
    bad = [r for rs in rounds.values() for r in rs if not r.ok]
    for r in bad:
        print(f"\n{r.scenario}:", file=sys.stderr)
        if r.lost:
            print(f"  lost human saves: {r.lost}", file=sys.stderr)
        if r.lost_but_on_disk:
            print(f"  (of those, still in an unrecorded trash or parked file: {r.lost_but_on_disk})", file=sys.stderr)
        for what in (*r.damage, *r.broken_reads[:3], *r.failures[:3]):
            print("  " + what.replace("\n", "\n  "), file=sys.stderr)
        if r.missing_reads:
            print(f"  the saver found the file missing {r.missing_reads} times", file=sys.stderr)
        if r.index_differs:
            print("  the index differs from a rebuild", file=sys.stderr)
        if r.parked_left:
            print(f"  {r.parked_left} displaced files still parked in .index/parked/", file=sys.stderr)
    kinds = collections.Counter(_kind(f) for rs in rounds.values() for r in rs for f in r.failures)
    if kinds:
        print("\nfailed tool edits, by what they said:", file=sys.stderr)
        for kind, n in kinds.most_common():
            print(f"  {n:5}  {kind}", file=sys.stderr)
    lost = sum(len(r.lost) for r in bad)
    if bad:
        print(f"\nFAIL: {lost} human saves lost; {len(bad)} rounds with a problem (above).", file=sys.stderr)
        return 1
    print("\nOK: no human save lost, no file damaged, every tool edit done or refused, index = rebuild.")
    return 0


def _kind(failure: str) -> str:
    """A failure's first line with ids and paths taken out, to count alike ones together."""
    line = failure.splitlines()[0].removeprefix("failure: ")
    return re.sub(r"'[^']*'", "'…'", line)[:160]


_COLUMNS = ("scenario", "rounds", "tool edits", "done", "unchanged", "saved meanwhile", "still saving",
            "version conflict", "failed", "human saves", "in file", "in conflict copy", "lost", "damaged",
            "index≠rebuild", "seconds")


def _cells(scenario: str, rs: list[Round], seconds: float | None = None) -> list[str]:
    def total(f: Callable[[Round], int]) -> int:
        return sum(f(r) for r in rs)

    cells = [scenario, len(rs), total(lambda r: len(r.outcomes)), total(lambda r: r.count("ok")),
             total(lambda r: r.count("unchanged")), total(lambda r: r.count("SavedMeanwhile")),
             total(lambda r: r.count("StillSaving")), total(lambda r: r.count("VersionConflict")),
             total(lambda r: len(r.failures)), total(lambda r: r.saves), total(lambda r: r.in_file),
             total(lambda r: r.in_conflict_copies), total(lambda r: len(r.lost)),
             total(lambda r: bool(r.damage or r.broken_reads or r.missing_reads)),
             total(lambda r: r.index_differs)]
    if seconds is not None:
        cells.append(f"{seconds:.0f}")
    return [str(c) for c in cells]


def _row(scenario: str, rs: list[Round], seconds: float) -> str:
    return "  ".join(f"{k}={v}" for k, v in zip(_COLUMNS, _cells(scenario, rs, seconds)))


def _table(rounds: dict[str, list[Round]]) -> str:
    lines = ["| " + " | ".join(_COLUMNS[:-1]) + " |", "|" + "---|" * (len(_COLUMNS) - 1)]
    for scenario, rs in rounds.items():
        lines.append("| " + " | ".join(_cells(scenario, rs)) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_saver":
        path, mode, stop, out, seed = sys.argv[2:7]
        saver_main(path, mode, stop, out, int(seed))
    elif len(sys.argv) > 1 and sys.argv[1] == "_library":
        root, memory_id, count, mode, out = sys.argv[2:7]
        library_main(root, memory_id, int(count), mode, out)
    else:
        sys.exit(main())
