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

The merge driver (``agent-memory git setup``) is used when this installation has it;
otherwise git's own merge runs and concurrent tag edits of one memory conflict.

    python benchmarks/team.py            # 3 agents x (200 new + 50 shared updates)
    python benchmarks/team.py --quick    # 3 x (20 + 5), for a smoke run
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

    async def sync(self, clone: Path, depth: int = 0) -> None:
        began = time.monotonic()
        done = await anyio.run_process([sys.executable, "-m", "agent_memory", "--dir", str(clone), "--json", "sync"],
                                       env=ENV, check=False)
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
                await self.sync(clone, depth + 1)  # the person runs sync again, as the error says
        else:
            self.syncs["failed"] += 1
            self.errors.append(f"{clone.name}: {done.stderr.decode().strip()[:200]}")
            state = " ".join(git(clone, "status", "--short", check=False).split()[:20])
            self.errors.append(f"{clone.name}: git status then: {state or 'clean'}")

    async def sync_loop(self, n: int, clone: Path) -> None:
        await anyio.sleep(self.args.sync_every * n / len(self.clones))  # staggered
        while self.agents_done < len(self.clones) or any(self.expected):
            await self.sync(clone)
            await anyio.sleep(self.args.sync_every)

    async def call(self, client: Client, tool: str, **arguments: Any) -> dict[str, Any] | None:
        for _ in range(50):
            result = await client.call_tool(tool, arguments)
            if not result.is_error:
                return result.structured_content
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
            if k % self.args.probe_every == 0:
                await self.probe(n, clients)
            await anyio.sleep(1 / self.args.rate)
        self.agents_done += 1

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
        for log in logs:
            log.close()
        self.server_warnings = sum(1 for clone in self.clones
                                   for line in (clone.parent / f"{clone.name}-server.log").read_text().splitlines()
                                   if " WARNING " in line or " ERROR " in line)


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
    args = parser.parse_args()
    if args.quick:
        args.memories, args.updates, args.shared, args.probe_every = 20, 5, 5, 5
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
    ok = identical and rounds > 0 and all(rebuilds) and not lost and not duplicated and not untagged
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
