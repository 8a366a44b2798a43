"""``agent-memory sync``: commit pending tool writes, pull (rebase; a merge when the
rebase conflicts), bring the index up to date with the files that changed, push.

Only where commits may go, never in a state git is in the middle of, and never pulling
or pushing this machine's ``.index/`` or ``.trash/``: docs/design/git.md.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import shlex
import tempfile
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any, Protocol

from ..disk.layout import INDEX_DIRNAME, TMP_SUFFIX, TRASH_DIRNAME, is_memory_path
from ..disk.locking import move_no_replace
from ..disk.durable import replace_file
from ..errors import GitError, SettingsError, SyncConflict
from ..models import SyncPreview, SyncResult
from ..note import parse
from .commits import (GitState, GitVault, blobs, changed_paths, commit_pending, credentials_in, identity_flags, ignored,
                      state_problem)
from .hand import HandChange, commit_hand_changes, hand_changes, held_back, private
from .stash import Stash, holds, put_back, put_back_beside, set_aside, unmerged
from .run import DRIVER, Repo, first_line

log = logging.getLogger("agent_memory.git")
NETWORK_TIMEOUT = 120.0
PUSH_TRIES = 3  # a push refused because another clone pushed first: pull again, push again
THIS_CLONE = "this clone's version"
FULL_RECONCILE_OVER = 2000  # changed files past which one reconcile is cheaper than per-file


class SyncTarget(GitVault, Protocol):
    """What ``sync`` needs of an open vault besides git's: its write lock."""

    def writing(self) -> AbstractContextManager[None]: ...


class GitSync:
    """``agent-memory sync`` for one open vault. ``reconcile`` and ``reconcile_path``
    bring the index up to date with the files a pull changed."""

    def __init__(self, vault: SyncTarget, state: GitState, *, reconcile: Callable[[], object],
                 reconcile_path: Callable[[str], str], dates: Callable[[], object] = lambda: None) -> None:
        self.vault = vault
        self.state = state
        self._reconcile = reconcile
        self._reconcile_path = reconcile_path
        self._dates = dates  # git's dates of notes without their own, brought up to the new HEAD

    def _repo(self) -> Repo:
        """The vault's repository, where sync may commit; refused with what to do."""
        repo = self.state.repository()
        if repo is None:
            raise GitError(f"The vault {self.vault.root} is not in a git repository, so there is nothing to sync. Put it "
                           "in one (git init, git remote add origin URL) first.")
        scope = repo.in_scope(self.vault.settings.git_subfolder)
        if scope:
            raise GitError(scope[0].upper() + scope[1:] + ".")
        return repo

    def _sharing(self, share_hand: bool) -> bool:
        """Whether hand changes are shared: ``sync --all``, or ``git.commit = "all"`` (approved)."""
        return share_hand or self.vault.settings.git_commit == "all"

    def sync_preview(self, share_hand: bool = False) -> SyncPreview:
        """What ``sync`` would commit now, changing nothing and reaching no remote."""
        repo = self._repo()
        problem = state_problem(repo)
        if problem is not None:
            raise GitError(f"Cannot sync: {problem[1]}.")
        entries, _taken = self.state.pending.read()
        pending = list(dict.fromkeys(p for e in entries for p in e["paths"]))
        tool = changed_paths(repo, pending)[0] if pending else []
        hand = hand_changes(repo, set(tool))
        share = self._sharing(share_hand)
        held = held_back(self.vault, [*hand, *(HandChange(p, "edited") for p in tool)])
        held.update(ignored(self.vault, repo, [p for p in pending if p not in tool]))
        return SyncPreview(dry_run=True, shares_hand_changes=share,
                           tool_writes=[p for p in tool if p not in held],
                           hand_changes=[c.shown for c in hand if c.path not in held],
                           withheld=[f"{rel}: {why}" for rel, why in held.items()])

    def sync(self, share_hand: bool = False) -> SyncResult:
        """Commit pending tool writes (and, when sharing, the hand changes), pull,
        reindex what changed, push (the steps: docs/design/git.md). Refused, with what to
        do, when the vault is not in git or not where commits may go, in a state git is
        in the middle of, or without an upstream branch; a conflict is left for a person
        (``SyncConflict``). Hand changes not shared are named in the result every time."""
        state = self.state
        repo = self._repo()
        share = self._sharing(share_hand)
        with state.lock.hold():
            result: SyncResult | None = None
            for _attempt in range(PUSH_TRIES):
                with self.vault.writing():  # tool writes wait; each round commits what they left first
                    branch, remote, merge_ref = _upstream(repo)
                    committed, withheld = _commit_for_sync(self.vault, state, repo)
                    shared, hand, held = self._hand(repo, share, withheld)
                    _fetch(repo, remote)
                    step = self._integrate(repo, branch, remote, merge_ref)
                step["committed"] = committed
                withheld = [*withheld, *held]
                if withheld:
                    step["withheld"] = withheld
                if shared:
                    step["hand_shared"] = shared
                if hand:
                    step["hand_not_shared"] = hand
                private = tracked_private(repo)
                if private:
                    step["tracked_private"] = private
                result = step if result is None else _added(result, step)
                refused, result["pushed"] = _push(repo, remote, merge_ref, self.vault.settings)
                if not refused:
                    self._settings_pulled(result)
                    self._dates()  # notes this sync committed by hand take their commit's date
                    return result
        raise GitError(f"The remote kept refusing the push (others pushed meanwhile, {PUSH_TRIES} tries); "
                       "run agent-memory sync again.")

    def _hand(self, repo: Repo, share: bool, withheld: list[str]) -> tuple[list[str], list[str], list[str]]:
        """Hand changes: (shared in one commit now, left unshared, held back and why)."""
        held_paths = {item.split(": ", 1)[0] for item in withheld}
        changes = hand_changes(repo, held_paths)
        if not share or not changes:
            return [], [c.shown for c in changes], []
        flags, env = identity_flags(repo, self.vault.settings.git_author)
        done = commit_hand_changes(self.vault, repo, changes, flags, env)
        return [c.shown for c in done.shared], [], done.withheld

    def _settings_pulled(self, result: SyncResult) -> None:
        """Read the settings again after a pull: a loosening value that came with it is
        named now (``settings`` warns), and a broken file is said, not raised: the sync
        itself went through."""
        try:
            self.vault.settings  # noqa: B018 - read for its warning
        except SettingsError as exc:
            result["note"] = f"{result.get('note', '')} {exc}".strip()

    def _integrate(self, repo: Repo, branch: str, remote: str, merge_ref: str) -> SyncResult:
        """Join the upstream branch into HEAD and update the index; under both locks."""
        tracking = f"refs/remotes/{remote}/{merge_ref.removeprefix('refs/heads/')}"
        old = _rev(repo, "HEAD")
        up = _rev(repo, tracking)
        result = SyncResult(repository=str(repo.top), branch=branch, upstream=f"{remote}/{merge_ref.removeprefix('refs/heads/')}",
                            committed=0, pulled=0, pushed=0, method="none", merged=[], conflicts=[], indexed=0)
        if up is None or old is None or up == old:
            return result
        base = repo.run("merge-base", old, up).stdout.decode().strip()
        if not base:
            raise GitError(f"{branch} and {result['upstream']} have no common history; join them by hand "
                           f"(git pull --allow-unrelated-histories) once, then sync.")
        if base == up:
            return result  # only local commits: nothing to pull
        result["pulled"] = int(repo.ok("rev-list", "--count", f"{base}..{up}").strip() or 0)
        _check_merge_attributes(repo, old, up)
        planted = _private_changes(repo, base, up)
        if planted:
            raise GitError(f"Cannot sync: the commits to pull add or change {_shown(planted)}, under the vault's "
                           f"{INDEX_DIRNAME}/ or {TRASH_DIRNAME}/: pulling them would overwrite this machine's index, "
                           "records or trash. Nothing was pulled or pushed. Whoever pushed them should take them out "
                           f"of git ({untrack_command(planted)}, commit, push); then sync again.")
        dirty = _dirty(repo)
        stash = set_aside(repo)  # a stash of our own, named: never lost from `git stash list`
        done = _pull(repo, result, base, old, up, tracking)
        in_vault, elsewhere = _unmerged(repo)
        split = _keep_both_added(repo, in_vault) if in_vault else {}
        if split:
            result["split"] = sorted(split.values())
            in_vault, elsewhere = _unmerged(repo)
            if not in_vault and not elsewhere:
                done = repo.run("commit", "--no-edit", optional_locks=True)  # the merge, concluded
                if done.returncode != 0:
                    raise GitError(f"sync kept both memories added at {', '.join(sorted(split))} but could not "
                                   f"commit the merge: {first_line(done)}. Commit it (git commit), then sync again.")
        conflicts = in_vault + elsewhere
        if done.returncode != 0 and not conflicts:
            if repo.busy_marker() == "a rebase":
                repo.run("rebase", "--abort", optional_locks=True)
            if stash is not None:
                put_back(repo, stash)  # on the tree it came from: it applies as it was
            raise GitError(f"git could not pull {result['upstream']} into {branch}: {first_line(done)}. "
                           "Nothing was changed; fix that, then sync again.")
        ours: set[str] = set()
        if base != old:  # a rebase rewrites the files of the commits it replays: their stat changes too
            ours = set(_names(repo, base, old))
            result["merged"] = sorted(p for p in _names(repo, base, up) if p in ours and p not in conflicts)
        new = _rev(repo, "HEAD") or old
        changed = set(_names(repo, old, new)) | ours | set(in_vault) | dirty | set(split) | set(split.values())
        result["conflicts"] = conflicts
        if conflicts:
            beside: tuple[list[str], list[str]] = ([], [])
            if stash is not None:
                beside = put_back_beside(repo, stash, unmerged(repo))
                changed |= {p.removeprefix(repo.prefix) for p in beside[0] if p.startswith(repo.prefix)}
            result["indexed"] = self._follow(sorted(changed))
            raise SyncConflict(_pull_conflict(repo, result, conflicts, stash, beside), dict(result))
        back = put_back(repo, stash) if stash is not None else []
        result["indexed"] = self._follow(sorted(changed | {p[len(repo.prefix):] for p in back
                                                            if p.startswith(repo.prefix)}))
        if back:
            assert stash is not None
            result["conflicts"] = [p.removeprefix(repo.prefix) for p in back]
            result["note"] = f"Your uncommitted edits conflicted with what was pulled; they are kept in {stash.where(repo)}."
            raise SyncConflict(_stash_conflict(repo, result, back, stash), dict(result))
        return result

    def _follow(self, paths: list[str]) -> int:
        """Fold the files that changed into the index: per file, or one reconcile for many."""
        paths = [p for p in paths if is_memory_path(p)]
        self._dates()
        if len(paths) > FULL_RECONCILE_OVER:
            self._reconcile()
        else:
            for rel in paths:
                self._reconcile_path(rel)
        return len(paths)


def _added(before: SyncResult, after: SyncResult) -> SyncResult:
    """Two rounds of one sync (the push was refused once) as one summary."""
    for key in ("committed", "pulled", "indexed"):
        after[key] += before[key]
    after["merged"] = sorted({*before["merged"], *after["merged"]})
    if "withheld" in before:
        after["withheld"] = sorted({*before["withheld"], *after.get("withheld", [])})
    if "hand_shared" in before:
        after["hand_shared"] = sorted({*before["hand_shared"], *after.get("hand_shared", [])})
    if after["method"] == "none":
        after["method"] = before["method"]
    return after


def _pull(repo: Repo, result: SyncResult, base: str, old: str, up: str, tracking: str) -> CompletedProcess[bytes]:
    """Join ``up`` into HEAD: a fast-forward, else a rebase, else (the rebase conflicted)
    one merge, which is easier to resolve than N replays. ``result["method"]`` says which."""
    if base == old:
        result["method"] = "fast-forward"
        return repo.run("merge", "--ff-only", up, optional_locks=True)
    result["method"] = "rebase"
    done = repo.run("rebase", up, optional_locks=True)
    if done.returncode != 0 and repo.busy_marker():
        repo.run("rebase", "--abort", optional_locks=True)
        result["method"] = "merge"
        named = tracking.removeprefix("refs/remotes/")  # "Merge remote-tracking branch 'origin/main'"
        done = repo.run("merge", "--no-edit", named, optional_locks=True)
    return done


def _each_holds(repo: Repo, paths: list[str], side: str) -> str:
    """``a.md holds both versions, between …; b.png holds this clone's version only …``
    for the first few of ``paths`` (repository-relative; shown vault-relative)."""
    said = [f"{p.removeprefix(repo.prefix)} holds {holds(repo, p, side)}" for p in paths[:5]]
    return "; ".join(said) + (f"; and {len(paths) - 5} more" if len(paths) > 5 else "")


def _pull_conflict(repo: Repo, result: SyncResult, conflicts: list[str], stash: Stash | None,
                   beside: tuple[list[str], list[str]]) -> str:
    """What a pull that conflicted left, file by file, and how to finish (and where the
    person's uncommitted changes are, when sync set them aside)."""
    n = len(conflicts)
    back, left = ([p.removeprefix(repo.prefix) for p in paths] for paths in beside)
    where = f" Your uncommitted edits to {_shown(back)} are back in place." if back else ""
    if stash is not None and left:
        where += (f" Your uncommitted edits to {_shown(left)} are set aside in {stash.where(repo)} (git stash list "
                  "shows it): once the merge is committed, put them back with git stash pop.")
    finish = ("git add them, git commit" if repo.busy_marker() == "a merge"
              else "git add them and finish what git is in the middle of (git status says what)")
    return (f"sync pulled {result['upstream']} but {n} file{'s' if n != 1 else ''} conflict: "
            f"{_each_holds(repo, unmerged(repo), THIS_CLONE)}. Resolve each (keep what is right, "
            f"remove any <<<<<<< ======= >>>>>>> lines), then {finish}, and run agent-memory sync again "
            f"(or git merge --abort to go back).{where}")


def _stash_conflict(repo: Repo, result: SyncResult, back: list[str], stash: Stash) -> str:
    """The pull went through but the person's uncommitted edits conflict with it."""
    shown = [p.removeprefix(repo.prefix) for p in back]
    return (f"sync pulled {result['upstream']}, but your uncommitted edits to {', '.join(shown[:5])} conflict with "
            f"it: {_each_holds(repo, back, 'the pulled version')}. Your edits are also kept in {stash.where(repo)}. "
            "Edit each file to keep what is right, then git restore --staged FILE (it stays your uncommitted edit) "
            "and git stash drop that stash; then sync again.")


def _commit_for_sync(vault: GitVault, state: GitState, repo: Repo) -> tuple[int, list[str]]:
    problem = state_problem(repo)
    if problem is not None:
        raise GitError(f"Cannot sync: {problem[1]}.")
    outcome = commit_pending(vault, state, repo)
    if outcome.status == "failed":
        raise GitError(f"Cannot sync: the pending tool writes could not be committed: {outcome.message}.")
    if outcome.status in ("busy", "refused"):
        raise GitError(f"Cannot sync: {outcome.message}.")
    return (outcome.writes if outcome.status == "committed" else 0), outcome.withheld


def _private_changes(repo: Repo, a: str | None, b: str) -> list[str]:
    """Files under the vault's ``.index/`` or ``.trash/`` (in any spelling) that commit
    ``b`` adds or changes since ``a`` (None: every such file ``b`` holds); deletions are
    fine: they take them out."""
    if a is None:
        out = repo.ok("ls-tree", "-r", "-z", "--name-only", b)
    else:
        out = repo.ok("diff", "--name-only", "-z", "--no-renames", "--diff-filter=AMTC", "--relative", a, b)
    return sorted(p for p in out.split("\0") if p and private(p))


def tracked_private(repo: Repo) -> list[str]:
    """Files under the vault's ``.index/`` or ``.trash/`` (in any spelling) that git tracks
    (force-added by someone): never read as records, never committed or pushed by the tool."""
    return sorted(p for p in repo.ok("ls-files", "-z").split("\0") if p and private(p))


def untrack_command(paths: list[str]) -> str:
    """The command that takes ``paths``' top folders (``.index``, ``.Trash``…) out of git."""
    return "git rm -r --cached " + " ".join(shlex.quote(f) for f in sorted({p.split("/", 1)[0] for p in paths}))


def _shown(paths: list[str]) -> str:
    return ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")


# How git may merge a memory file: its own text merge (unspecified, set, "text") or ours.
_MERGES_KEPT = {"unspecified", "set", "text", DRIVER}


def _check_merge_attributes(repo: Repo, old: str, up: str) -> None:
    """Refuse to pull when git would merge memory files some other way than by its text
    merge or ours — ``binary`` or ``-merge`` (one side silently kept), ``union``, another
    driver — as the attributes say now, or as a pulled ``.gitattributes`` would say: a
    teammate's line must not silently change how this clone merges memories. ``git
    setup`` pins ours in ``.git/info/attributes``, which no pull changes."""
    found = _merge_attributes(repo, repo.ok("ls-files", "-z").split("\0"))
    if any(name.rsplit("/", 1)[-1] == ".gitattributes" for name in _names(repo, old, up, whole=True)):
        with tempfile.TemporaryDirectory(prefix="agent-memory-attributes-") as folder:
            index = {"GIT_INDEX_FILE": str(Path(folder) / "index")}  # the pulled tree; the real index untouched
            repo.ok("read-tree", up, env=index)
            pulled = repo.ok("ls-tree", "-r", "-z", "--name-only", up).split("\0")
            found.update(_merge_attributes(repo, pulled, cached=True, env=index))
    if found:
        shown = ", ".join(f"{path} (merge={how})" for path, how in sorted(found.items())[:3])
        more = f" and {len(found) - 3} more" if len(found) > 3 else ""
        raise GitError(f"Cannot sync: git would merge memory files another way than line by line or with "
                       f"agent-memory's driver: {shown}{more}, set by a .gitattributes here or in what would be "
                       "pulled. Nothing was pulled or pushed. Run agent-memory git setup (it pins memory files to "
                       "agent-memory's merge in .git/info/attributes, which no pull changes), or remove that line, "
                       "then sync again.")


def _merge_attributes(repo: Repo, paths: list[str], *, cached: bool = False,
                      env: dict[str, str] | None = None) -> dict[str, str]:
    """Memory files among ``paths`` (vault-relative) whose merge attribute is not one we keep."""
    memory = [p for p in paths if p and is_memory_path(p)]
    if not memory:
        return {}
    done = repo.run("check-attr", *(["--cached"] if cached else []), "-z", "--stdin", "merge", env=env,
                    stdin=("\0".join(memory) + "\0").encode("utf-8", "surrogateescape"))
    if done.returncode != 0:
        raise GitError(f"git check-attr failed in {repo.top}: {first_line(done)}.")
    fields = done.stdout.decode("utf-8", "surrogateescape").split("\0")
    return {path: how for path, _attr, how in zip(fields[::3], fields[1::3], fields[2::3], strict=False)
            if how not in _MERGES_KEPT}


def _upstream(repo: Repo) -> tuple[str, str, str]:
    """The branch, its remote and the remote branch it follows; refused with what to do."""
    problem = state_problem(repo)
    if problem is not None:
        raise GitError(f"Cannot sync: {problem[1]}.")
    branch = repo.ok("symbolic-ref", "--short", "HEAD").strip()
    remote = repo.run("config", "--get", f"branch.{branch}.remote").stdout.decode().strip()
    merge_ref = repo.run("config", "--get", f"branch.{branch}.merge").stdout.decode().strip()
    if not remote or not merge_ref or remote == ".":
        remotes = repo.ok("remote").split()
        if not remotes:
            raise GitError(f"The repository {repo.top} has no remote, so there is nothing to sync with. Add one: "
                           f"git remote add origin URL, then git push -u origin {branch}.")
        raise GitError(f"The branch {branch} has no upstream branch to sync with. Set one once: "
                       f"git push -u {remotes[0]} {branch}.")
    return branch, remote, merge_ref


_URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_SCP_LIKE = re.compile(r"[^/\\:]{2,}:")  # user@host:path (one letter before ':' is a Windows drive)


def _local_pack_programs(repo: Repo, remote: str, option: str, program: str, *, push: bool = False) -> list[str]:
    """For a remote on this machine (a path, file://), ``--upload-pack``/``--receive-pack``
    naming git's own program: git runs it here, and the repository's config
    (``remote.<name>.uploadpack``, which a ``.git/`` synced from elsewhere can set, and
    which ``-c`` cannot override) must not choose it. Remotes elsewhere run theirs there.
    Every URL git would use for that direction counts: a push goes to each push URL (or
    each URL), which need not be the fetch URL."""
    urls = repo.run("remote", "get-url", "--all", *(("--push",) if push else ()), remote).stdout
    for url in urls.decode("utf-8", "surrogateescape").splitlines() or [""]:
        url = url.strip()
        scheme = _URL_SCHEME.match(url)
        if url.startswith("file://") if scheme else not _SCP_LIKE.match(url):
            return [f"{option}={_without_programs(program, repo.hooks)}"]
    return []


def _without_programs(program: str, hooks: bool) -> str:
    """The pack program to run here, in a remote that is a path: with none of the hooks
    or programs that repository names (a bare repository on a shared drive: whoever can
    push there can write its hooks/ and its config). git keeps our ``-c`` from crossing
    to it, so they are given on its own command line; ``git.hooks = true`` (approved)
    leaves its hooks on, as the vault's own."""
    if hooks:
        return program
    return (f"git -c core.hooksPath={shlex.quote(os.devnull)} -c core.alternateRefsCommand= "
            f"{program.removeprefix('git-')}")


def _fetch(repo: Repo, remote: str) -> None:
    done = repo.run("fetch", "--quiet", "--no-write-fetch-head",
                    *_local_pack_programs(repo, remote, "--upload-pack", "git-upload-pack"), remote,
                    timeout=NETWORK_TIMEOUT, optional_locks=True)
    if done.returncode != 0:
        url = repo.run("remote", "get-url", remote).stdout.decode("utf-8", "replace").strip()
        raise GitError(f"Cannot reach the remote {remote} ({url}): {first_line(done)}. Nothing was pulled or pushed; "
                       "the tool writes are committed locally. Run agent-memory sync again when it is reachable.")


def _push(repo: Repo, remote: str, merge_ref: str, settings: Any) -> tuple[bool, int]:
    """Push HEAD to the upstream branch: (refused because the remote moved on, commits sent).
    Refused when what it would send carries a credential (``_credentials_sent``)."""
    tracking = f"refs/remotes/{remote}/{merge_ref.removeprefix('refs/heads/')}"
    known = _rev(repo, tracking)
    ahead = int(repo.ok("rev-list", "--count", f"{tracking}..HEAD").strip() or 0) if known else 1
    if not ahead:
        return False, 0
    sent = _private_changes(repo, known, "HEAD")
    if sent:
        raise GitError(f"Cannot push: the commits to push add or change {_shown(sent)}, under the vault's "
                       f"{INDEX_DIRNAME}/ or {TRASH_DIRNAME}/, which hold this machine's index and trash and are never "
                       f"pushed by agent-memory. Take them out of git ({untrack_command(sent)}, then commit), then sync again; the "
                       "commits are kept locally.")
    carried = _credentials_sent(repo, remote, settings)
    if carried:
        named = "; ".join(f"{path}: {why}" for path, why in sorted(carried.items())[:3])
        undo = f"`git reset --soft {tracking}` there keeps your files as they are" if known else "`git rebase -i --root`"
        raise GitError(f"Cannot push: the commits to push carry a credential ({named}). Nothing was pushed. Take it "
                       f"out of those commits (in {repo.top}: {undo}), remove the credential from the file, then "
                       "sync again; or, if it is no secret, add its fingerprint to secrets.allow.")
    done = repo.run("push", "--porcelain", *_local_pack_programs(repo, remote, "--receive-pack", "git-receive-pack", push=True),
                    remote, f"HEAD:{merge_ref}", timeout=NETWORK_TIMEOUT, optional_locks=True)
    if done.returncode == 0:
        return False, ahead
    # Porcelain: "!<TAB>HEAD:refs/heads/main<TAB>[rejected] (fetch first)". Only "[rejected]"
    # means the remote moved on; "[remote rejected]" (a hook, a protected branch) says why.
    refused = [line.split("\t")[-1] for line in done.stdout.decode("utf-8", "replace").splitlines()
               if line.startswith("!")]
    if refused and all(reason.startswith("[rejected]") for reason in refused):
        return True, 0
    raise GitError(f"Cannot push to {remote}: {refused[0] if refused else first_line(done)}. The commits are kept "
                   "locally; run agent-memory sync again when that is fixed.")


def _credentials_sent(repo: Repo, remote: str, settings: Any) -> dict[str, str]:
    """Files a push would send that hold a credential not in ``secrets.allow``: every
    blob reachable from HEAD and from none of the remote's branches, by its path (what
    a person committed by hand with git, or a commit whose take-back git refused, is
    checked as the tool's own commits are): path -> what was found, never the value."""
    listed = repo.ok("rev-list", "--objects", "HEAD", "--not", f"--remotes={remote}")
    named: dict[str, str] = {}  # blob -> a path it has
    for line in listed.splitlines():
        sha, _, path = line.partition(" ")
        if path:
            named.setdefault(sha, path)
    carried: dict[str, str] = {}
    for (sha, path), data in zip(named.items(), blobs(repo, list(named))):
        why = credentials_in(path, data, settings) if data is not None else ""  # None: a tree
        if why:
            carried[path] = why
    return carried


def _rev(repo: Repo, name: str) -> str | None:
    done = repo.run("rev-parse", "-q", "--verify", f"{name}^{{commit}}")
    return done.stdout.decode().strip() or None if done.returncode == 0 else None


def _names(repo: Repo, a: str, b: str, *, whole: bool = False) -> list[str]:
    """Vault-relative files that differ between two commits (inside the vault only; with
    ``whole``, the whole repository's, repository-relative)."""
    out = repo.ok("diff", "--name-only", "-z", "--no-renames", *(() if whole else ("--relative",)), a, b)
    return [p for p in out.split("\0") if p]


def _unmerged(repo: Repo) -> tuple[list[str], list[str]]:
    """Files with conflicts anywhere in the repository (``git ls-files -u``: a file git
    could not merge line by line has no markers): those in the vault (vault-relative)
    and those outside it (repository-relative; only with ``git.subfolder``)."""
    out = unmerged(repo)
    inside = sorted({p[len(repo.prefix):] for p in out if p.startswith(repo.prefix)})
    return inside, sorted({p for p in out if not p.startswith(repo.prefix)})


def _keep_both_added(repo: Repo, conflicted: list[str]) -> dict[str, str]:
    """Two clones that each wrote a memory with the same title on the same day made the
    same path (an add/add conflict): when both sides are memories with different ids,
    ours stays at the path and theirs takes the next free ``-2``, ``-3``... name, both
    staged, so the merge can conclude and nothing is lost. Returns path -> the new name.
    Anything else (one memory edited two ways, a file that is not a memory) is left as
    a conflict for a person."""
    split: dict[str, str] = {}
    for rel in conflicted:
        if not is_memory_path(rel):
            continue
        stages = {}
        for line in repo.ok("ls-files", "-u", "-z", "--", rel).split("\0"):  # run in the vault: paths are its own
            if line:
                info, _, _path = line.partition("\t")
                _mode, sha, stage = info.split()
                stages[stage] = sha
        if set(stages) != {"2", "3"}:  # a base exists (an edit two ways), or a side deleted it
            continue
        ours, theirs = (repo.run("cat-file", "blob", stages[n]).stdout for n in ("2", "3"))
        a, b = parse.parse(ours, rel), parse.parse(theirs, rel)
        if a.unreadable or b.unreadable or not a.own_id or not b.own_id or a.id == b.id:
            continue
        place = repo.vault / rel
        stem, folder = place.name[:-3], place.parent
        parent = rel.rsplit("/", 1)[0] + "/" if "/" in rel else ""
        tracked = set(repo.ok("ls-files", "-z", "--", parent or ".").split("\0"))
        n = 2
        while (folder / f"{stem}-{n}.md").exists() or f"{parent}{stem}-{n}.md" in tracked:
            n += 1
        other = folder / f"{stem}-{n}.md"
        tmp = folder / f".{secrets.token_hex(6)}{TMP_SUFFIX}"  # unguessable, and made here: never a planted link
        try:
            with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644), "wb") as handle:
                handle.write(theirs)
            move_no_replace(tmp, other)
        finally:
            tmp.unlink(missing_ok=True)
        replace_file(place, ours)
        new_rel = other.relative_to(repo.vault).as_posix()
        repo.ok("add", "--", rel, new_rel)
        split[rel] = new_rel
        log.info("sync: two memories were added at %s; kept ours there and theirs as %s", rel, new_rel)
    return split


def _dirty(repo: Repo) -> set[str]:
    """Files in the vault with a person's uncommitted changes (sync sets them aside and puts them back)."""
    out = repo.ok("diff", "--name-only", "-z", "--relative", "HEAD")
    return {p for p in out.split("\0") if p}
