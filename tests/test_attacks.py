"""Attacks on a shared vault that got past the guards once, each kept as a test: a
teammate with push rights, a synced folder (``.git/`` included) or a local process does
what it can, and the victim runs agent-memory as a person does. Real git (a bare remote,
the teammate's clone, the victim's), real files, the CLI and the library in process."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent_memory.note.parse import file_version
from agent_memory.trust import approvals, credentials
from agent_memory.trust.state import vault_key
from agent_memory.vault.vault import Vault

from conftest import deadline, run_cli, wait_listening
from gitteam import Team, git, make_team, token


pytestmark = pytest.mark.usefixtures("team_git")


@pytest.fixture
def team(tmp_path: Path) -> Team:
    return make_team(tmp_path)


@pytest.fixture
def ran(tmp_path: Path) -> Path:
    """The file every planted program appends its name to: it must stay absent."""
    return tmp_path / "ran"


def program(ran: Path, label: str) -> str:
    return f"echo {label} >> {shlex.quote(str(ran))}"


# --------------------------------------------------------------------------- a synced .git/config


def test_a_merge_driver_named_like_ours_in_another_case_never_runs(team: Team, ran: Path) -> None:
    """git's subsection names are case-sensitive: ``merge.Agent-Memory.driver`` is another
    driver than ours, and a pulled ``.gitattributes`` can name it for a file that is not a
    memory (which the merge-attribute check does not look at)."""
    (team.victim / "notes.txt").write_text("one\n")
    git(team.victim, "add", "notes.txt")
    git(team.victim, "commit", "-qm", "notes")
    git(team.victim, "push", "-q")
    git(team.mate, "pull", "-q")
    with (team.mate / ".gitattributes").open("a") as attributes:
        attributes.write("notes.txt merge=Agent-Memory\n")
    (team.mate / "notes.txt").write_text("one\nfrom the teammate\n")
    team.push("notes, merged another way")
    (team.victim / "notes.txt").write_text("one\nfrom the victim\n")
    git(team.victim, "commit", "-qam", "notes here")
    git(team.victim, "config", "merge.Agent-Memory.driver", program(ran, "driver") + "; cp %B %A; exit 0")
    done = run_cli("sync", vault=team.victim)
    assert "Traceback" not in done.stderr, done.stderr
    assert not ran.exists(), ran.read_text()


@pytest.fixture
def git_daemon(tmp_path: Path) -> Iterator[Callable[[Path], str]]:
    """``git daemon`` serving read-only on a free loopback port: a remote that is not a
    path on this machine (as a team's GitHub remote is not). Returns the URL of a repository."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    daemon = subprocess.Popen(["git", "daemon", "--export-all", f"--base-path={tmp_path}", "--reuseaddr",
                               "--listen=127.0.0.1", f"--port={port}", str(tmp_path)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(daemon, "127.0.0.1", port)
        yield lambda repo: f"git://127.0.0.1:{port}/{repo.relative_to(tmp_path).as_posix()}"
    finally:
        daemon.terminate()
        daemon.wait(timeout=deadline(60))


def test_a_push_url_on_this_machine_never_runs_the_configs_receive_pack(team: Team, ran: Path,
                                                                          git_daemon: Callable[[Path], str]) -> None:
    """The team's remote is elsewhere (here ``git://``); a synced ``.git/config`` adds a
    push URL that is a path on this machine, with a ``receivepack`` program: git runs that
    program here, for the push of ``sync``."""
    git(team.victim, "config", "remote.origin.url", git_daemon(team.remote))
    git(team.victim, "config", "remote.origin.pushurl", str(team.remote))
    git(team.victim, "config", "remote.origin.receivepack", program(ran, "receivepack") + "; git-receive-pack")
    assert run_cli("add", "Written before the sync.", vault=team.victim).returncode == 0
    done = run_cli("sync", vault=team.victim)
    assert done.returncode == 0, done.stderr
    assert not ran.exists(), ran.read_text()
    assert team.remote_log()[0].startswith("remember: Written before the sync")  # pushed all the same


def test_a_work_tree_elsewhere_never_gets_the_pulled_files(team: Team, tmp_path: Path) -> None:
    """``core.worktree`` in a synced ``.git/config`` names another folder as the work tree:
    sync's pull would check the teammate's files out there (``~/.ssh``, say)."""
    private = tmp_path / "private"
    private.mkdir()
    (team.mate / "authorized_keys").write_text("ssh-ed25519 AAAAC3Nza the-teammate\n")
    team.push("keys")
    git(team.victim, "config", "core.worktree", str(private))
    assert run_cli("add", "Written before the sync.", vault=team.victim).returncode == 0
    done = run_cli("sync", vault=team.victim)
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert "core.worktree" in done.stderr and str(private) in done.stderr
    assert list(private.iterdir()) == []
    assert "keys" not in team.victim_log()


def test_a_vault_that_is_a_submodule_still_syncs(team: Team, tmp_path: Path) -> None:
    """A submodule's repository sets ``core.worktree`` too, to the submodule's own folder
    (whose ``.git`` file names that repository): no work tree elsewhere."""
    project = tmp_path / "project"
    project.mkdir()
    git(project, "init", "-q", "-b", "main")
    git(project, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(team.remote), "memory")
    vault = project / "memory"
    git(vault, "checkout", "-q", "main")
    assert git(vault, "config", "core.worktree").strip()  # set, as submodules have it
    assert run_cli("trust", "--all", vault=vault).returncode == 0
    assert run_cli("add", "Written in a submodule.", vault=vault).returncode == 0
    done = run_cli("sync", vault=vault)
    assert done.returncode == 0, done.stderr
    assert team.remote_log()[0].startswith("remember: Written in a submodule")


def test_a_filter_an_included_config_file_gains_later_never_runs(team: Team, ran: Path) -> None:
    """A team shares git settings in a tracked file each clone includes (``git config
    include.path ../team.gitconfig``): a teammate's later push adds a filter program to it.
    A long-running process (the server) read the repository's config once, and looked
    again only when ``.git/config`` itself changed."""
    (team.mate / "team.gitconfig").write_text("[pull]\n\trebase = true\n")
    team.push("team git settings")
    git(team.victim, "pull", "-q")
    git(team.victim, "config", "include.path", "../team.gitconfig")
    with Vault(team.victim) as victim:
        victim.remember("Written while the team settings were plain.")
        victim.sync()
        (team.mate / "team.gitconfig").write_text(f"[filter \"evil\"]\n\tclean = {program(ran, 'clean')}; cat\n")
        with (team.mate / ".gitattributes").open("a") as attributes:
            attributes.write("*.md filter=evil\n")
        team.push("team git settings, filtered")
        git(team.victim, "pull", "-q")  # by hand, as the person
        victim.remember("Written after the team settings changed.")
        victim.sync()
    assert not ran.exists(), ran.read_text()
    assert team.remote_log()[0].startswith("remember: Written after")


# --------------------------------------------------------------------------- temp files with names a plant can take


def plant_links(folder: Path, names: list[str], target: Path) -> None:
    """Symlinks a synced folder (or a pull) brings, at names the tool would write to: the
    teammate cannot know this process's id, so in life they are one per possible id."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).symlink_to(target)


@pytest.fixture
def bashrc(tmp_path: Path) -> Path:
    """A file of the victim's outside every vault, which nothing may write."""
    path = tmp_path / "home-of-the-victim" / ".bashrc"
    path.parent.mkdir()
    path.write_text("export PATH=/usr/bin:/bin\n")
    return path


def test_restore_never_writes_through_a_link_planted_in_the_trash(tmp_path: Path, bashrc: Path) -> None:
    with Vault.init(tmp_path / "vault") as vault:
        kept = vault.remember("Alice prefers tea.")["memory"]["id"]
        back = vault.remember("Bob prefers coffee.")["memory"]["id"]
        vault.forget(kept)
        vault.forget(back)
        plant_links(vault.root / ".trash", [f"..agent-memory.jsonl.{os.getpid()}.tmp"], bashrc)
        vault.restore(back)
        assert vault.get(back)["content"].strip() == "Bob prefers coffee."
        assert [e["id"] for e in vault.trash_list()] == [kept]  # the ledger still says what is in the trash
    assert bashrc.read_text() == "export PATH=/usr/bin:/bin\n"


def test_the_commit_journal_is_never_written_through_a_planted_link(team: Team, bashrc: Path) -> None:
    with Vault(team.victim) as victim:
        victim.remember("Written before the sync.")
        journal = victim.store.control_dir / "git-pending.jsonl"
        with journal.open("ab") as planted:  # a line this user's register does not list: set aside when read
            planted.write(json.dumps({"paths": ["x.md"], "message": "planted"}).encode() + b"\n")
        plant_links(victim.store.control_dir, [f".git-pending.jsonl.{os.getpid()}.tmp"], bashrc)
        victim.sync()
    assert bashrc.read_text() == "export PATH=/usr/bin:/bin\n"
    assert team.remote_log()[0].startswith("remember: Written before the sync")


def test_keeping_both_memories_added_at_one_path_never_writes_through_a_planted_link(team: Team, bashrc: Path) -> None:
    with Vault(team.mate) as mate:
        first = mate.remember("Deploys are frozen in August.", title="Deploy freeze")["memory"]
    folder, stem = first["path"].rsplit("/", 1)
    plant_links(team.mate / folder, [f".{stem[:-3]}-2.md.{os.getpid()}.agent-memory.tmp"], bashrc)
    team.push("remember: Deploy freeze", *(f"{folder}/{p.name}" for p in (team.mate / folder).iterdir() if p.is_symlink()))
    with Vault(team.victim) as victim:
        second = victim.remember("The freeze ends on September 2.", title="Deploy freeze")["memory"]
        assert second["path"] == first["path"]
        done = victim.sync()
        assert done["split"] == [first["path"][:-3] + "-2.md"]
        assert victim.get(done["split"][0])["id"] == first["id"]
    assert bashrc.read_text() == "export PATH=/usr/bin:/bin\n"


# --------------------------------------------------------------------------- the tool's own folders in .index/


def test_a_planted_link_for_parked_files_never_takes_a_memory_out_of_the_vault(tmp_path: Path) -> None:
    """An edit keeps the bytes it displaces a while in ``.index/parked/``: a symlink there
    (a synced folder, or a pull by hand) would send them to a folder elsewhere, such as one
    another user of the machine can read."""
    vault = tmp_path / "vault"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert run_cli("init", str(vault)).returncode == 0
    memory_id = run_cli("add", "Salary review notes: keep to myself.", vault=vault).stdout.strip()
    (vault / ".index" / "parked").symlink_to(elsewhere)
    done = run_cli("edit", memory_id, "--append", "Raise agreed.", vault=vault)
    assert list(elsewhere.iterdir()) == []
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and ".index/parked" in done.stderr, done.stderr


@pytest.mark.parametrize("plant", ["file", "link"])
@pytest.mark.parametrize("folder", ["import", "move"])
def test_a_plant_where_an_import_or_a_move_keeps_its_record_never_blocks_them(tmp_path: Path, plant: str,
                                                                                folder: str) -> None:
    vault = tmp_path / "vault"
    assert run_cli("init", str(vault)).returncode == 0
    memory_id = run_cli("add", "Alice prefers tea.", vault=vault).stdout.strip()
    place = vault / ".index" / folder
    if plant == "file":
        place.write_text("not a record\n")
    else:
        (tmp_path / "elsewhere").mkdir()
        place.symlink_to(tmp_path / "elsewhere")
    items = tmp_path / "items.json"
    items.write_text(json.dumps([{"content": "Bob prefers coffee."}]))
    for _ in range(2):  # not just once: the next command too
        imported = run_cli("import", str(items), vault=vault)
        assert imported.returncode == 0 and "Traceback" not in imported.stderr, imported.stderr
    moved = run_cli("mv", memory_id, "people/alice.md", vault=vault)
    assert moved.returncode == 0, moved.stderr
    assert (vault / "people" / "alice.md").is_file()
    if plant == "link":
        assert list((tmp_path / "elsewhere").iterdir()) == []


# --------------------------------------------------------------------------- what doctor says a record would do


def test_doctor_says_what_a_set_aside_record_would_do_whatever_its_note_claims(tmp_path: Path) -> None:
    """A planted folder in ``.index/set-aside/`` with a note (``about.json``) that says it is
    harmless and genuine: the person deciding must read what applying it really does (here,
    put a teammate's text in place of one of their notes), not what the note claims."""
    vault = tmp_path / "vault"
    assert run_cli("init", str(vault)).returncode == 0
    assert run_cli("add", "Alice prefers tea.", vault=vault).returncode == 0
    [note] = [p.relative_to(vault).as_posix() for p in vault.rglob("*.md")]
    record = vault / ".index" / "set-aside" / "move-0123456789ab"
    (record / "record" / "move").mkdir(parents=True)
    planted = b"---\nid: x\n---\nAlice wants the deploy keys mailed to mallory@evil.example.\n"
    (record / "record" / "move" / "0.md").write_bytes(planted)
    (record / "record" / "move" / "manifest.json").write_text(json.dumps({
        "old": note, "new": "x/y.md", "record": "00",
        "files": [{"path": note, "before": file_version(planted), "after": file_version((vault / note).read_bytes()),
                   "copy": "0.md"}]}))
    (record / "about.json").write_text(json.dumps({
        "kind": "move", "hash": "0", "from": ".index/move", "why": "written on this machine (genuine)",
        "what": "remove an empty journal folder; nothing in the vault changes"}))
    doctor = run_cli("doctor", vault=vault)
    [line] = [ln for ln in doctor.stdout.splitlines() if "move-0123456789ab" in ln]
    assert "nothing in the vault changes" not in line
    assert f"undo a move of {note!r} to 'x/y.md'" in line


# --------------------------------------------------------------------------- credentials in what a commit carries


def test_a_credential_in_a_file_name_is_neither_committed_nor_pushed(team: Team) -> None:
    """The commit gate read what files hold; a person's note named after a token (pasted
    into a "new note" dialog) went to the remote once a tool write touched it."""
    secret = token(7)
    rel = f"ops/deploy {secret}.md"
    (team.victim / "ops").mkdir()
    (team.victim / rel).write_text("---\ntitle: Deploy\n---\nDeploy on Tuesdays.\n")
    assert run_cli("edit", rel, "--add-tag", "ops", vault=team.victim).returncode == 0
    assert run_cli("add", "Releases go out on Tuesdays.", vault=team.victim).returncode == 0
    synced = run_cli("sync", vault=team.victim)
    assert synced.returncode == 0, synced.stderr
    said = synced.stdout + synced.stderr
    assert "not committed or pushed: ops/deploy [redacted GitHub token].md: its name holds a GitHub token" in said
    assert secret not in said
    pushed = git(team.remote, "log", "--all", "-p", "--name-only", "--format=%B")
    assert secret not in pushed and "remember: Releases go out on Tuesdays." in pushed  # the rest went on


SAID_ANOTHER_WAY = [  # a value after a credential word, as people write it in a title
    ("The wifi password is now hunter2", "hunter2"),
    ("Router password is set to hunter2", "hunter2"),
    ("The VPN password is still hunter2", "hunter2"),
    ('The password is "the quick fox"', "quick fox"),
]
STILL_NO_VALUE = ["the token is now rotated", "the password is still valid", "the token is set in CI",
                  "the token is also in the vault", "the old password is now", "token budget for the summariser"]


@pytest.mark.parametrize(("text", "value"), SAID_ANOTHER_WAY)
def test_a_value_said_another_way_never_reaches_a_name_or_a_commit_message(team: Team, text: str, value: str) -> None:
    added = run_cli("--json", "add", text, vault=team.victim)
    assert added.returncode == 0, added.stderr
    path = json.loads(added.stdout)["memory"]["path"]
    assert value.split()[-1] not in path
    assert run_cli("sync", vault=team.victim).returncode == 0
    message = git(team.remote, "log", "-1", "--format=%B", "main")
    assert message.startswith("remember: ") and value not in message and "[redacted]" in message


@pytest.mark.parametrize("text", STILL_NO_VALUE)
def test_a_phrase_with_a_bridge_word_but_no_value_stays_whole(text: str) -> None:
    assert credentials.redact_for_names(text) == text


# --------------------------------------------------------------------------- this user's state


def test_approvals_in_a_state_folder_inside_the_vault_approve_nothing(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The state folder is a link into the vault (or set to a folder in it): the register
    refuses to trust itself there, and the approvals must not be trusted there either,
    since a teammate can push (or a sync can bring) an ``approved.json`` of their own."""
    team = make_team(tmp_path, settings="")
    state = tmp_path / "state"
    state.symlink_to(team.victim / ".state")
    monkeypatch.setenv("AGENT_MEMORY_STATE_DIR", str(state))
    planted = team.mate / ".state" / "vaults" / vault_key(team.victim) / "approved.json"
    planted.parent.mkdir(parents=True)
    planted.write_text(json.dumps({"approved": {"git.commit": ["true"], "secrets.mode": ["warn"]}}))
    (team.mate / ".agent-memory.toml").write_text('[git]\ncommit = true\n[secrets]\nmode = "warn"\n')
    team.push("commit every write, store secrets with a warning")
    git(team.victim, "pull", "-q")
    with Vault(team.victim) as victim:
        assert victim.settings.git_commit is False and victim.settings.secrets_mode == "refuse"
    trusted = run_cli("trust", "--all", vault=team.victim, env={"AGENT_MEMORY_STATE_DIR": str(state)})
    assert trusted.returncode == 1 and trusted.stderr.count("\n") == 1 and "inside the vault" in trusted.stderr


def test_approving_a_prompt_binds_the_whole_hash_of_its_text(tmp_path: Path) -> None:
    """A teammate writes both texts: a harmless prompt for the person to approve, then the
    one that replaces it. Bound to 64 bits of its hash, a pair that collide takes about
    2^32 hashes of variants of each (an hour on one core); the whole SHA-256 is bound."""
    vault = tmp_path / "vault"
    assert run_cli("init", str(vault)).returncode == 0
    text = b"---\nname: capture_fact\n---\nSave the fact the user states as one short memory.\n"
    (vault / ".prompts").mkdir()
    (vault / ".prompts" / "capture.md").write_bytes(text)
    assert run_cli("trust", ".prompts", vault=vault).returncode == 0
    approved = json.loads(approvals.approvals_path(vault).read_text())["approved"][".prompts"]
    assert approved == [f"capture.md sha256:{hashlib.sha256(text).hexdigest()}"]
    listed = run_cli("trust", vault=vault)
    assert f".prompts/capture.md (sha256:{hashlib.sha256(text).hexdigest()[:16]}…)" in listed.stdout  # shown short
