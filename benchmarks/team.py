"""A team sharing one vault through git: three clones of a bare remote, each with a
running ``agent-memory serve --git-commit`` (a real subprocess, driven over stdio by the
MCP SDK's client), an agent on each writing new memories and adding its tag to shared
ones, while ``agent-memory sync`` runs on each clone every few seconds.

At the end (servers stopped, their last commits flushed, a few final syncs): the three
clones must be identical (same HEAD as the remote, clean, same memory files), each index
must equal a rebuild from the files, and no memory may be lost or duplicated; each
shared memory must carry every agent's tag. Printed: those counts, the conflicts that
needed a human (this script plays the human: it keeps both sides' tags, as a person
would, and counts it), and how long a memory written on one clone took to be recallable
on the others (recall through the other clones' servers).

Two of the clones also have a person editing notes by hand (as in Obsidian: new notes
without front matter, lines appended, renames, deletes; the agents tag those notes too)
who shares them with ``sync --all``, over a compressed day (the person's commits carry
author dates from 08:00 yesterday on). Printed: hand edits made and shared, hand edits
lost, and hand notes misdated (the index's creation time is not git's author date of the
note's first commit, or a tool edit wrote id/created/updated/namespace into it): all
but the first must be 0. Last, the start time of a vault of ``--start-notes`` hand notes
in git (100,000 by default) with nothing changed, the git-dates pass included, beside the
first start that built the index and read the whole history.

The merge driver (``agent-memory git setup``) is used when this installation has it;
otherwise git's own merge runs and concurrent tag edits of one memory conflict.

    python benchmarks/team.py            # 3 agents x (200 new + 50 shared updates), 2 people x 60 hand edits
    python benchmarks/team.py --quick    # 3 x (20 + 5), 2 x 15, a start at 5,000 notes, for a smoke run
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from agent_memory.note.parse import parse
from agent_memory.note.patch import patch
from agent_memory.note.tags import as_tag_list
from agent_memory.vault.vault import Vault

NAMES = ("ada", "grace", "linus")
PEOPLE = NAMES[:2]  # these clones also have a person editing by hand, who syncs with --all
DAY_START = time.time() - 86400 - (time.time() % 86400) + 8 * 3600  # 08:00 UTC yesterday
DAY_SPEED = 600.0  # the person's clock runs 10 minutes a second: a day in a couple of minutes
WORDS = ("deploy invoice billing schema backup latency budget roadmap incident pager dashboard quota region "
         "cluster vendor contract renewal laptop review prototype kettle printer badge parking lunch").split()
COMPARED = ("path, id, own_id, namespace, title, tags, body, created, updated, expires, source, content_hash, "
            "size, mtime_ns, ctime_ns, inode, sha256, problems, conflict, meta")


def git(repo: Path, *args: str, check: bool = True) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=ENV, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} in {repo}: {done.stderr.strip()}")
    return done.stdout


ENV: dict[str, str] = {}


def cli(clone: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agent_memory", "--dir", str(clone), *args], capture_output=True,
                          text=True, env=ENV, check=False)


def has_merge_driver() -> bool:
    return cli(Path("."), "git", "setup", "--help").returncode == 0


# --------------------------------------------------------------------------- set-up


def set_up(base: Path, shared: int, driver: bool) -> tuple[Path, list[Path], list[str]]:
    remote = base / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], env=ENV, check=True)
    first = base / NAMES[0]
    first.mkdir()
    git(first, "init", "-q", "-b", "main")
    with Vault.init(first) as vault:
        ids = [vault.remember(f"Shared fact {n}: the {WORDS[n % len(WORDS)]} owner is on the wiki.",
                              title=f"Shared {n}", tags=["shared"])["memory"]["id"] for n in range(shared)]
    (first / ".agent-memory.toml").write_text("[git]\ncommit = true\n")
    cli(first, "trust", "git.commit")  # each clone's person approves the team's commit setting once
    if driver:
        done = cli(first, "git", "setup")
        if done.returncode != 0:
            raise RuntimeError(f"agent-memory git setup failed: {done.stderr.strip()}")
    git(first, "add", "-A")
    git(first, "commit", "-q", "-m", "the team's vault")
    git(first, "remote", "add", "origin", str(remote))
    git(first, "push", "-q", "-u", "origin", "main")
    clones = [first]
    for name in NAMES[1:]:
        clone = base / name
        subprocess.run(["git", "clone", "-q", str(remote), str(clone)], env=ENV, check=True)
        cli(clone, "trust", "git.commit")
        if driver:
            cli(clone, "git", "setup")
        clones.append(clone)
    return remote, clones, ids


# --------------------------------------------------------------------------- the human


def resolve_as_a_person(clone: Path, paths: list[str]) -> bool:
    """Resolve conflicted memories as a person would: our file, with the tags of both
    sides, and the later ``updated``. False when a conflict is not only about tags."""
    for rel in paths:
        stages = {line.split()[2] for line in git(clone, "ls-files", "-u", "--", rel).splitlines()}
        if not {"2", "3"} <= stages:  # one side deleted the note (its person did) and the other tagged it
            git(clone, "rm", "-q", "--", rel)  # the person keeps the deletion they meant
            continue
        ours, theirs = (git(clone, "show", f":{stage}:{rel}") for stage in (2, 3))
        mine, other = parse(ours.encode(), rel), parse(theirs.encode(), rel)
        if mine.body != other.body:
            return False
        tags = list(dict.fromkeys([*as_tag_list(mine.meta.get("tags")), *as_tag_list(other.meta.get("tags"))]))
        updated = max(str(mine.meta.get("updated", "")), str(other.meta.get("updated", "")))
        (clone / rel).write_text(patch(ours, {"tags": tags, "updated": updated}))
        git(clone, "add", "--", rel)
    git(clone, "commit", "-q", "--no-edit")
    return True


# --------------------------------------------------------------------------- the run


class Run:
    def __init__(self, clones: list[Path], shared: list[str], args: argparse.Namespace) -> None:
        self.clones = clones
        self.shared = shared
        self.args = args
        self.written: dict[str, str] = {}  # id -> clone name
        self.syncs = {"ok": 0, "conflicts": 0, "failed": 0}
        self.human: list[str] = []  # conflicted paths a person had to resolve
        self.errors: list[str] = []
        self.refused = 0  # tool writes refused (a conflicted file, a save meanwhile) and retried
        self.latency: list[float] = []
        self.sync_seconds: list[float] = []  # each `agent-memory sync` process, start to exit
        self.probes_lost = 0
        self.agents_done = 0
        self.expected: list[dict[str, float]] = [{} for _ in clones]  # per clone: probe word -> when written
        self.hand = Hands()
        self.locks = {clone: anyio.Lock() for clone in clones}  # a person does not type while their sync runs
        self.began = time.monotonic()
        self.people_left = sum(1 for clone in clones if clone.name in PEOPLE)

    def day_clock(self) -> str:
        """The person's time now, in the compressed day, as git takes an author date."""
        return f"@{int(DAY_START + (time.monotonic() - self.began) * DAY_SPEED)} +0000"

    async def sync(self, clone: Path, depth: int = 0) -> None:
        async with self.locks[clone]:
            await self._sync(clone, depth)

    async def _sync(self, clone: Path, depth: int = 0) -> None:
        began = time.monotonic()
        person = clone.name in PEOPLE
        env = {**ENV, "GIT_AUTHOR_DATE": self.day_clock()} if person else ENV
        done = await anyio.run_process([sys.executable, "-m", "agent_memory", "--dir", str(clone), "--json", "sync",
                                        *(["--all"] if person else [])], env=env, check=False)
        self.sync_seconds.append(time.monotonic() - began)
        if done.returncode == 0:
            self.syncs["ok"] += 1
            return
        try:
            result = json.loads(done.stdout)
        except ValueError:
            result = {}
        if result.get("conflicts"):
            self.syncs["conflicts"] += 1
            self.human.extend(f"{clone.name}:{p}" for p in result["conflicts"])
            if not await anyio.to_thread.run_sync(resolve_as_a_person, clone, result["conflicts"]):
                self.errors.append(f"{clone.name}: a conflict that is not only tags: {result['conflicts']}")
            elif depth < 3:
                await self._sync(clone, depth + 1)  # the person runs sync again, as the error says
        else:
            self.syncs["failed"] += 1
            self.errors.append(f"{clone.name}: {done.stderr.decode().strip()[:200]}")
            state = " ".join(git(clone, "status", "--short", check=False).split()[:20])
            self.errors.append(f"{clone.name}: git status then: {state or 'clean'}")

    async def sync_loop(self, n: int, clone: Path) -> None:
        await anyio.sleep(self.args.sync_every * n / len(self.clones))  # staggered
        while self.agents_done < len(self.clones) or any(self.expected) or self.people_left:
            await self.sync(clone)
            await anyio.sleep(self.args.sync_every)

    async def call(self, client: Client, tool: str, retry: bool = True, **arguments: Any) -> dict[str, Any] | None:
        for _ in range(50):
            result = await client.call_tool(tool, arguments)
            if not result.is_error:
                return result.structured_content
            if not retry:  # a person's note not pulled here yet, or renamed meanwhile: skip it
                return None
            self.refused += 1  # a file in conflict, or saved meanwhile: retry a little later
            await anyio.sleep(0.5)
        self.errors.append(f"{tool} kept failing: {result.content[0].text[:200]}")
        return None

    async def agent(self, n: int, clients: list[Client]) -> None:
        name, client = NAMES[n], clients[n]
        rng = random.Random(name)
        ops = ["new"] * self.args.memories + ["update"] * self.args.updates
        rng.shuffle(ops)
        shared = list(self.shared)
        rng.shuffle(shared)
        made = 0
        for k, op in enumerate(ops):
            if op == "new":
                words = " ".join(rng.choice(WORDS) for _ in range(8))
                stored = await self.call(client, "remember", content=f"{name} noted {made}: {words}.",
                                         title=f"{name} note {made}", tags=[name])
                if stored:
                    self.written[stored["memory"]["id"]] = name
                made += 1
            else:
                await self.call(client, "update_memory", memory_id=shared.pop(), add_tags=[f"seen-by-{name}"])
                if self.hand.notes and rng.random() < 0.5:  # a person's note: the tag edit must add only tags
                    rel = rng.choice(sorted(self.hand.notes))
                    if await self.call(client, "update_memory", retry=False, memory_id=rel,
                                       add_tags=[f"seen-by-{name}"]):
                        self.hand.tagged.add(rel)
            if k % self.args.probe_every == 0:
                await self.probe(n, clients)
            await anyio.sleep(1 / self.args.rate)
        self.agents_done += 1

    async def person(self, clone: Path) -> None:
        """A person editing notes by hand in their clone, between their syncs: new notes
        without front matter, a line appended (to their own notes or the team's common
        ones), a rename, a delete. Every line carries a token the end checks for."""
        name, rng = clone.name, random.Random(f"hand-{clone.name}")
        for k in range(self.args.hand_edits):
            await anyio.sleep(rng.uniform(0.5, 2.0) * self.args.sync_every / 2)
            async with self.locks[clone]:
                await anyio.to_thread.run_sync(self.hand.edit, clone, name, k, rng)
        self.people_left -= 1

    async def probe(self, n: int, clients: list[Client]) -> None:
        """A memory with a word of its own; the other clones' pollers time its arrival."""
        token = f"probe{NAMES[n]}{len(self.latency) + self.probes_lost}x{random.randrange(10**6)}"
        stored = await self.call(clients[n], "remember", content=f"Probe {token} written by {NAMES[n]}.",
                                 title=f"probe {token}", tags=["probe"])
        if stored is None:
            return
        self.written[stored["memory"]["id"]] = NAMES[n]
        now = time.monotonic()
        for m in range(len(clients)):
            if m != n:
                self.expected[m][token] = now

    async def poller(self, m: int, client: Client) -> None:
        """Recall, through clone ``m``'s server, the probes written elsewhere (one call for
        all of them, twice a second), until every probe arrived or timed out."""
        waiting = self.expected[m]
        while self.agents_done < len(self.clones) or waiting:
            await anyio.sleep(0.5)
            now = time.monotonic()
            for token in [t for t, start in waiting.items() if now - start > self.args.probe_timeout]:
                del waiting[token]
                self.probes_lost += 1
            if not waiting:
                continue
            tokens = list(waiting)[:50]
            found = await client.call_tool("recall", {"query": " ".join(tokens), "match": "any", "limit": 100})
            if found.is_error:
                continue
            seen = " ".join(hit["title"] for hit in found.structured_content["hits"])
            arrived = time.monotonic()
            for token in tokens:
                if token in seen:
                    self.latency.append(arrived - waiting.pop(token))

    async def main(self) -> None:
        logs = [open(clone.parent / f"{clone.name}-server.log", "w") for clone in self.clones]  # noqa: SIM115, ASYNC230
        async with contextlib.AsyncExitStack() as stack:
            clients = []
            for clone, log in zip(self.clones, logs):
                params = StdioServerParameters(command=sys.executable,
                                               args=["-m", "agent_memory", "serve", "--git-commit", "--dir", str(clone)],
                                               env=ENV)
                clients.append(await stack.enter_async_context(Client(stdio_client(params, errlog=log))))
            async with anyio.create_task_group() as tasks:
                for n, clone in enumerate(self.clones):
                    tasks.start_soon(self.sync_loop, n, clone)
                    tasks.start_soon(self.poller, n, clients[n])
                async with anyio.create_task_group() as agents:
                    for n in range(len(self.clones)):
                        agents.start_soon(self.agent, n, clients)
                    for clone in self.clones:
                        if clone.name in PEOPLE:
                            agents.start_soon(self.person, clone)
        for log in logs:
            log.close()
        self.server_warnings = sum(1 for clone in self.clones
                                   for line in (clone.parent / f"{clone.name}-server.log").read_text().splitlines()
                                   if " WARNING " in line or " ERROR " in line)


class Hands:
    """What the people did by hand, for the checks at the end."""

    def __init__(self) -> None:
        self.notes: set[str] = set()  # hand notes that exist (vault paths), as their people last saw them
        self.tokens: dict[str, str] = {}  # token -> the note it was written into (following renames)
        self.gone: set[str] = set()  # tokens of notes a person deleted
        self.tagged: set[str] = set()  # hand notes an agent tagged
        self.origin: dict[str, str] = {}  # a renamed note -> the path it was first written at
        self.made = 0

    def edit(self, clone: Path, name: str, k: int, rng: random.Random) -> None:
        own = sorted(p for p in self.notes if p.startswith(f"hand/{name}-") and (clone / p).exists())
        common = sorted(p for p in self.notes if p.startswith("hand/common-") and (clone / p).exists())
        token = f"hand{name}{k}x"
        roll = rng.random()
        if not own or roll < 0.3 or (k < 2 and name == PEOPLE[0]):
            rel = f"hand/common-{k}.md" if k < 2 and name == PEOPLE[0] else f"hand/{name}-{k}.md"
            (clone / "hand").mkdir(exist_ok=True)
            (clone / rel).write_text(f"# {name.title()} note {k}\n\nWritten by hand: {token}.\n\nLast line.\n")
            self.notes.add(rel)
        elif roll < 0.75:
            rel = rng.choice(own + common)
            with open(clone / rel, "a", encoding="utf-8") as note:
                note.write(f"Added by {name}: {token}.\n")
        elif roll < 0.88:
            old = rng.choice(own)
            rel = f"hand/{name}-{k}-renamed.md"
            (clone / old).rename(clone / rel)
            self.notes.discard(old)
            self.notes.add(rel)
            self.tagged.discard(old)
            self.origin[rel] = self.origin.pop(old, old)
            for t, where in self.tokens.items():
                if where == old:
                    self.tokens[t] = rel
            return
        else:
            rel = rng.choice(own)
            (clone / rel).unlink()
            self.notes.discard(rel)
            self.tagged.discard(rel)
            self.gone.update(t for t, where in self.tokens.items() if where == rel)
            return
        self.tokens[token] = rel
        self.made += 1


def hand_checks(hand: Hands, clones: list[Path], remote: Path) -> dict[str, Any]:
    """Hand edits shared (on the remote), lost (a token missing from a clone's note) and
    hand notes misdated (index date not git's first author date, or a date key added)."""
    on_remote = "".join(git(remote, "show", f"main:{rel}", check=False) for rel in sorted(hand.notes))
    live = {t: rel for t, rel in hand.tokens.items() if t not in hand.gone}
    shared = sum(1 for t in live if t in on_remote)
    lost = misdated = 0
    details: list[str] = []
    for clone in clones:
        with Vault(clone, sync=False) as vault:
            rows = {row["path"]: row["created"] for row in vault.index.query(
                "SELECT path, created FROM memories WHERE path LIKE 'hand/%'")}
        for token, rel in live.items():
            path = clone / rel
            if not path.exists() or token not in path.read_text(encoding="utf-8"):
                lost += 1
        for rel in hand.notes:
            text = (clone / rel).read_text(encoding="utf-8") if (clone / rel).exists() else ""
            # When the note was first added, at the path its person first wrote it at (not
            # `git log --follow`, which also follows a copy to another note).
            added = git(clone, "log", "--diff-filter=A", "--format=%at", "--", hand.origin.get(rel, rel)).split()
            first = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(added[-1]))) if added else None
            header = text.split("\n---", 1)[0] if text.startswith("---") else ""
            keys = [key for key in ("id", "created", "updated", "namespace") if f"\n{key}:" in "\n" + header]
            if rows.get(rel) != first or keys:
                misdated += 1
                details.append(f"misdated: {clone.name}:{rel} index {rows.get(rel)}, git {first}, keys added {keys}")
    return {"shared": shared, "made": len(live), "lost": lost, "misdated": misdated, "details": details}


def start_time(count: int) -> dict[str, float]:
    """A vault of ``count`` hand notes in git: the first start (index built, git dates
    read from the whole history), then starts with nothing changed (median of three),
    then one after a commit that changed a note (the incremental pass)."""
    base = Path(tempfile.mkdtemp(prefix="agent-memory-start-"))
    try:
        repo = base / "vault"
        repo.mkdir()
        git(repo, "init", "-q", "-b", "main")
        Vault.init(repo, sync=False).close()
        for k in range(count):
            folder = repo / "notes" / f"{k // 1000:03d}"
            if k % 1000 == 0:
                folder.mkdir(parents=True)
            (folder / f"note-{k}.md").write_text(f"# Note {k}\n\nA hand note about {WORDS[k % len(WORDS)]} {k}.\n")
        git(repo, "add", "-A")
        subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", "notes"], check=True,
                       env={**ENV, "GIT_AUTHOR_DATE": "@1700000000 +0000"})
        began = time.monotonic()
        Vault(repo).close()
        first = time.monotonic() - began
        again = []
        for _ in range(3):
            began = time.monotonic()
            Vault(repo).close()
            again.append(time.monotonic() - began)
        (repo / "notes" / "000" / "note-1.md").write_text("# Note 1\n\nChanged and committed.\n")
        git(repo, "commit", "-q", "-am", "one change")
        began = time.monotonic()
        Vault(repo).close()
        incremental = time.monotonic() - began
        with Vault(repo, sync=False) as vault:
            dated = vault.index.query("SELECT count(*) AS n FROM memories WHERE created = '2023-11-14T22:13:20Z'")[0]["n"]
        return {"first": first, "unchanged": statistics.median(again), "incremental": incremental,
                "dated": dated}
    finally:
        shutil.rmtree(base, ignore_errors=True)


# --------------------------------------------------------------------------- checks


def memory_files(clone: Path) -> dict[str, str]:
    """Every memory file of a clone and a hash of its bytes."""
    with Vault(clone, sync=False) as vault:
        walked = [rel for rel, _stat in vault.store.walk()]
    return {rel: hashlib.sha256((clone / rel).read_bytes()).hexdigest() for rel in walked}


def index_equals_rebuild(clone: Path) -> bool:
    fresh = Path(tempfile.mkdtemp(prefix="team-rebuild-"))
    try:
        with Vault(clone, index_dir=fresh, sync=False) as rebuilt:
            rebuilt.reindex(sweep=False)
        with Vault(clone, sync=False) as live:
            live_path = live.index.path
        rows = []
        for db in (live_path, fresh / "index.sqlite3"):
            conn = sqlite3.connect(db)
            rows.append(conn.execute(f"SELECT {COMPARED} FROM memories ORDER BY path").fetchall())
            conn.close()
        return rows[0] == rows[1]
    finally:
        shutil.rmtree(fresh, ignore_errors=True)


def converge(run: Run, remote: Path) -> int:
    """Sync every clone in turn until all have the remote's HEAD; the rounds it took."""
    for rounds in range(1, 8):
        for clone in run.clones:
            anyio.run(run.sync, clone)
        heads = {git(c, "rev-parse", "HEAD").strip() for c in run.clones}
        if len(heads) == 1 and heads == {git(remote, "rev-parse", "main").strip()}:
            return rounds
    return -1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="20 new memories and 5 shared updates per agent")
    parser.add_argument("--memories", type=int, default=200, help="new memories per agent")
    parser.add_argument("--updates", type=int, default=50, help="shared memories each agent tags (at most --shared)")
    parser.add_argument("--shared", type=int, default=50, help="memories all agents update")
    parser.add_argument("--rate", type=float, default=12.0, help="tool calls per second per agent")
    parser.add_argument("--sync-every", type=float, default=3.0, help="seconds between syncs on each clone")
    parser.add_argument("--probe-every", type=int, default=25, help="a latency probe every N tool calls")
    parser.add_argument("--probe-timeout", type=float, default=60.0)
    parser.add_argument("--no-driver", action="store_true", help="do not use agent-memory git setup even if present")
    parser.add_argument("--keep", action="store_true", help="keep the clones (their path is printed)")
    parser.add_argument("--hand-edits", type=int, default=60, help="edits by hand per person")
    parser.add_argument("--start-notes", type=int, default=100_000,
                        help="hand notes in git for the start-time measurement (0: skip it)")
    args = parser.parse_args()
    if args.quick:
        args.memories, args.updates, args.shared, args.probe_every, args.hand_edits = 20, 5, 5, 5, 15
        args.start_notes = min(args.start_notes, 5000)
    args.updates = min(args.updates, args.shared)
    base = Path(tempfile.mkdtemp(prefix="agent-memory-team-"))
    home = base / "home"
    home.mkdir()
    ENV.update({k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "AGENT_MEMORY"))})
    ENV.update(HOME=str(home), GIT_CONFIG_GLOBAL=str(home / ".gitconfig"), GIT_CONFIG_NOSYSTEM="1",
               GIT_CEILING_DIRECTORIES=str(base), PYTHONPATH=os.pathsep.join(filter(None, [
                   str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])))
    (home / ".gitconfig").write_text("[user]\n\tname = Team Agent\n\temail = agent@example.com\n")
    os.environ.update(ENV)
    driver = has_merge_driver() and not args.no_driver
    started = time.monotonic()
    remote, clones, shared = set_up(base, args.shared, driver)
    run = Run(clones, shared, args)
    anyio.run(run.main)
    writing = time.monotonic() - started
    rounds = converge(run, remote)

    files = [memory_files(c) for c in clones]
    identical = all(f == files[0] for f in files) and all(git(c, "status", "--porcelain") == "" for c in clones)
    expected = set(run.written) | set(shared)
    lost = duplicated = untagged = 0
    rebuilds = []
    for clone in clones:
        with Vault(clone, sync=False) as vault:
            rows = vault.index.query("SELECT id, path, tags FROM memories")
        ids = [row["id"] for row in rows]
        lost += len(expected - set(ids))
        duplicated += len(ids) - len(set(ids))
        tags = {row["id"]: set(row["tags"].split()) for row in rows}
        untagged += sum(1 for sid in shared
                        if not {f"seen-by-{n}" for n in NAMES} <= tags.get(sid, set()) and args.updates == args.shared)
        rebuilds.append(index_equals_rebuild(clone))
    commits = int(git(clones[0], "rev-list", "--count", "HEAD").strip())
    hands = hand_checks(run.hand, clones, remote)
    run.errors[:0] = hands["details"][:10]

    print(f"agent-memory team benchmark: {len(clones)} clones, each `serve --git-commit` over stdio; "
          f"{args.memories} new + {args.updates} shared updates per agent at {args.rate:g} calls/s; "
          f"sync every {args.sync_every:g} s; merge driver: {'yes (agent-memory git setup)' if driver else 'no'}")
    rows = [
        ("memories written (incl. probes) + shared", f"{len(run.written)} + {len(shared)}"),
        ("commits on the remote", commits),
        ("syncs: ok / conflict / failed", f"{run.syncs['ok']} / {run.syncs['conflicts']} / {run.syncs['failed']}"),
        ("final sync rounds to converge", rounds),
        ("clones identical (HEAD, clean, same files)", "yes" if identical and rounds > 0 else "NO"),
        ("indexes equal to a rebuild", f"{sum(rebuilds)} of {len(rebuilds)}"),
        ("memories lost (summed over clones)", lost),
        ("memories duplicated", duplicated),
        ("shared memories missing a tag", untagged),
        ("conflicts that needed a human", len(run.human)),
        ("tool writes refused and retried", run.refused),
        ("server warnings logged", run.server_warnings),
        ("hand edits shared / made (2 people, sync --all)", f"{hands['shared']} / {hands['made']}"),
        ("hand edits lost (summed over clones)", hands["lost"]),
        ("hand notes misdated (summed over clones)", hands["misdated"]),
        ("hand notes the agents tagged", len(run.hand.tagged)),
    ]
    if run.latency:
        ordered = sorted(run.latency)
        p95 = ordered[max(0, int(len(ordered) * 0.95) - 1)]
        rows.append(("recallable on another clone: median / p95 / max",
                     f"{statistics.median(ordered):.1f} s / {p95:.1f} s / {ordered[-1]:.1f} s ({len(ordered)} probes)"))
    rows.append(("probes never seen on another clone", run.probes_lost))
    took = f"{statistics.median(run.sync_seconds):.2f} s / {max(run.sync_seconds):.2f} s"
    rows.append(("one sync (a CLI process): median / max", took))
    rows.append(("wall time (writing / total)", f"{writing:.0f} s / {time.monotonic() - started:.0f} s"))
    if args.start_notes:
        start = start_time(args.start_notes)
        rows.append((f"start at {args.start_notes:,} hand notes in git, nothing changed (median of 3)",
                     f"{start['unchanged']:.2f} s"))
        rows.append(("  after one commit (incremental git-dates pass)", f"{start['incremental']:.2f} s"))
        rows.append(("  first start (index built, whole history read)", f"{start['first']:.1f} s"))
        rows.append(("  notes dated by git, not by checkout", f"{start['dated']:,} of {args.start_notes:,}"))
    width = max(len(r[0]) for r in rows)
    for label, value in rows:
        print(f"  {label:<{width}}  {value}")
    if run.human:
        print("  conflicts a person resolved:", ", ".join(run.human[:10]) + (" ..." if len(run.human) > 10 else ""))
    for error in run.errors[:10]:
        print("  error:", error)
    if args.keep:
        print(f"  clones kept in {base}")
    else:
        shutil.rmtree(base, ignore_errors=True)
    ok = (identical and rounds > 0 and all(rebuilds) and not lost and not duplicated and not untagged
          and not hands["lost"] and not hands["misdated"] and hands["shared"] == hands["made"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
