"""Attacks on the files the tool reads and writes in a vault, from a teammate sharing
the vault through git or a synced folder (which can sync the ``.git`` folder too):
planted symlinks, named pipes and hostile content where the tool keeps its records,
and in notes. The CLI runs as a subprocess where a hang is the defect, so a deadline
catches it."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import run_cli
from gitteam import Team, git, make_team, token
from test_nofollow import _without_waiting


@pytest.fixture
def team(tmp_path: Path, team_git: None) -> Team:
    return make_team(tmp_path)


@pytest.fixture
def pipe(tmp_path: Path) -> Path:
    """A named pipe outside the vault: what a planted link to ``/dev/zero`` does (read
    forever), without filling the machine's memory when the defect is there."""
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


PRIVATE = b'{"paths": ["diary.md"], "message": "x"}\nthe safe\'s code is 4711\nmy bank pin is 0000\n'


def test_a_commit_journal_swapped_for_a_link_before_its_lines_are_dropped_is_left_alone(tmp_path: Path) -> None:
    """The pending-commit journal is read, its writes committed, then its committed lines
    dropped: that second read followed a link a synced folder put there meanwhile, and
    wrote what it read (a person's private file, less its first lines) into the vault's
    ``.index/``, where the synced folder carries it to whoever planted the link."""
    from agent_memory.git.commits import PENDING_FILE, Pending

    private = tmp_path / "private.txt"
    private.write_bytes(PRIVATE)
    folder = tmp_path / "vault" / ".index"
    folder.mkdir(parents=True)
    pending = Pending(folder)
    pending.add({"paths": ["notes.md"], "message": "remember: notes"})
    _entries, taken = pending.read()
    journal = folder / PENDING_FILE
    journal.unlink()
    journal.symlink_to(private)  # the commit ran; the synced folder's change lands now
    pending.drop(taken)
    assert journal.is_symlink() and private.read_bytes() == PRIVATE
    assert not [p.name for p in folder.iterdir() if p.is_file() and not p.is_symlink() and b"4711" in p.read_bytes()]


def test_a_commit_journal_swapped_for_a_link_to_a_pipe_never_hangs_the_committer(tmp_path: Path, pipe: Path) -> None:
    from agent_memory.git.commits import PENDING_FILE, Pending

    folder = tmp_path / "vault" / ".index"
    folder.mkdir(parents=True)
    pending = Pending(folder)
    pending.add({"paths": ["notes.md"], "message": "remember: notes"})
    _entries, taken = pending.read()
    (folder / PENDING_FILE).unlink()
    (folder / PENDING_FILE).symlink_to(pipe)
    _without_waiting(lambda: pending.drop(taken), pipe)
    assert (folder / PENDING_FILE).is_symlink()


@pytest.mark.skipif(not hasattr(os, "mkfifo") or os.name != "posix", reason="a watcher vouches only on POSIX")
def test_a_watcher_health_file_a_pull_turns_into_a_link_never_hangs_a_command(team: Team, pipe: Path) -> None:
    """``.index/`` is ignored, and git overwrites an ignored file when a pull brings one: a
    teammate force-adds ``.index/watcher.json`` as a link to ``/dev/zero`` (a pipe here).
    While the victim's watcher runs, every command asked it to vouch and first read its
    health file through that link, forever."""
    from agent_memory.vault.vault import Vault
    from agent_memory.watch.vouch import HEALTH_NAME, Voucher

    with Vault(team.victim) as vault:
        voucher = Voucher(vault.store.control_dir, vault.root, vault.index.path)
    assert voucher.acquire()
    try:
        voucher.report(healthy=True)
        (team.mate / ".index").mkdir(exist_ok=True)
        (team.mate / ".index" / HEALTH_NAME).symlink_to(pipe)
        team.push("the watcher's health, shared", f".index/{HEALTH_NAME}")
        git(team.victim, "pull", "-q")  # by hand, as a person pulls
        assert (team.victim / ".index" / HEALTH_NAME).is_symlink()
        try:
            done = run_cli("list", vault=team.victim, spawn=True, timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("agent-memory list waited forever on the planted health file")
        assert done.returncode == 0, done.stderr
    finally:
        voucher.release()


def _git_vault(root: Path) -> str:
    """A vault in its own git repository, one memory committed; the memory's id."""
    from agent_memory.vault.vault import Vault

    git(root.parent, "init", "-q", "-b", "main", str(root))
    with Vault.init(root) as vault:
        memory_id = vault.remember("Deploys go out on Fridays.")["memory"]["id"]
    git(root, "add", "-A")
    git(root, "-c", "user.name=Ada", "-c", "user.email=ada@example.com", "commit", "-q", "-m", "a memory")
    return memory_id


def test_a_synced_git_folders_head_linked_to_a_pipe_never_hangs_a_command(tmp_path: Path, pipe: Path,
                                                                         team_git: None) -> None:
    """A ``.git/`` synced from elsewhere holds ``HEAD`` as a link to ``/dev/zero``: git
    declines it (a link outside ``refs/``: not a repository), but the tool's quick look
    at what HEAD is (so a start with nothing new runs no git) read through it, forever,
    before every command."""
    root = tmp_path / "vault"
    _git_vault(root)
    (root / ".git" / "HEAD").unlink()
    (root / ".git" / "HEAD").symlink_to(pipe)
    try:
        done = run_cli("list", vault=root, spawn=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("agent-memory list waited forever on .git/HEAD")
    assert "Deploys go out on Fridays." in done.stdout, done.stderr


def test_the_quick_look_at_head_reads_no_ref_through_a_link_or_a_pipe(tmp_path: Path, pipe: Path,
                                                                       team_git: None) -> None:
    """The branch's ref or ``packed-refs`` planted as a link: the quick look leaves them
    to git (``()``: ask git, which has its own deadline) rather than read through them."""
    from agent_memory.git.dates import head_from_files

    root = tmp_path / "vault"
    _git_vault(root)
    git(root, "pack-refs", "--all")  # the branch is in packed-refs now
    assert head_from_files(root) == (git(root, "rev-parse", "HEAD").strip(), False)
    (root / ".git" / "packed-refs").rename(root / ".git" / "packed-refs.real")
    (root / ".git" / "packed-refs").symlink_to(root / ".git" / "packed-refs.real")
    assert head_from_files(root) == ()
    (root / ".git" / "refs" / "heads" / "main").symlink_to(pipe)
    assert _without_waiting(lambda: head_from_files(root), pipe) == ()


def test_a_dot_git_a_synced_folder_links_to_a_pipe_never_hangs_restore(tmp_path: Path, pipe: Path) -> None:
    """A vault kept in a synced folder, in no repository: ``.git`` planted there as a link
    to ``/dev/zero`` (which git declines: not a repository) made every command that asks
    whether git tracks the trash ledger (``restore``, ``gc``, the trash listing) read
    through it as a ``gitdir:`` file, forever."""
    from agent_memory.vault.vault import Vault

    root = tmp_path / "vault"
    with Vault.init(root) as vault:
        memory_id = vault.remember("Deploys go out on Fridays.")["memory"]["id"]
        vault.forget(memory_id)
    (root / ".git").symlink_to(pipe)
    try:
        done = run_cli("restore", memory_id, vault=root, spawn=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("agent-memory restore waited forever on the planted .git")
    assert done.returncode == 0, done.stderr
    assert "Deploys go out on Fridays." in run_cli("list", vault=root).stdout


@pytest.mark.parametrize("name", ["writes.json", "git-pending.jsonl"])
def test_a_pipe_carried_into_the_index_folder_never_hangs_a_write(tmp_path: Path, team_git: None, name: str) -> None:
    """A vault copied with ``rsync -a`` or from a tarball carries named pipes as they are:
    one at ``.index/writes.json`` (each index's write count) or at the pending-commit
    journal was opened to write without ``O_NONBLOCK``, waiting for a reader forever
    under the vault's lock, so every write (and the reconcile before a read) hung."""
    from agent_memory.trust import approvals

    root = tmp_path / "vault"
    _git_vault(root)
    (root / ".agent-memory.toml").write_text("[git]\ncommit = true\n")  # the journal is written at each write
    approvals.approve(root)
    (root / ".index" / name).unlink(missing_ok=True)
    os.mkfifo(root / ".index" / name)
    try:
        done = run_cli("add", "Written beside a planted pipe.", vault=root, spawn=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"agent-memory add waited forever on .index/{name}")
    assert done.returncode == 0, done.stderr
    assert "Written beside a planted pipe." in run_cli("list", vault=root).stdout


def test_a_tag_edit_never_turns_a_tags_mapping_into_made_up_tags(tmp_path: Path) -> None:
    """A teammate's note writes ``tags`` as a mapping. It was read as the tags
    ``{'project':-'apollo'`` and ``'area':-'infra'}`` (its Python form, split on commas),
    and adding or removing a tag rewrote the mapping as those strings: what it held was
    gone from the file. Now it is no tag, doctor names it, and tag edits are refused."""
    from agent_memory.vault.vault import Vault

    root = tmp_path / "vault"
    Vault.init(root).close()
    text = b"---\ntags: {project: apollo, area: infra}\nowner: priya\n---\nThe apollo rollout plan.\n"
    (root / "plan.md").write_bytes(text)
    shown = run_cli("--json", "show", "plan.md", vault=root)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["tags"] == []
    for edit in (("--add-tag", "rollout"), ("--remove-tag", "'area':-'infra'}")):
        done = run_cli("edit", "plan.md", *edit, vault=root)
        assert done.returncode == 1 and "tags property of plan.md holds a mapping" in done.stderr
        assert (root / "plan.md").read_bytes() == text
    doctor = run_cli("doctor", vault=root)
    assert "plan.md: tags: holds a mapping" in doctor.stdout


@pytest.mark.skipif(os.name != "posix", reason="a watcher vouches only on POSIX")
def test_a_pulled_cookies_link_never_lets_the_watcher_delete_files_elsewhere(team: Team, tmp_path: Path,
                                                                              watch: Callable[..., Any]) -> None:
    """A teammate force-adds ``.index/cookies`` (where commands leave the watcher their
    cookies) as a link to ``../../papers``. The watcher's tidying, at every sweep, deleted
    every file older than a minute in the folder it found there: the victim's papers."""
    from agent_memory.vault.vault import Vault
    from agent_memory.watch.vouch import COOKIES_DIRNAME

    papers = tmp_path / "papers"
    papers.mkdir()
    thesis = papers / "thesis.md"
    thesis.write_text("Three years of work.\n")
    os.utime(thesis, (1_700_000_000, 1_700_000_000))
    (team.mate / ".index").mkdir(exist_ok=True)
    (team.mate / ".index" / COOKIES_DIRNAME).symlink_to(Path("..") / ".." / "papers")
    team.push("cookies, shared", f".index/{COOKIES_DIRNAME}")
    git(team.victim, "pull", "-q")
    assert (team.victim / ".index" / COOKIES_DIRNAME).resolve() == papers.resolve()
    with Vault(team.victim) as vault:
        watcher = watch(vault)
        watcher.stop()
    assert thesis.read_text() == "Three years of work.\n"
    assert (team.victim / ".index" / COOKIES_DIRNAME).is_symlink()


def test_a_pulled_parked_link_never_moves_a_persons_files_into_the_index(team: Team, tmp_path: Path) -> None:
    """A teammate force-adds ``.index/parked`` (where a write keeps what it displaced) as a
    link to ``../../settings``: every write looked through it for parked records, found
    the person's ``app.json`` there, and set it (and ``app.md`` beside it) aside into
    ``.index/set-aside/``, out of their folder, for a ``doctor --discard`` to delete."""
    settings = tmp_path / "settings"
    settings.mkdir()
    (settings / "app.json").write_text('{"theme": "dark"}\n')
    (settings / "app.md").write_text("Notes about the app.\n")
    for path in settings.iterdir():
        os.utime(path, (1_700_000_000, 1_700_000_000))
    (team.mate / ".index").mkdir(exist_ok=True)
    (team.mate / ".index" / "parked").symlink_to(Path("..") / ".." / "settings")
    team.push("parked, shared", ".index/parked")
    git(team.victim, "pull", "-q")
    done = run_cli("add", "Written after the pull.", vault=team.victim, spawn=True)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in settings.iterdir()) == ["app.json", "app.md"]
    assert "app.json" not in run_cli("doctor", vault=team.victim).stdout  # no record of the tool's either


DEEP = "[" * 100_000 + "]" * 100_000  # 200 KB: under every record's size limit


@pytest.mark.parametrize("record", [".index/move/manifest.json", ".index/import/manifest.json",
                                    ".index/parked/1700000000000000000-0123456789ab.json", ".trash/.agent-memory.jsonl"])
def test_a_record_nested_thousands_deep_never_stops_the_vault(tmp_path: Path, record: str) -> None:
    """A record a pull or a synced folder plants, holding JSON lists nested 100,000 deep:
    parsing it raised ``RecursionError``, which the checks for a damaged record did not
    catch, so every command (``list``, ``doctor`` too) died with a traceback until the
    person found the file. Such a record is one the tool never wrote: set aside, skipped."""
    from agent_memory.vault.vault import Vault

    root = tmp_path / "vault"
    with Vault.init(root) as vault:
        memory_id = vault.remember("Deploys go out on Fridays.")["memory"]["id"]
        vault.forget(memory_id)
    planted = root / record
    planted.parent.mkdir(parents=True, exist_ok=True)
    with planted.open("a") as handle:
        handle.write(DEEP + "\n")
    for command in (("list",), ("doctor",), ("gc",), ("restore", memory_id)):
        done = run_cli(*command, vault=root, spawn=True)
        assert "Traceback" not in done.stderr, f"agent-memory {' '.join(command)}: {done.stderr[-300:]}"
        assert done.returncode in (0, 1)  # doctor says 1: a record set aside waits for a decision
    assert "Deploys go out on Fridays." in run_cli("list", vault=root).stdout  # restored, the record aside


def test_a_token_saved_between_the_check_and_git_add_is_never_pushed(team: Team,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """``sync --all`` checked each hand-edited file for credentials, then let ``git add``
    read it again: a person's save landing in between (the editor's autosave) went out
    with its token. The bytes staged are checked too; the file stays as it is, unshared."""
    from agent_memory.git import hand
    from agent_memory.vault.vault import Vault

    secret = token(11)
    notes = team.victim / "notes.md"
    notes.write_text("Plain notes.\n")
    checked = hand.holding_credentials

    def then_saved(vault: Any, paths: list[str]) -> dict[str, str]:
        held = checked(vault, paths)
        notes.write_text(f"Plain notes. The token is {secret}\n")  # the person's save lands now
        return held

    monkeypatch.setattr(hand, "holding_credentials", then_saved)
    with Vault(team.victim) as vault:
        result = vault.sync(share_hand=True)
    assert [w.split(": ", 1)[0] for w in result.get("withheld", [])] == ["notes.md"]
    assert "GitHub token (line 1" in result["withheld"][0] and secret not in result["withheld"][0]
    assert "notes.md" not in team.remote_files()
    assert secret not in git(team.remote, "log", "--all", "-p")
    assert notes.read_text() == f"Plain notes. The token is {secret}\n"
    assert git(team.victim, "status", "--porcelain", "--", "notes.md") == "?? notes.md\n"


def test_a_token_saved_into_a_memory_while_its_write_is_committed_is_never_pushed(
        team: Team, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``git.commit`` on, a tool write is checked for credentials, then ``git commit
    --only`` reads the file again: a person's save into that memory landing in between
    was committed, and sync pushed its token. The commit is taken back and made without
    that file, which stays as the person saved it, named and pending."""
    from agent_memory.git import commits
    from agent_memory.vault.vault import Vault

    secret = token(12)
    with Vault(team.victim) as vault:
        path = vault.remember("Deploys go out on Fridays.")["memory"]["path"]
        other = vault.remember("Standups are at ten.")["memory"]["path"]
    checked = commits.holding_credentials

    def then_saved(vault: Any, paths: list[str]) -> dict[str, str]:
        held = checked(vault, paths)
        (team.victim / path).write_text(f"Deploys go out on Fridays. Token: {secret}\n")  # the person's save lands now
        return held

    monkeypatch.setattr(commits, "holding_credentials", then_saved)
    with Vault(team.victim) as vault:
        result = vault.sync()
    assert [w.split(": ", 1)[0] for w in result.get("withheld", [])] == [path]
    assert secret not in git(team.remote, "log", "--all", "-p")
    assert other in team.remote_files() and path not in team.remote_files()
    assert (team.victim / path).read_text() == f"Deploys go out on Fridays. Token: {secret}\n"
    assert path in git(team.victim, "status", "--porcelain")


def test_tokens_saved_into_three_memories_during_three_commits_leave_the_fourth_committed(
        team: Team, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each commit taken back for a save landing while git read the files is made again
    without that file: after three such saves the commit was given up, yet reported made,
    and the fourth memory's pending entry was dropped, so it was never pushed."""
    from agent_memory.git.run import Repo
    from agent_memory.vault.vault import Vault

    secret = token(13)
    with Vault(team.victim) as vault:
        paths = [vault.remember(f"Fact number {n} about the release.")["memory"]["path"] for n in range(4)]
    saves = list(paths[:3])  # one person's save lands during each of three commits
    run = Repo.run

    def saving(repo: Repo, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        if args[:2] == ("commit", "--only") and saves:
            (team.victim / saves.pop(0)).write_text(f"A fact. Token: {secret}\n")
        return run(repo, *args, **kwargs)

    monkeypatch.setattr(Repo, "run", saving)
    with Vault(team.victim) as vault:
        result = vault.sync()
    assert sorted(w.split(": ", 1)[0] for w in result.get("withheld", [])) == sorted(paths[:3])
    assert secret not in git(team.remote, "log", "--all", "-p")
    assert paths[3] in team.remote_files()
    assert not any(p in team.remote_files() for p in paths[:3])


def _take_back_refused(team: Team, lock: Path) -> pytest.ExceptionInfo[Exception]:
    """A sync whose take-back of a commit fails (another git program holds ``lock``,
    taken by the test's wrapper of ``Repo.run``); the lock is let go after."""
    from agent_memory.errors import GitError
    from agent_memory.vault.vault import Vault

    try:
        with Vault(team.victim) as vault, pytest.raises(GitError, match="could not be taken back") as raised:
            vault.sync()
    finally:
        lock.unlink(missing_ok=True)
    return raised


def test_a_commit_holding_a_token_that_cannot_be_taken_back_stops_the_sync_before_the_push(
        team: Team, monkeypatch: pytest.MonkeyPatch) -> None:
    """A commit that took a person's save with a token is taken back with ``git reset``;
    when that fails (another git program holds the branch's lock at that moment) the
    failure went unheard and the sync pushed the commit with the token. The sync stops
    before pushing and says what to undo."""
    from agent_memory.errors import GitError
    from agent_memory.git.run import Repo
    from agent_memory.vault.vault import Vault

    secret = token(14)
    with Vault(team.victim) as vault:
        path = vault.remember("Deploys go out on Fridays.")["memory"]["path"]
    branch_lock = team.victim / ".git" / "refs" / "heads" / "main.lock"
    run = Repo.run

    def saving(repo: Repo, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        if args[:2] != ("commit", "--only"):
            return run(repo, *args, **kwargs)
        (team.victim / path).write_text(f"Deploys go out on Fridays. Token: {secret}\n")  # the person's save
        done = run(repo, *args, **kwargs)
        branch_lock.write_text("")  # another git program takes the branch's lock right after the commit
        return done

    monkeypatch.setattr(Repo, "run", saving)
    raised = _take_back_refused(team, branch_lock)
    assert "git reset --soft" in str(raised.value) and secret not in str(raised.value)
    assert secret not in git(team.remote, "log", "--all", "-p")
    monkeypatch.setattr(Repo, "run", run)  # the lock gone, nobody undid the commit: the next sync checks what it sends
    with Vault(team.victim) as vault, pytest.raises(GitError, match="carry a credential") as again:
        vault.sync()
    assert path in str(again.value) and secret not in str(again.value) and "git reset --soft" in str(again.value)
    assert secret not in git(team.remote, "log", "--all", "-p")


def test_a_commit_a_person_makes_just_before_a_taken_back_one_stays(
        team: Team, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tool took a commit back to the branch as it was before its commit began: a
    commit a person made with git in that instant (between the tool reading the branch
    and committing) was taken back with it. Only the tool's own commit goes now."""
    from agent_memory.git.run import Repo
    from agent_memory.vault.vault import Vault

    secret = token(15)
    with Vault(team.victim) as vault:
        path = vault.remember("Deploys go out on Fridays.")["memory"]["path"]
    run, person_committed = Repo.run, []

    def saving(repo: Repo, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        if args[:2] == ("commit", "--only") and not person_committed:
            (team.victim / "journal.md").write_text("What I did today.\n")
            git(team.victim, "add", "journal.md")
            git(team.victim, "commit", "-q", "-m", "my journal")  # the person's own commit, just now
            person_committed.append(True)
            (team.victim / path).write_text(f"Deploys go out on Fridays. Token: {secret}\n")  # and a save
        return run(repo, *args, **kwargs)

    monkeypatch.setattr(Repo, "run", saving)
    with Vault(team.victim) as vault:
        result = vault.sync()
    assert [w.split(": ", 1)[0] for w in result.get("withheld", [])] == [path]
    assert "my journal" in git(team.victim, "log", "--format=%s")
    assert "journal.md" in team.remote_files()
    assert secret not in git(team.remote, "log", "--all", "-p")


@pytest.mark.parametrize("moment", ["commit", "update-ref"])
def test_a_commit_a_person_makes_just_after_a_commit_holding_a_token_is_never_taken_back(
        team: Team, monkeypatch: pytest.MonkeyPatch, moment: str) -> None:
    """A commit a person makes on top of the tool's, before the tool takes its own back,
    was reset away with it. Now the branch is moved back only while it still ends at the
    tool's commit: the sync stops before pushing, the person's commit stays, and the
    error says how to drop only the tool's commit."""
    from agent_memory.errors import GitError
    from agent_memory.git.run import Repo
    from agent_memory.vault.vault import Vault

    secret = token(16)
    with Vault(team.victim) as vault:
        path = vault.remember("Deploys go out on Fridays.")["memory"]["path"]
    run = Repo.run

    def saving(repo: Repo, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        if args[:2] == ("commit", "--only"):
            (team.victim / path).write_text(f"Deploys go out on Fridays. Token: {secret}\n")  # the person's save
        if args[0] == moment == "update-ref":  # the person commits as the tool is about to take its commit back
            person_commits()
        done = run(repo, *args, **kwargs)
        if args[:2] == ("commit", "--only") and moment == "commit":  # or right after the tool's commit
            person_commits()
        return done

    def person_commits() -> None:
        (team.victim / "journal.md").write_text("What I did today.\n")
        git(team.victim, "add", "journal.md")
        git(team.victim, "commit", "-q", "-m", "my journal")

    monkeypatch.setattr(Repo, "run", saving)
    with Vault(team.victim) as vault, pytest.raises(GitError, match="could not be taken back") as raised:
        vault.sync()
    assert "rebase -i" in str(raised.value) and secret not in str(raised.value)
    assert git(team.victim, "log", "-1", "--format=%s") == "my journal\n"
    assert secret not in git(team.remote, "log", "--all", "-p")


def test_a_commit_holding_a_token_is_taken_back_whatever_encoding_git_shows_messages_in(
        team: Team, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tool recognises its own commit by the message it holds before taking it
    back. A person whose git shows messages in Latin-1 (``i18n.logOutputEncoding``) got
    "a commit was made on top of it meanwhile" for a memory titled "Café": the message
    read back differed from the one written, and the sync stopped. The bytes the commit
    holds are compared now, so the commit is taken back and the sync goes on."""
    from agent_memory.git.run import Repo
    from agent_memory.vault.vault import Vault

    secret = token(17)
    git(team.victim, "config", "i18n.logOutputEncoding", "ISO-8859-1")
    with Vault(team.victim) as vault:
        path = vault.remember("Café deploys go out on Fridays.", title="Café deploys")["memory"]["path"]
    run = Repo.run

    def saving(repo: Repo, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        if args[:2] == ("commit", "--only"):
            (team.victim / path).write_text(f"Café deploys go out on Fridays. Token: {secret}\n")  # the person's save
        return run(repo, *args, **kwargs)

    monkeypatch.setattr(Repo, "run", saving)
    with Vault(team.victim) as vault:
        result = vault.sync()
    assert [w.split(": ", 1)[0] for w in result.get("withheld", [])] == [path]
    assert secret not in git(team.remote, "log", "--all", "-p")


def test_a_taken_back_commit_whose_staging_cannot_be_restored_says_what_is_left(
        team: Team, monkeypatch: pytest.MonkeyPatch) -> None:
    """The branch was moved back off the tool's commit, then git could not give the
    staging area back (another git program held its lock): the error said a commit
    was made on top and to drop the tool's commit with a rebase, which was already off
    the branch. It says what is left: the file's staged copy, and how to unstage it."""
    from agent_memory.git.run import Repo
    from agent_memory.vault.vault import Vault

    secret = token(18)
    with Vault(team.victim) as vault:
        path = vault.remember("Deploys go out on Fridays.")["memory"]["path"]
    index_lock = team.victim / ".git" / "index.lock"
    run = Repo.run

    def saving(repo: Repo, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        if args[:2] == ("commit", "--only"):
            (team.victim / path).write_text(f"Deploys go out on Fridays. Token: {secret}\n")  # the person's save
        done = run(repo, *args, **kwargs)
        if args[0] == "update-ref":
            index_lock.write_text("")  # another git program takes the staging area's lock just then
        return done

    monkeypatch.setattr(Repo, "run", saving)
    raised = _take_back_refused(team, index_lock)
    assert "made on top" not in str(raised.value) and "rebase" not in str(raised.value)
    assert f"git reset -q -- {path}" in str(raised.value) and secret not in str(raised.value)
    assert secret not in git(team.remote, "log", "--all", "-p")


def test_sync_never_pushes_a_token_a_person_committed_with_git(team: Team) -> None:
    """A person commits a note holding a token with git itself, then runs sync: the tool's
    own commits are checked for credentials, and so is everything the push would send."""
    from agent_memory.errors import GitError
    from agent_memory.vault.vault import Vault

    secret = token(14)
    (team.victim / "deploy.md").write_text(f"# Deploy\n\nThe deploy key is {secret}\n")
    git(team.victim, "add", "deploy.md")
    git(team.victim, "commit", "-q", "-m", "deploy notes")
    (team.victim / "deploy.md").write_text("# Deploy\n\nThe deploy key is in the vault of passwords.\n")
    git(team.victim, "commit", "-q", "-am", "key taken out")  # still in the commit before: a push sends both
    with Vault(team.victim) as vault, pytest.raises(GitError, match="carry a credential") as raised:
        vault.sync()
    assert "deploy.md" in str(raised.value) and secret not in str(raised.value)
    assert secret not in git(team.remote, "log", "--all", "-p")


def test_the_bytes_checked_for_credentials_are_each_files_own_in_one_git_process(tmp_path: Path,
                                                                                 team_git: None) -> None:
    """The committed (or staged) bytes a commit carries are read back to be checked, for
    thousands of files at once after an import: each name gets its own file's bytes (a
    space, a line break in its name, a vault in a folder of the repository), and a name
    not in the commit gets none, so a deleted file is not taken for a clean one."""
    from agent_memory.git.commits import blobs
    from agent_memory.git.run import find_repo

    top = tmp_path / "repo"
    vault = top / "notes"
    vault.mkdir(parents=True)
    git(top, "init", "-q", "-b", "main")
    files = {"a.md": b"first\n", "with space.md": b"second\n", "line\nbreak.md": b"third\n", "empty.md": b""}
    for name, data in files.items():
        (vault / name).write_bytes(data)
    git(top, "add", "-A")
    git(top, "commit", "-q", "-m", "notes")
    repo = find_repo(vault)
    assert repo is not None
    names = [*files, "missing.md", "a.md"]
    assert blobs(repo, [f"HEAD:./{n}" for n in names]) == [*files.values(), None, b"first\n"]
    (vault / "a.md").write_bytes(b"staged\n")
    git(vault, "add", "a.md")
    assert blobs(repo, [":./a.md", ":./with space.md", ":./missing.md"]) == [b"staged\n", b"second\n", None]
