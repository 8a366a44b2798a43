"""The CLI as a user runs it, in process through click's runner (stdout, stderr and the
exit code apart), with HOME and the vault inside tmp_path; one session goes through the
real entry point, ``python -m agent_memory`` in a subprocess."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agent_memory.note.parse import file_version
from agent_memory.vault.vault import Vault

from conftest import CliResult, run_cli

ACME = "Customer ACME prefers deploys on Fridays"
HIT_FIELDS = {"id", "path", "version", "namespace", "tags", "title", "snippet", "matched_terms", "created",
              "updated", "age", "expires"}


_home: list[Path] = []


@pytest.fixture(autouse=True)
def cli_home(tmp_path: Path) -> Path:
    """The HOME every CLI run gets: inside tmp_path, never the real one."""
    (tmp_path / "home").mkdir()
    _home[:] = [tmp_path / "home"]
    return tmp_path / "home"


def run(cwd: Path, *args: str, vault: Path | None = None, stdin: str | None = None, spawn: bool = False) -> CliResult:
    """Run the CLI in ``cwd``; ``vault`` sets AGENT_MEMORY_DIR, ``None`` leaves discovery
    to the CLI; ``spawn`` runs ``python -m agent_memory`` in a subprocess."""
    env = {"HOME": str(_home[0])}
    if vault is not None:
        env["AGENT_MEMORY_DIR"] = str(vault)
    return run_cli(*args, cwd=cwd, stdin=stdin, env=env, spawn=spawn)


def ok(result: CliResult) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".index" not in p.relative_to(root).parts
    }


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "project").mkdir()
    return tmp_path / "project"


@pytest.fixture
def vault(project: Path) -> Path:
    """A vault at ./.memory of the project with one memory (made through the library, to
    keep the suite fast; the session test makes its own through the CLI)."""
    with Vault.init(project / ".memory") as made:
        made.remember(ACME, namespace="support", tags=["customer", "deploy"])
    return project / ".memory"


# --------------------------------------------------------------------------- a newcomer's first session


def test_a_newcomers_first_session(project: Path) -> None:
    out = ok(run(project, "init"))
    vault = project / ".memory"
    assert str(vault) in out
    assert ".index/" in (vault / ".gitignore").read_text().splitlines()

    memory_id = ok(run(project, "add", ACME, "-n", "support", "-t", "customer", "-t", "deploy"))
    assert memory_id.endswith("\n") and "\n" not in memory_id[:-1]
    memory_id = memory_id.strip()
    [path] = [p for p in files(vault) if p.endswith(".md")]
    assert path.endswith("/customer-acme-prefers-deploys-on-fridays.md")
    text = (vault / path).read_text()
    assert text.startswith(f"---\nid: {memory_id}\nnamespace: support\ntags: [customer, deploy]\n")
    assert text.endswith("---\nCustomer ACME prefers deploys on Fridays\n")

    out = ok(run(project, "search", "when does ACME prefer to deploy?"))
    assert memory_id in out and ACME in out and "**ACME**" in out

    assert memory_id in ok(run(project, "list", "--tag", "customer"))
    assert memory_id not in ok(run(project, "list", "--tag", "billing"))

    for key in (memory_id, path):
        shown = ok(run(project, "show", key))
        assert memory_id in shown and ACME in shown and path in shown

    ok(run(project, "edit", memory_id, "--add-tag", "x", "--content", "ACME deploys on Thursdays now"))
    text = (vault / path).read_text()
    assert "tags: [customer, deploy, x]\n" in text and text.endswith("---\nACME deploys on Thursdays now\n")
    ok(run(project, "edit", path, "--remove-tag", "deploy"))
    assert "tags: [customer, x]\n" in (vault / path).read_text()
    assert memory_id in ok(run(project, "search", "thursdays"))

    assert "Indexed 1 file in " in ok(run(project, "reindex"))
    assert memory_id in ok(run(project, "search", "thursdays"))

    out = ok(run(project, "forget", memory_id))
    assert ".trash/" + path in out
    assert (vault / ".trash" / path).exists() and not (vault / path).exists()
    assert memory_id not in ok(run(project, "search", "thursdays"))


def test_commands_find_the_vault_from_a_subfolder(vault: Path, project: Path) -> None:
    deep = project / "src" / "pkg"
    deep.mkdir(parents=True)
    assert "customer-acme" in ok(run(deep, "list"))


def test_add_reads_standard_input(vault: Path, project: Path) -> None:
    """Through the real ``python -m agent_memory``, a real pipe on stdin: the id alone on
    stdout, the file written named on stderr."""
    added = run(project, "add", "-", stdin="A fact from a pipe\nwith two lines\n", spawn=True)
    memory_id = ok(added).strip()
    assert added.stdout == memory_id + "\n" and added.stderr.startswith("Wrote ")
    assert "A fact from a pipe\nwith two lines" in ok(run(project, "show", memory_id))


def test_add_of_a_duplicate_prints_the_existing_id(vault: Path, project: Path) -> None:
    [first] = json.loads(ok(run(project, "list", "--json")))["memories"]
    again = run(project, "add", ACME.upper(), "-n", "support")
    assert ok(again).strip() == first["id"]
    assert "already remembered" in again.stderr


# --------------------------------------------------------------------------- --dir and --json


@pytest.mark.parametrize("args", [["--dir", "D", "init"], ["init", "D"], ["init", "--dir", "D"]])
def test_init_at_a_path(project: Path, args: list[str]) -> None:
    ok(run(project, *args))
    assert (project / "D/.gitignore").exists()
    assert not (project / ".memory").exists()
    memory_id = ok(run(project, "--dir", "D", "add", "Stored in D")).strip()
    assert [p for p in files(project / "D") if p.endswith(".md")]
    assert memory_id in ok(run(project, "list", "--dir", str(project / "D")))


def test_init_honours_agent_memory_dir(project: Path) -> None:
    ok(run(project, "init", vault=project / "from-env"))
    assert (project / "from-env/.gitignore").exists() and not (project / ".memory").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["--dir", "V", "--json", "search", "acme"],
        ["--json", "search", "acme", "--dir", "V"],
        ["search", "--dir", "V", "acme", "--json"],
        ["search", "acme", "--json", "--dir", "V"],
    ],
)
def test_dir_and_json_work_before_and_after_the_command(project: Path, args: list[str]) -> None:
    ok(run(project, "init", "V"))
    ok(run(project, "--dir", "V", "add", ACME))
    result = json.loads(ok(run(project, *args, vault=project / "elsewhere")))
    assert result["count"] == 1


def test_dir_wins_over_the_environment(project: Path) -> None:
    ok(run(project, "init", "V"))
    ok(run(project, "init", "W"))
    ok(run(project, "add", "Only in W", vault=project / "W"))
    assert json.loads(ok(run(project, "list", "--json", "--dir", "V", vault=project / "W")))["total"] == 0


def test_search_json_has_the_spec_fields(vault: Path, project: Path) -> None:
    result = json.loads(ok(run(project, "search", "when does ACME prefer to deploy?", "--json")))
    assert {"terms", "match_mode", "count", "hits"} <= set(result)
    assert result["count"] == len(result["hits"]) == 1
    [hit] = result["hits"]
    assert HIT_FIELDS <= set(hit)
    assert hit["id"] and hit["path"].endswith(".md") and (vault / hit["path"]).exists()
    assert hit["version"] == file_version((vault / hit["path"]).read_bytes())
    assert (hit["namespace"], hit["tags"], hit["expires"]) == ("support", ["customer", "deploy"], None)
    assert hit["highlights"] and hit["matched_terms"]


def test_search_with_no_hits_exits_0(vault: Path, project: Path) -> None:
    result = run(project, "search", "quantum entanglement")
    assert result.returncode == 0
    assert "Nothing matched" in result.stdout
    parsed = json.loads(ok(run(project, "search", "quantum entanglement", "--json")))
    assert parsed["count"] == 0 and parsed["hits"] == [] and parsed["hint"]


@pytest.mark.parametrize("query", ['"*(', "NEAR - c++", 'acme" OR "x NOT acme*'])
def test_search_never_fails_on_fts_syntax(vault: Path, project: Path, query: str) -> None:
    assert "count" in json.loads(ok(run(project, "search", query, "--json")))


def test_list_json_and_filters(vault: Path, project: Path) -> None:
    ok(run(project, "add", "Sales fact", "-n", "sales", "-t", "Renewal"))
    everything = json.loads(ok(run(project, "list", "--json")))
    assert everything["total"] == 2
    by_tag = json.loads(ok(run(project, "list", "-t", "RENEWAL", "--json")))
    assert [m["namespace"] for m in by_tag["memories"]] == ["sales"]
    by_ns = json.loads(ok(run(project, "list", "-n", "support", "--json")))
    assert [m["tags"] for m in by_ns["memories"]] == [["customer", "deploy"]]


def test_add_tag_option_takes_a_comma_list(vault: Path, project: Path) -> None:
    memory_id = ok(run(project, "add", "Tagged twice", "-t", "a,b", "-t", "c")).strip()
    assert json.loads(ok(run(project, "show", memory_id, "--json")))["tags"] == ["a", "b", "c"]


def test_show_json_is_the_whole_memory(vault: Path, project: Path) -> None:
    [item] = json.loads(ok(run(project, "list", "--json")))["memories"]
    memory = json.loads(ok(run(project, "show", item["id"], "--json")))
    assert memory["content"] == ACME + "\n" and memory["id"] == item["id"] and memory["path"] == item["path"]


# --------------------------------------------------------------------------- bad input


BAD = [
    (["show", "01nosuchid000000"], "not found"),
    (["edit", "01nosuchid000000", "--add-tag", "x"], "not found"),
    (["forget", "01nosuchid000000"], "not found"),
    (["show", "2026/07/20/nope.md"], "not found"),
    (["add", ""], "empty"),
    (["add", "   "], "empty"),
    (["add", "x" * 100_001], "limit is 100,000"),
    (["add", "fine", "-t", "two words"], "whitespace"),
    (["add", "fine", "-t", "t" * 65], "limit is 64"),
    (["add", "fine", "--ttl-days", "nan"], "--ttl-days"),
    (["add", "fine", "-n", "two words"], "Namespace"),
    (["search", "acme", "--match", "most"], "auto, all, any"),
    (["search", "acme", "--limit", "0"], "limit"),
    (["search", "a" * 1001], "1000 characters"),
    (["list", "--limit", "0"], "--limit must be 1 or more"),
    (["list", "--offset", "-1"], "offset"),
]


@pytest.mark.parametrize("args, message", BAD, ids=[" ".join(a)[:40] for a, _ in BAD])
def test_bad_input_says_why_exits_1_and_changes_nothing(vault: Path, project: Path, args: list[str], message: str) -> None:
    before = files(vault)
    result = run(project, *args)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    assert files(vault) == before


def test_bad_edit_input_changes_nothing(vault: Path, project: Path) -> None:
    [item] = json.loads(ok(run(project, "list", "--json")))["memories"]
    before = files(vault)
    for args, message in (
        (["--content", ""], "empty"),
        (["--add-tag", "a b"], "whitespace"),
        (["--expected-version", "0" * 64, "--add-tag", "x"], "changed on disk"),
    ):
        result = run(project, "edit", item["id"], *args)
        assert (result.returncode, message in result.stderr) == (1, True), result.stderr
    assert files(vault) == before


@pytest.mark.parametrize("command", [["list"], ["search", "acme"], ["add", "fact"], ["show", "x"], ["init"]])
def test_a_vault_path_that_is_a_file(project: Path, command: list[str]) -> None:
    (project / "notes").write_text("I am a file\n")
    result = run(project, "--dir", "notes", *command)
    assert result.returncode == 1
    assert "is a file" in result.stderr and "Traceback" not in result.stderr
    assert (project / "notes").read_text() == "I am a file\n"


def test_a_missing_vault_tells_how_to_create_one(project: Path) -> None:
    result = run(project, "list", vault=project / "nowhere")
    assert result.returncode == 1 and "init" in result.stderr
    assert not (project / "nowhere").exists()


# --------------------------------------------------------------------------- terminal escapes

# What a hostile note (from a git pull, a sync tool, an import) could print: retitle the
# window (OSC 0), clear the screen (CSI 2J), the C1 form of CSI, a bell, a backspace, a
# carriage return, and OSC 52 (write the clipboard) in the body.
EVIL_TITLE = "Deploy\x1b]0;pwned\x07 day\x1b[2J\x9b31m\x08\r!"
EVIL_BODY = "Friday deploys\x1b]52;c;aGk=\x07 are fine\n\tindented line"
_OWN_STYLES = re.compile(r"\x1b\[[0-9;]*m")  # click.style's bold/dim/colour around our own text
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def _terminal(vault: Path, *args: str) -> str:
    """The CLI's output as a terminal gets it, both streams (click strips nothing when it
    is a tty)."""
    result = run_cli(*args, vault=vault, color=True)
    return ok(result) + result.stderr


def test_terminal_escapes_in_a_note_never_reach_the_terminal(project: Path) -> None:
    vault = project / ".memory"
    Vault.init(vault).close()
    (vault / "notes").mkdir()
    title = EVIL_TITLE.replace("\x1b", "\\e").replace("\x07", "\\a").replace("\x9b", "\\x9b")
    title = title.replace("\x08", "\\b").replace("\r", "\\r")
    (vault / "notes" / "evil.md").write_text(f'---\ntitle: "{title}"\ntags: [ops]\n---\n{EVIL_BODY}\n', newline="")
    ok(run(project, "reindex"))
    [item] = json.loads(ok(run(project, "list", "--json")))["memories"]
    assert item["title"] == EVIL_TITLE  # --json keeps the text as it is

    for args in (["list"], ["search", "friday deploys"], ["show", item["id"]]):
        out = _OWN_STYLES.sub("", _terminal(vault, *args))
        allowed = "\n\t" if args[0] == "show" else "\n"
        assert [c for c in _CONTROL.findall(out) if c not in allowed] == [], (args, out)
        assert "Deploy]0;pwned day[2J31m!" in out, (args, out)
    shown = _OWN_STYLES.sub("", _terminal(vault, "show", item["id"]))
    assert shown.endswith("Friday deploys]52;c;aGk= are fine\n\tindented line\n")  # the body keeps its lines

    hit = json.loads(ok(run(project, "search", "friday deploys", "--json")))["hits"][0]
    assert "\x1b]52;c;aGk=\x07" in hit["snippet"]
    assert json.loads(ok(run(project, "show", item["id"], "--json")))["content"].startswith(EVIL_BODY)
