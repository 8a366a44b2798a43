"""Kill writers with SIGKILL at random points, then check what they left.

    python benchmarks/crash.py --kills 200       # the full run (a few minutes on 2 cores)
    python benchmarks/crash.py --quick           # ~20 kills, a CI-style smoke run

Each round makes a fresh vault in a temporary folder (never in your home), seeds it,
then starts writer processes on it (two at a time) and ``kill -9``s each at a random
point: 0-300 ms after it is ready (library writers say so once the vault is open),
0-300 ms after it starts (the CLI import), or 0-300 ms after its import's staged files
or its manifest appear in ``.index/import/``. Kinds of writer, picked at random:

- ``remember``   a loop of ``Vault.remember``;
- ``update``     a loop of ``Vault.update`` on seeded memories: ``append``, ``add_tags``,
                 and a body replacement with ``expected_version`` that keeps the text it read;
- ``forget``     a loop of ``Vault.forget`` on seeded memories;
- ``import``     ``Vault.import_memories`` of 1,000-3,000 items;
- ``cli-import`` ``agent-memory import FILE`` of 1,000-3,000 items (the CLI itself is killed);
- ``cli-add``    a loop of ``agent-memory add`` processes (the loop and its CLI child are killed;
                 it is "ready" once its first CLI run has returned).

A writer appends a line to the round's ack log (fsynced) only after a write returned.
After the round the vault is opened again (which finishes or drops an interrupted
import) and checked; every row of the table must be 0, else the script exits 1:

- torn files: a memory file that is empty or whose front matter does not parse
  (``parse(...).unreadable``);
- lost acknowledged writes: an acknowledged remember whose id is gone or lacks its
  content; an acknowledged update whose token is not in the memory (updates here only
  add, so none is superseded); an acknowledged forget whose memory is still there or
  not in ``.trash/``; an acknowledged import with items missing; a seeded memory gone
  although nobody tried to forget it;
- partial imports: a batch (found by the token in each of its items) with some but not
  all of its items after the reopen;
- duplicated memories: two files with one id, or one content twice in one namespace;
- index != rebuild: paths whose index rows differ from a fresh rebuild into another
  index folder (as ``tests/conftest.py`` ``assert_index_matches_files`` does);
- leftover temp files: the tool's own ``.<12 hex>.agent-memory.tmp`` files, anywhere in
  the vault, older than a minute after a reopen. Younger ones may remain; so at the end
  the script waits (real time, at most a minute) until every temp file a round left is
  older than a minute, opens those vaults once more and counts what is still there.
- errors: a writer that exited with an error, an unexpected refusal, a warning or a
  traceback when the vault is reopened.

Then each step of an operation in several steps is made to fail, one at a time, in a
fresh vault: the trash ledger line and the register entry of ``forget`` (and the move
into ``.trash/``), the staged files, register entry, manifest and publishing of an
import, and the journal copies, register entry, manifest, new name, linking files and
old name of ``mv``. Each fails twice: with an error (a full disk) and with ``kill -9``
at that step. After a reopen (which finishes or undoes what the record says), two
counts must be 0, else the script exits 1:

- lost: a memory neither found by its id nor restorable from the trash, or an
  operation that said it succeeded whose effect is missing;
- hidden: a file the tool put somewhere (in the vault, in ``.trash/``, left in
  ``.index/move/`` or ``.index/import/``) that neither ``get`` nor the trash listing
  shows, or a record set aside (this machine's own records never are).

    python benchmarks/crash.py --steps-only     # just the failed steps (~a minute)
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import ctypes
import io
import json
import math
import os
import platform
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KINDS = ("remember", "update", "forget", "import", "cli-import", "cli-add")
IMPORT_KINDS = ("import", "cli-import")
MAX_LOOP = 5_000  # every writer loop is bounded
TMP_NAME = re.compile(r"\.[0-9a-f]{12}\.agent-memory\.tmp")
ORPHAN_AGE = 60.0  # seconds: the tool removes its own temp files older than this on an open
TOKEN = re.compile(r"\btok-([a-z0-9]+)-(\d+)\b")
READY = b"ready\n"
SEED_UPDATE = 20
SEED_FORGET = 300
STAGE_TIMEOUT = 60.0  # seconds a staging trigger waits before the writer is killed anyway
COMPARED = (
    "path, id, own_id, namespace, title, tags, body, created, updated, expires, source, "
    "content_hash, size, mtime_ns, sha256, problems, conflict, meta"
)
# Refusals that are no failure: two update loops racing on one memory (read, then write);
# an import in a process that opened the vault before another import was killed past its
# manifest is refused until the vault is opened again (nothing is lost: the next open
# finishes the interrupted import).
EXPECTED_REFUSALS = {"VersionConflict", "StillStaged"}
STILL_STAGED = "still staged"


# =========================================================================== writers
# Run as `crash.py --writer KIND ...` in a child process (its own session, so one
# killpg reaches a CLI child too).


def _ack(path: str, record: dict[str, Any]) -> None:
    """One line, appended and fsynced: written only after the write it reports returned."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(record) + "\n").encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def _ready() -> None:
    sys.stdout.buffer.write(READY)
    sys.stdout.buffer.flush()


def _tag(tok: str) -> str:
    return "u" + tok.replace("-", "x")


def import_items(batch: str, n: int) -> list[dict[str, Any]]:
    return [
        {"content": f"Imported fact tok-{batch}-{k}: item {k} of batch {batch}.", "namespace": "imports",
         "tags": ["imported"]}
        for k in range(n)
    ]


def run_writer(args: argparse.Namespace) -> int:
    from agent_memory.errors import AgentMemoryError, NotFound
    from agent_memory.vault.vault import Vault

    rng = random.Random(args.seed)
    ack, wid = args.ack, args.wid
    state = json.loads(Path(args.state).read_text(encoding="utf-8"))

    def refused(exc: BaseException) -> None:
        name = "StillStaged" if STILL_STAGED in str(exc) else type(exc).__name__
        _ack(ack, {"op": "refused", "kind": args.writer, "error": name, "message": str(exc)[:300]})

    if args.writer == "cli-add":
        for i in range(MAX_LOOP):
            if i == 1:
                _ready()  # after one whole CLI run, so the kill lands in a later one, not mostly in the first
            tok, ns = f"{wid}-{i}", ("default", "work")[i % 2]
            content = f"Command line fact tok-{tok}: the backup of host {i} runs hourly."
            done = subprocess.run(
                [sys.executable, "-m", "agent_memory", "--dir", args.vault, "--json", "add", content, "-n", ns,
                 "-t", "cli"], capture_output=True, timeout=120, check=False,
            )
            if done.returncode != 0:
                _ack(ack, {"op": "refused", "kind": "cli-add", "error": f"exit {done.returncode}",
                           "message": done.stderr.decode("utf-8", "replace")[-300:]})
                continue
            memory = json.loads(done.stdout)["memory"]
            _ack(ack, {"op": "remember", "id": memory["id"], "tok": tok, "ns": ns, "via": "cli add"})
        return 0

    vault = Vault(args.vault)
    if args.writer == "remember":
        _ready()
        for i in range(MAX_LOOP):
            tok, ns = f"{wid}-{i}", ("default", "work")[i % 2]
            try:
                result = vault.remember(f"Crash test fact tok-{tok}: service {i} deploys at night.",
                                        namespace=ns, tags=["crash"])
            except AgentMemoryError as exc:
                refused(exc)
                continue
            _ack(ack, {"op": "remember", "id": result["memory"]["id"], "tok": tok, "ns": ns})
    elif args.writer == "update":
        _ready()
        for i in range(MAX_LOOP):
            memory_id, tok = rng.choice(state["update_ids"]), f"{wid}-{i}"
            how = rng.choice(("append", "tag", "replace"))
            try:
                if how == "append":
                    vault.update(memory_id, append=f"Appended tok-{tok}.")
                elif how == "tag":
                    vault.update(memory_id, add_tags=[_tag(tok)])
                else:  # a whole-body replacement that keeps what it read (so nothing is superseded)
                    seen = vault.get(memory_id)
                    vault.update(memory_id, content=seen["content"].rstrip("\n") + f"\nReplaced tok-{tok}.\n",
                                 expected_version=seen["version"])
            except AgentMemoryError as exc:
                refused(exc)
                continue
            _ack(ack, {"op": "update", "id": memory_id, "how": how, "tok": tok})
    elif args.writer == "forget":
        ids = list(state["forget_ids"])
        rng.shuffle(ids)
        _ready()
        for memory_id in ids:
            _ack(ack, {"op": "forget-intent", "id": memory_id})
            try:
                vault.forget(memory_id)
            except NotFound:
                continue  # forgotten by an earlier writer of this round
            except AgentMemoryError as exc:
                refused(exc)
                continue
            _ack(ack, {"op": "forget", "id": memory_id})
    elif args.writer == "import":
        items = import_items(wid, args.import_size)
        _ready()
        try:
            result = vault.import_memories(items)
        except AgentMemoryError as exc:
            refused(exc)
        else:
            _ack(ack, {"op": "import", "batch": wid, "n": len(items), "imported": result["imported"]})
    vault.close()
    return 0


# =========================================================================== the parent


def _set_subreaper() -> bool:
    """Orphaned grandchildren (a CLI child of a killed loop) come back to this process to
    be reaped, instead of to init (Linux only)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def _reap_orphans(deadline: float = 10.0) -> int:
    """Reap what the subreaper inherited; called only when no writer of ours is alive."""
    reaped, end = 0, time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            time.sleep(0.01)
            continue
        reaped += 1
    return reaped


@dataclass
class Writer:
    kind: str
    wid: str
    proc: subprocess.Popen[bytes]
    started: float
    trigger: str  # ready | start | files | manifest
    delay: float
    stderr_path: Path
    batch_n: int = 0
    deadline: float | None = None
    ready: bool = False
    phase: str = ""  # for imports: what .index/import/ held when it was killed
    outcome: str = ""  # killed | finished | error


@dataclass
class Totals:
    kills: collections.Counter = field(default_factory=collections.Counter)
    finished: collections.Counter = field(default_factory=collections.Counter)
    errors: collections.Counter = field(default_factory=collections.Counter)
    acked: collections.Counter = field(default_factory=collections.Counter)
    refusals: collections.Counter = field(default_factory=collections.Counter)
    rows: collections.Counter = field(default_factory=collections.Counter)
    imports: collections.Counter = field(default_factory=collections.Counter)  # (phase, outcome)
    details: list[str] = field(default_factory=list)
    young_temps: list[tuple[Path, float]] = field(default_factory=list)  # (vault, newest temp mtime)
    temp_places: collections.Counter = field(default_factory=collections.Counter)
    linked: int = 0  # imports killed between a file's link into the vault and its staged name's unlink
    parked_orphans: int = 0  # .index/parked/*.md without the record that lets them be settled


class Round:
    def __init__(self, run: Run, number: int) -> None:
        self.run, self.number = run, number
        self.dir = run.work / f"round-{number:03d}"
        self.vault = self.dir / "vault"
        self.ack = self.dir / "ack.jsonl"
        self.state_path = self.dir / "state.json"
        self.writers: list[Writer] = []
        self.serial = 0

    # ------------------------------------------------------------------ setup
    def seed(self) -> None:
        from agent_memory.vault.vault import Vault

        self.dir.mkdir(parents=True)
        with Vault.init(self.vault) as vault:
            update_ids = [vault.remember(f"Seed to update tok-s{self.number}u-{k}: a fact to extend.",
                                         namespace="seeded")["memory"]["id"] for k in range(SEED_UPDATE)]
            forget_ids = [vault.remember(f"Seed to forget tok-s{self.number}f-{k}: a fact to drop.",
                                         namespace="seeded")["memory"]["id"] for k in range(SEED_FORGET)]
        self.state_path.write_text(json.dumps({"update_ids": update_ids, "forget_ids": forget_ids}), encoding="utf-8")

    # ------------------------------------------------------------------ writers
    def start(self, kind: str) -> Writer:
        rng = self.run.rng
        self.serial += 1
        wid = f"r{self.number}w{self.serial}"
        size = rng.randint(self.run.args.import_min, self.run.args.import_max) if kind in IMPORT_KINDS else 0
        if kind in IMPORT_KINDS:
            trigger = rng.choices(("ready", "files", "manifest"), weights=(2, 1, 2))[0]
        else:
            trigger = "ready"
        if kind == "cli-import" and trigger == "ready":
            trigger = "start"  # the CLI says nothing before it works: 0-300 ms after it starts
        stderr_path = self.dir / f"{wid}-{kind}.stderr"
        if kind == "cli-import":
            items_path = self.dir / f"{wid}-items.json"
            items_path.write_text(json.dumps(import_items(wid, size)), encoding="utf-8")
            command = [sys.executable, "-m", "agent_memory", "--dir", str(self.vault), "--json", "import",
                       str(items_path)]
        else:
            command = [sys.executable, os.path.abspath(__file__), "--writer", kind, "--vault", str(self.vault),
                       "--ack", str(self.ack), "--state", str(self.state_path), "--wid", wid,
                       "--seed", str(rng.randrange(1 << 30)), "--import-size", str(size)]
        if kind in IMPORT_KINDS:
            _ack(str(self.ack), {"op": "import-intent", "batch": wid, "n": size, "via": kind})
        with open(stderr_path, "wb") as err:
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                                    env=self.run.env, start_new_session=True)
        writer = Writer(kind, wid, proc, time.monotonic(), trigger, rng.uniform(0.0, 0.3), stderr_path, size)
        if trigger == "start":
            writer.deadline = writer.started + writer.delay
        if proc.stdout is not None:
            os.set_blocking(proc.stdout.fileno(), False)
        self.writers.append(writer)
        return writer

    def _staged(self, writer: Writer) -> bool:
        """Whether this writer's import has reached the point its trigger waits for."""
        folder = self.vault / ".index" / "import"
        try:
            if writer.trigger == "manifest":
                return writer.wid in (folder / "manifest.json").read_text(encoding="utf-8")
            return f"tok-{writer.wid}-0".encode() in (folder / "files" / "0.md").read_bytes()
        except (OSError, UnicodeError):
            return False

    def _import_phase(self, writer: Writer) -> str:
        folder = self.vault / ".index" / "import"
        try:
            if writer.wid in (folder / "manifest.json").read_text(encoding="utf-8"):
                linked = 0  # staged files also linked into the vault: killed between link and unlink
                with contextlib.suppress(OSError):
                    linked = sum(entry.stat().st_nlink > 1 for entry in os.scandir(folder / "files"))
                self.run.totals.linked += linked
                return "after manifest"
        except (OSError, UnicodeError):
            pass
        try:
            if f"tok-{writer.wid}-0".encode() in (folder / "files" / "0.md").read_bytes():
                return "staging"
        except OSError:
            pass
        return "not staged"  # not started yet, or done and cleared

    def poll(self, writer: Writer, now: float) -> bool:
        """Advance one writer; True when it is over (killed or exited)."""
        if writer.proc.stdout is not None and not writer.ready:
            try:
                data = writer.proc.stdout.read()
            except (BlockingIOError, OSError):
                data = None
            if data and READY in data:
                writer.ready = True
                if writer.trigger == "ready":
                    writer.deadline = now + writer.delay
        if writer.trigger in ("files", "manifest") and writer.deadline is None:
            if self._staged(writer):
                writer.deadline = now + writer.delay
            elif now - writer.started > STAGE_TIMEOUT:
                writer.deadline = now
        if writer.proc.poll() is not None:
            self._ended(writer, killed=False)
            return True
        if writer.deadline is not None and now >= writer.deadline:
            try:
                os.killpg(writer.proc.pid, signal.SIGKILL)  # the writer and any CLI child it runs
            except ProcessLookupError:
                pass
            writer.proc.wait()
            self._ended(writer, killed=writer.proc.returncode == -signal.SIGKILL)
            return True
        return False

    def _ended(self, writer: Writer, killed: bool) -> None:
        totals = self.run.totals
        if writer.kind in IMPORT_KINDS:
            writer.phase = self._import_phase(writer)
        if writer.proc.stdout is not None:
            writer.proc.stdout.close()
        code = writer.proc.returncode
        if killed:
            writer.outcome = "killed"
            totals.kills[writer.kind] += 1
        elif code == 0:
            writer.outcome = "finished"
            totals.finished[writer.kind] += 1
            if writer.kind == "cli-import":
                _ack(str(self.ack), {"op": "import", "batch": writer.wid, "n": writer.batch_n})
        else:
            tail = writer.stderr_path.read_text(encoding="utf-8", errors="replace")[-600:]
            if writer.kind == "cli-import" and code == 1 and STILL_STAGED in tail and "Traceback" not in tail:
                writer.outcome = "finished"  # refused, saying why (see EXPECTED_REFUSALS)
                totals.finished[writer.kind] += 1
                _ack(str(self.ack), {"op": "refused", "kind": writer.kind, "error": "StillStaged",
                                     "message": tail.strip()[-300:]})
                return
            writer.outcome = "error"
            totals.errors[writer.kind] += 1
            totals.details.append(f"round {self.number}: {writer.kind} {writer.wid} exited {code}: {tail.strip()}")

    def kill_all(self) -> None:
        for writer in self.writers:
            if writer.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(writer.proc.pid, signal.SIGKILL)
                writer.proc.wait()
                if writer.proc.stdout is not None:
                    writer.proc.stdout.close()

    def run_kills(self, kills: int) -> int:
        """Start writers (``parallel`` at a time) until ``kills`` of them were killed."""
        args = self.run.args
        active: list[Writer] = []
        done_kills = started = 0
        try:
            while (done_kills + len(active) < kills and started < 3 * kills) or active:
                while len(active) < args.parallel and done_kills + len(active) < kills and started < 3 * kills:
                    active.append(self.start(self.run.next_kind()))
                    started += 1
                time.sleep(0.003)
                now = time.monotonic()
                for writer in list(active):
                    if self.poll(writer, now):
                        active.remove(writer)
                        done_kills += writer.outcome == "killed"
        finally:
            self.kill_all()
            _reap_orphans()
        return done_kills

    # ------------------------------------------------------------------ checking
    def check(self) -> None:
        from agent_memory.note.parse import content_hash, parse
        from agent_memory.vault.vault import Vault

        totals, rows = self.run.totals, collections.Counter()
        records = []
        for line in self.ack.read_text(encoding="utf-8").splitlines() if self.ack.exists() else []:
            with contextlib.suppress(ValueError):
                records.append(json.loads(line))

        # Reopen: finishes or drops an interrupted import, reconciles; must say nothing.
        said = io.StringIO()
        try:
            with contextlib.redirect_stderr(said):
                vault = Vault(self.vault)
        except Exception as exc:  # noqa: BLE001 - a traceback on reopen is what this counts
            rows["errors"] += 1
            totals.details.append(f"round {self.number}: reopen failed: {type(exc).__name__}: {exc}")
            totals.rows.update(rows)
            return
        if said.getvalue().strip():
            rows["errors"] += 1
            totals.details.append(f"round {self.number}: reopen said: {said.getvalue().strip()[:300]}")
        if (self.vault / ".index" / "import").exists():
            rows["partial imports"] += 1
            totals.details.append(f"round {self.number}: .index/import/ still there after the reopen")

        # Every memory file, parsed.
        by_id: dict[str, list[str]] = collections.defaultdict(list)
        by_content: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
        notes_by_id: dict[str, Any] = {}
        batch_items: dict[str, set[int]] = collections.defaultdict(set)
        for folder, dirs, names in os.walk(self.vault):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in names:
                if not name.endswith(".md") or name.startswith("."):
                    continue
                path = Path(folder) / name
                rel = path.relative_to(self.vault).as_posix()
                data = path.read_bytes()
                note = parse(data, rel)
                if not data.strip() or note.unreadable:
                    rows["torn files"] += 1
                    totals.details.append(f"round {self.number}: torn file {rel}: {data[:120]!r}")
                    continue
                by_id[note.id].append(rel)
                by_content[(note.namespace, content_hash(note.body))].append(rel)
                notes_by_id[note.id] = note
                for batch, k in TOKEN.findall(note.body):
                    if note.namespace == "imports":
                        batch_items[batch].add(int(k))
        for key, paths in [*by_id.items(), *by_content.items()]:
            if len(paths) > 1:
                rows["duplicated memories"] += len(paths) - 1
                totals.details.append(f"round {self.number}: {key!r} in {len(paths)} files: {paths[:4]}")

        # Acknowledged writes.
        def tokens(memory_id: str) -> set[str]:
            note = notes_by_id.get(memory_id)
            return {f"{b}-{k}" for b, k in TOKEN.findall(note.body)} if note else set()

        def lost(why: str) -> None:
            rows["lost acknowledged writes"] += 1
            totals.details.append(f"round {self.number}: lost: {why}")

        trashed = set()
        ledger = self.vault / ".trash" / ".agent-memory.jsonl"
        for line in ledger.read_text(encoding="utf-8").splitlines() if ledger.exists() else []:
            with contextlib.suppress(ValueError, AttributeError):
                trashed.add(json.loads(line).get("id"))
        intents = {r["id"] for r in records if r["op"] == "forget-intent"}
        intended_imports = {r["batch"]: r for r in records if r["op"] == "import-intent"}
        state = json.loads(self.state_path.read_text(encoding="utf-8"))
        for record in records:
            op = record["op"]
            if op == "remember":
                totals.acked[record.get("via", "remember")] += 1
                note = notes_by_id.get(record["id"])
                if note is None or record["tok"] not in tokens(record["id"]) or note.namespace != record["ns"]:
                    lost(f"remember {record}")
            elif op == "update":
                totals.acked["update"] += 1
                note = notes_by_id.get(record["id"])
                present = note is not None and (
                    _tag(record["tok"]) in note.tags if record["how"] == "tag" else record["tok"] in tokens(record["id"])
                )
                if not present:
                    lost(f"update {record}")
            elif op == "forget":
                totals.acked["forget"] += 1
                if record["id"] in notes_by_id or record["id"] not in trashed:
                    lost(f"forget {record} (still in the vault: {record['id'] in notes_by_id}, "
                         f"in the trash: {record['id'] in trashed})")
            elif op == "import":
                totals.acked["import items"] += record["n"]
                if len(batch_items.get(record["batch"], ())) != record["n"]:
                    lost(f"import {record}: {len(batch_items.get(record['batch'], ()))} of its items found")
            elif op == "refused":
                totals.refusals[f"{record['kind']}: {record['error']}"] += 1
                if record["error"] not in EXPECTED_REFUSALS:
                    rows["errors"] += 1
                    totals.details.append(f"round {self.number}: refused: {record}")
        for memory_id in state["update_ids"] + [i for i in state["forget_ids"] if i not in intents]:
            if memory_id not in notes_by_id:
                lost(f"seeded memory {memory_id} is gone though nobody forgot it")

        # All or nothing, per import batch.
        for batch, intent in intended_imports.items():
            found = len(batch_items.get(batch, ()))
            outcome = "all" if found == intent["n"] else "none" if found == 0 else "partial"
            if outcome == "partial":
                rows["partial imports"] += 1
                totals.details.append(f"round {self.number}: import {batch} ({intent['via']}): {found} of {intent['n']}")
            writer = next((w for w in self.writers if w.wid == batch), None)
            phase = writer.phase if writer and writer.outcome == "killed" else "not killed"
            totals.imports[(phase, outcome)] += 1

        # The index against a rebuild from the files alone.
        rows["index ≠ rebuild"] += self._index_differences(vault)
        vault.close()

        # Displaced files kept in .index/parked/ without their record are never settled (informational).
        parked = self.vault / ".index" / "parked"
        with contextlib.suppress(OSError):
            names = {p.name for p in parked.iterdir()}
            totals.parked_orphans += sum(1 for n in names if n.endswith(".md") and n[:-3] + ".json" not in names)

        # The tool's own temp files, anywhere in the vault (dot-folders too).
        now = time.time()
        temps = self._temp_files()
        old = [(p, m) for p, m in temps if now - m > ORPHAN_AGE]
        rows["leftover temp files > 1 min"] += len(old)
        for path, _m in old:
            totals.details.append(f"round {self.number}: temp file left: {path.relative_to(self.vault)}")
        for path, _m in temps:
            where = path.relative_to(self.vault).parts[0]
            totals.temp_places[where if where.startswith(".") else "memory folders"] += 1
        if temps and len(old) < len(temps):
            totals.young_temps.append((self.vault, max(m for _p, m in temps)))
        totals.rows.update(rows)
        bad = {k: v for k, v in rows.items() if v}
        print(f"  round {self.number:3d}: {sum(w.outcome == 'killed' for w in self.writers):3d} kills, "
              f"{len(notes_by_id):5d} memories, {len(temps)} temp files"
              + (f"  PROBLEMS: {bad}" if bad else ""), flush=True)

    def _temp_files(self) -> list[tuple[Path, float]]:
        return _temp_files(self.vault)

    def _index_differences(self, vault: Any) -> int:
        from agent_memory.index.derived import TAGS
        from agent_memory.vault.vault import Vault

        fresh_dir = Path(tempfile.mkdtemp(prefix="fresh-index-", dir=self.dir))
        try:
            fresh = Vault(self.vault, index_dir=fresh_dir, sync=False)
            try:
                fresh.reindex(sweep=False)
                fresh.index.derive(TAGS)  # the tag rows are built on first use: compared built
            finally:
                fresh.close()
            rebuilt = _snapshot(fresh_dir / "index.sqlite3")
        finally:
            shutil.rmtree(fresh_dir, ignore_errors=True)
        vault.index.ensure_current()
        vault.index.derive(TAGS)
        live = _snapshot(vault.index.path)
        differing = {path for path in live.keys() | rebuilt.keys() if live.get(path) != rebuilt.get(path)}
        try:
            vault.index.query("INSERT INTO fts (fts, rank) VALUES ('integrity-check', 1)")
        except sqlite3.Error as exc:
            differing.add(f"<fts integrity-check: {exc}>")
        for path in sorted(differing)[:5]:
            self.run.totals.details.append(f"round {self.number}: index differs from a rebuild at {path}")
        return len(differing)


def _temp_files(vault: Path) -> list[tuple[Path, float]]:
    """The tool's own temp files anywhere in the vault (dot-folders too), with their mtimes."""
    found = []
    for folder, _dirs, names in os.walk(vault):
        for name in names:
            if TMP_NAME.fullmatch(name):
                path = Path(folder) / name
                with contextlib.suppress(OSError):
                    found.append((path, path.lstat().st_mtime))
    return found


def _snapshot(db_path: Path) -> dict[str, tuple]:
    """Per path: its row, tags and links (rid is a row number and may differ)."""
    conn = sqlite3.connect(db_path)
    try:
        out: dict[str, list] = collections.defaultdict(lambda: [None, [], []])
        for row in conn.execute(f"SELECT {COMPARED} FROM memories ORDER BY path"):
            out[row[0]][0] = row
        for path, tag in conn.execute("SELECT m.path, t.tag FROM tags t JOIN memories m ON m.rid = t.rid ORDER BY 1, 2"):
            out[path][1].append(tag)
        for path, relation, target in conn.execute(
            "SELECT m.path, l.relation, l.target FROM links l JOIN memories m ON m.rid = l.src ORDER BY 1, 2, 3"
        ):
            out[path][2].append((relation, target))
        return {path: (row, tuple(tags), tuple(links)) for path, (row, tags, links) in out.items()}
    finally:
        conn.close()


class Run:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.work = Path(tempfile.mkdtemp(prefix="agent-memory-crash-", dir=args.work))
        home = self.work / "home"
        home.mkdir()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_MEMORY")}
        self.env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), PYTHONDONTWRITEBYTECODE="1")
        # The writers' register of open operations is the one this process reopens with:
        # records a killed writer left are this user's, to be finished, not set aside.
        self.env["AGENT_MEMORY_STATE_DIR"] = os.environ["AGENT_MEMORY_STATE_DIR"] = str(home / "state")
        self.totals = Totals()
        self._deck: list[str] = []

    def next_kind(self) -> str:
        """Kinds in shuffled runs of all six, so each gets about a sixth of the kills."""
        if not self._deck:
            self._deck = list(KINDS)
            self.rng.shuffle(self._deck)
        return self._deck.pop()

    def age_check(self) -> tuple[int, int]:
        """Reopen every vault that still held young temp files once all are past a minute;
        returns (files aged and re-checked, files still there)."""
        totals, pending = self.totals, self.totals.young_temps
        if not pending:
            return 0, 0
        wait = max(0.0, max(m for _v, m in pending) + ORPHAN_AGE + 1 - time.time())
        if self.args.no_age_wait and wait > 0:
            return -1, 0
        if wait > 0:
            print(f"waiting {wait:.0f} s until the temp files left by killed writers are older than a minute...",
                  flush=True)
            time.sleep(wait)
        from agent_memory.vault.vault import Vault

        aged = left = 0
        for vault_dir, _m in pending:
            aged += sum(1 for _ in _temp_files(vault_dir))
            said = io.StringIO()
            with contextlib.redirect_stderr(said):
                Vault(vault_dir).close()
            now = time.time()
            for path, mtime in _temp_files(vault_dir):
                if now - mtime > ORPHAN_AGE:
                    left += 1
                    totals.details.append(f"after a minute and a reopen, still there: "
                                          f"{path.relative_to(vault_dir.parent.parent)}")
        return aged, left


def run(args: argparse.Namespace) -> int:
    subreaper = _set_subreaper()
    kills = 20 if args.quick else args.kills
    rounds = math.ceil(kills / args.per_round)
    runner = Run(args)
    totals = runner.totals
    began = time.monotonic()
    print(f"agent-memory crash test: {kills} kills in {rounds} rounds, {args.parallel} writers at a time, "
          f"imports of {args.import_min:,}-{args.import_max:,} items; work folder {runner.work}", flush=True)
    done = 0
    try:
        for number in range(1, rounds + 1):
            this_round = Round(runner, number)
            this_round.seed()
            done += this_round.run_kills(min(args.per_round, kills - done))
            this_round.check()
            if not args.keep and not any(v == this_round.vault for v, _m in totals.young_temps):
                shutil.rmtree(this_round.dir, ignore_errors=True)
        aged, left = runner.age_check()
        totals.rows["leftover temp files > 1 min"] += left
    finally:
        _reap_orphans(1.0)
        if not args.keep:
            shutil.rmtree(runner.work, ignore_errors=True)
    elapsed = time.monotonic() - began

    print()
    print(f"{sum(totals.kills.values())} kills with SIGKILL in {elapsed:.0f} s "
          f"({os.cpu_count()} cores, {platform.machine()} {platform.system()}, Python {platform.python_version()}, "
          f"SQLite {sqlite3.sqlite_version}; subreaper: {'yes' if subreaper else 'no'})")
    print()
    print(f"| {'writer':<10} | {'killed':>6} | {'ended first':>14} | {'errors':>6} |")
    print(f"|{'-' * 12}|{'-' * 7}:|{'-' * 15}:|{'-' * 7}:|")
    for kind in KINDS:
        print(f"| {kind:<10} | {totals.kills[kind]:>6} | {totals.finished[kind]:>14} | {totals.errors[kind]:>6} |")
    print(f"| {'total':<10} | {sum(totals.kills.values()):>6} | {sum(totals.finished.values()):>14} | "
          f"{sum(totals.errors.values()):>6} |")
    print()
    acked = ", ".join(f"{n:,} {what}" for what, n in sorted(totals.acked.items()))
    print(f"acknowledged: {acked or 'nothing'}")
    if totals.refusals:
        print("refused (not acknowledged): " + ", ".join(f"{n} {what}" for what, n in sorted(totals.refusals.items())))
    phases = collections.defaultdict(dict)
    for (phase, outcome), n in totals.imports.items():
        phases[phase][outcome] = n
    print("imports after the reopen, by what .index/import/ held at the kill: " + "; ".join(
        f"{phase}: " + ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))
        for phase, counts in sorted(phases.items())
    ) + f" ({totals.linked} killed between a file's link into the vault and its staged name's removal)")
    print()
    print(f"| {'check (all must be 0)':<42} | {'count':>5} |")
    print(f"|{'-' * 44}|{'-' * 6}:|")
    names = ("torn files", "lost acknowledged writes", "partial imports", "duplicated memories", "index ≠ rebuild",
             "leftover temp files > 1 min", "errors")
    for name in names:
        print(f"| {name:<42} | {totals.rows[name]:>5} |")
    if totals.parked_orphans:
        print(f"displaced files in .index/parked/ without their record (never settled): {totals.parked_orphans}")
    if totals.temp_places:
        print("temp files found right after the reopens: " + ", ".join(
            f"{n} in {place}" for place, n in sorted(totals.temp_places.items())))
    if aged == -1:
        print("(temp files younger than a minute were left unchecked: --no-age-wait)")
    elif aged:
        print(f"({aged} temp file(s) left by killed writers were checked again once over a minute old, "
              f"after one more reopen: {left} still there)")
    for line in totals.details[:40]:
        print("  " + line)
    if len(totals.details) > 40:
        print(f"  ... and {len(totals.details) - 40} more")
    return 1 if any(totals.rows[name] for name in names) else 0


# =========================================================================== failed steps
# Run as `crash.py --fail OP:STEP:HOW --vault V` in a child: the step fails (an error, or
# kill -9 of the child) the first time it is reached, during one operation.

STEPS = {
    "forget": ("move to trash", "register", "ledger"),
    "import": ("staged file", "register", "manifest", "publish"),
    "mv": ("journal copy", "register", "manifest", "new name", "linking file", "old name"),
}
HOWS = ("error", "kill")
HUB = "See [[target]] and [[other]].\n"


def _fail_at(step: str, how: str) -> None:
    """Make ``step`` fail once: install the failure where that step happens."""
    import errno

    from agent_memory.vault import moves
    from agent_memory.disk import locking, staging, store, trash
    from agent_memory.trust import register

    fired: list[bool] = []

    def fail() -> None:
        if fired:
            return
        fired.append(True)
        if how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def before(owner: Any, name: str, when: Any = None) -> None:
        real = getattr(owner, name)

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if when is None or when(*args, **kwargs):
                fail()
            return real(*args, **kwargs)

        setattr(owner, name, wrapped)

    def in_folder(name: str, manifest: bool | None = None) -> Any:
        def when(_self: Any, folder: Path, data: bytes, *args: Any, **kwargs: Any) -> bool:
            is_manifest = data.startswith((b'{"old"', b'{"items"'))
            return folder.name == name and (manifest is None or manifest == is_manifest)
        return when

    kind = {"forget": "trash", "import": "import", "mv": "move"}
    if step == "move to trash":
        before(locking, "move_no_replace", lambda src, dst: ".trash" in Path(dst).parts)
    elif step == "register":
        before(register.Register, "enter", lambda _self, k, *a, **kw: k == kind[OP[0]])
    elif step == "ledger":
        before(trash.Trash, "_append")
    elif step == "staged file":
        before(store.Store, "write_temp", in_folder("files"))
    elif step == "manifest":
        before(store.Store, "write_temp", in_folder("import" if OP[0] == "import" else "move", manifest=True))
    elif step == "publish":
        before(store.Store, "place")
    elif step == "journal copy":
        before(store.Store, "write_temp", in_folder("move", manifest=False))
    elif step == "new name":
        before(moves.Moves, "_link_new_name")
    elif step == "linking file":
        before(store.Store, "replace_checked", lambda _self, rel, *a: rel == "hub.md")
    elif step == "old name":
        before(moves.Moves, "_retire_old_name")
    del staging  # imported so that its classes are the patched modules' own


OP: list[str] = [""]


def run_failing(args: argparse.Namespace) -> int:
    """The child: one operation, with one of its steps failing."""
    from agent_memory.errors import AgentMemoryError
    from agent_memory.vault.vault import Vault

    op, step, how = args.fail.split(":")
    OP[0] = op
    vault = Vault(args.vault)
    state = json.loads(Path(args.state).read_text(encoding="utf-8"))
    _fail_at(step, how)
    try:
        if op == "forget":
            vault.forget(state["target"])
        elif op == "import":
            vault.import_memories(import_items("failed", 5))
        else:
            vault.move("target.md", "moved/renamed.md")
    except (AgentMemoryError, OSError) as exc:  # the step failed with an error: the operation says so
        print(f"refused: {type(exc).__name__}: {exc}", file=sys.stderr)
        vault.close()
        return 2
    vault.close()
    return 0


def _seed_steps(folder: Path) -> dict[str, Any]:
    from agent_memory.vault.vault import Vault

    folder.mkdir(parents=True)
    vault_dir = folder / "vault"
    with Vault.init(vault_dir) as vault:
        ids = [vault.remember(f"Seeded fact {k} for the failed steps.", namespace="seeded")["memory"]["id"]
               for k in range(20)]
        (vault_dir / "target.md").write_text("The note that is forgotten or moved.\n## Part\n")
        (vault_dir / "other.md").write_text("Back to [[target#Part]].\n")
        (vault_dir / "hub.md").write_text(HUB)
        vault.reconcile()
        state = {"ids": ids + ["target.md", "other.md", "hub.md"], "target": "target.md"}
    (folder / "state.json").write_text(json.dumps(state), encoding="utf-8")
    return state


def _hidden(vault: Any, root: Path) -> list[str]:
    """Files the tool put somewhere that nothing shows: memory files get cannot find,
    files in .trash/ the trash listing does not name, records left or set aside."""
    hidden = []
    listed = {e["trash"] for e in vault.trash_list()}
    for path in vault.store.trash.files():
        rel = path.relative_to(root).as_posix()
        if rel not in listed:
            hidden.append(rel)
    from agent_memory.disk.store import Store

    for rel, _stat in Store(root).walk():
        try:
            vault.get(rel)
        except Exception:  # noqa: BLE001 - any refusal means the file is not shown
            hidden.append(rel)
    for left in ("move", "import", "set-aside"):
        if (root / ".index" / left).exists():
            hidden.append(f".index/{left}/")
    return hidden


def run_steps(work: Path, env: dict[str, str]) -> int:
    """Every step of forget, import and mv failing, by error and by kill: lost and hidden."""
    from agent_memory.vault.vault import Vault

    print()
    print("Each step of an operation failing (an error, or kill -9 at that step), then a reopen:")
    print()
    print(f"| {'operation':<9} | {'step failed':<13} | {'how':<5} | {'outcome':<9} | {'lost':>4} | {'hidden':>6} |")
    print(f"|{'-' * 11}|{'-' * 15}|{'-' * 7}|{'-' * 11}|{'-' * 5}:|{'-' * 7}:|")
    lost_total = hidden_total = 0
    details: list[str] = []
    for op, steps in STEPS.items():
        for step in steps:
            for how in HOWS:
                folder = work / f"steps-{op}-{step.replace(' ', '-')}-{how}"
                state = _seed_steps(folder)
                done = subprocess.run(
                    [sys.executable, os.path.abspath(__file__), "--fail", f"{op}:{step}:{how}", "--vault",
                     str(folder / "vault"), "--state", str(folder / "state.json")],
                    env=env, capture_output=True, text=True, timeout=300, check=False)
                outcome = {0: "done", 2: "refused", -signal.SIGKILL: "killed"}.get(done.returncode, "ERROR")
                if outcome == "ERROR":
                    details.append(f"{op}/{step}/{how}: exited {done.returncode}: {done.stderr.strip()[-400:]}")
                said = io.StringIO()
                with contextlib.redirect_stderr(said), Vault(folder / "vault") as vault:
                    lost = _lost(vault, state, op, outcome, folder / "vault")
                    hidden = _hidden(vault, folder / "vault")
                if "Traceback" in said.getvalue():
                    details.append(f"{op}/{step}/{how}: the reopen: {said.getvalue().strip()[-400:]}")
                lost_total += len(lost)
                hidden_total += len(hidden)
                details.extend(f"{op}/{step}/{how}: lost {what}" for what in lost)
                details.extend(f"{op}/{step}/{how}: hidden {what}" for what in hidden)
                print(f"| {op:<9} | {step:<13} | {how:<5} | {outcome:<9} | {len(lost):>4} | {len(hidden):>6} |",
                      flush=True)
    print()
    print(f"{lost_total} lost, {hidden_total} hidden")
    for line in details[:40]:
        print("  " + line)
    return 1 if lost_total or hidden_total or any("exited" in d or "reopen" in d for d in details) else 0


def _lost(vault: Any, state: dict[str, Any], op: str, outcome: str, root: Path) -> list[str]:
    """Seeded memories neither found nor restorable, and a finished operation whose
    effect is missing."""
    restorable = {e["id"] for e in vault.trash_list()} | {e["source"] for e in vault.trash_list()}
    lost = []
    for memory_id in state["ids"]:
        found = True
        try:
            vault.get(memory_id)
        except Exception:  # noqa: BLE001
            found = False
        if op == "mv" and memory_id == "target.md" and not found:
            found = (root / "moved" / "renamed.md").exists() and bool(vault.get("moved/renamed.md"))
        if not found and memory_id not in restorable:
            lost.append(memory_id)
    if outcome == "done":
        if op == "forget" and "target.md" not in restorable:
            lost.append("forget said done, target.md is not in the trash")
        if op == "import" and vault.search("Imported fact", namespace="imports")["count"] != 5:
            lost.append("import said done, not all 5 items are there")
        if op == "mv" and not (root / "moved" / "renamed.md").exists():
            lost.append("mv said done, moved/renamed.md is not there")
    if op == "import" and vault.search("Imported fact", namespace="imports")["count"] not in (0, 5):
        lost.append("a partial import")
    return lost


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=200, help="how many writers to kill (default 200)")
    parser.add_argument("--quick", action="store_true", help="20 kills, no waiting for temp files to age")
    parser.add_argument("--per-round", type=int, default=10, help="kills per vault before it is checked (default 10)")
    parser.add_argument("--parallel", type=int, default=2, help="writers running at once (default 2)")
    parser.add_argument("--import-min", type=int, default=1000)
    parser.add_argument("--import-max", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: a fresh one)")
    parser.add_argument("--work", default=None, help="parent folder of the temporary work folder (default: $TMPDIR)")
    parser.add_argument("--keep", action="store_true", help="keep the vaults and ack logs")
    parser.add_argument("--no-age-wait", action="store_true", help="do not wait for temp files to be a minute old")
    parser.add_argument("--steps-only", action="store_true", help="only fail each step of forget, import and mv")
    # A writer child (internal).
    parser.add_argument("--writer", choices=KINDS, help=argparse.SUPPRESS)
    for name in ("--vault", "--ack", "--state", "--wid"):
        parser.add_argument(name, help=argparse.SUPPRESS)
    parser.add_argument("--import-size", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--fail", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.writer:
        return run_writer(args)
    if args.fail:
        return run_failing(args)
    if args.steps_only:
        return failed_steps(args)
    if args.quick:
        args.no_age_wait = True
    if args.seed is None:
        args.seed = random.randrange(1 << 30)
    print(f"seed {args.seed}")
    killed = run(args)
    return failed_steps(args) or killed


def failed_steps(args: argparse.Namespace) -> int:
    """``run_steps`` in a work folder of its own."""
    runner = Run(args)
    try:
        return run_steps(runner.work, runner.env)
    finally:
        if not args.keep:
            shutil.rmtree(runner.work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
