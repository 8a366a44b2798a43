"""The ``agent-memory`` command: one command = one vault call.

Library errors become a one-line message on stderr and exit code 1. ``--dir`` and
``--json`` work before or after the command. Nothing here imports ``mcp`` or
``watchdog`` unless the command needs them, so ``search`` starts fast.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from .errors import AgentMemoryError as MemoryError_
from .progress import Progress, Step
from .semantic.status import vector_summary
from .disk.layout import VAULT_DIRNAME, locate_vault, require_vault
from .recall.engine import MATCH_MODES
from .vault.vault import Vault


class Settings:
    """Options that may come before or after the command name."""

    def __init__(self) -> None:
        self.dir: str | None = None
        self.json: bool = False


class _ImportanceOrEmpty(click.ParamType):
    """A number, or '' (edit --importance '' removes the key, as --type '' does)."""

    name = "NUMBER|''"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float | str:
        if value == "" or isinstance(value, float):
            return value
        try:
            return float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number (or '' to remove the importance).", param, ctx)


IMPORTANCE_OR_EMPTY = _ImportanceOrEmpty()


def _remember_dir(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value:
        ctx.ensure_object(Settings).dir = value


def _remember_json(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(Settings).json = True


def common(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--dir``/``--json`` to a command as well as to the group."""
    func = click.option(
        "--dir", "dir_", metavar="PATH", expose_value=False, callback=_remember_dir,
        help="The vault folder itself (default: the nearest .memory/, Obsidian vault or vault with an .index/ "
             "here or above, else ~/.memory; or $AGENT_MEMORY_DIR).",
    )(func)
    func = click.option(
        "--json", "json_", is_flag=True, expose_value=False, callback=_remember_json, help="Print JSON."
    )(func)
    return func


def settings() -> Settings:
    return click.get_current_context().ensure_object(Settings)


def vault_path() -> Path:
    """The vault this command works on (``require_vault``: a clear error naming where it
    looked when there is none)."""
    return require_vault(settings().dir)


def open_vault() -> Vault:
    return Vault(vault_path())


def _ids(memory: Any) -> str:
    """A memory's id and path, the path once when it is the id (a file without ``id:``)."""
    return printable(memory["path"] if memory["id"] == memory["path"] else f"{memory['id']}  {memory['path']}")


def handle_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except MemoryError_ as exc:
            raise click.ClickException(printable(cli_words(str(exc)))) from exc

    return wrapper


# The library's messages name MCP tools and arguments (a model reads them too); on a
# terminal they name the command or option a person types instead.
CLI_WORDS = {
    "get_memory": "`agent-memory show`",
    "list_memories": "`agent-memory list`",
    "recall": "`agent-memory search`",
    "update_memory": "`agent-memory edit`",
    "link_memories": "`agent-memory link`",
    "unlink_memories": "`agent-memory unlink`",
    "move_memory": "`agent-memory mv`",
    "memory_history": "`agent-memory history`",
    "export_memories": "`agent-memory export`",
    "import_memories": "`agent-memory import`",
    "expected_version": "--expected-version",
    "replace_old/replace_new": "--replace OLD NEW",
    "add_tags/remove_tags": "--add-tag/--remove-tag",
    "ttl_days": "--ttl-days",
}
# A whole word, not part of a dotted name (the recall.profile setting stays as it is).
_CLI_WORD = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, sorted(CLI_WORDS, key=len, reverse=True)))
                       + r")(?!\w|\.\w)")


def cli_words(message: str) -> str:
    """A library message with MCP tool and argument names as CLI commands and options."""
    return _CLI_WORD.sub(lambda m: CLI_WORDS[m[1]], message)


# C0 and C1 control characters (and DEL): in a title, snippet or file name they are
# terminal escape sequences (clear the screen, retitle the window, write the clipboard).
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_LINE_BREAKS = re.compile("[\t\n]")


def printable(value: Any, *, body: bool = False) -> str:
    """Text from the vault made safe for a terminal: control characters removed (a
    ``body`` keeps its newlines and tabs; anything else prints on one line). Every
    human-output path prints vault text through this; ``--json`` prints it as it is."""
    text = _CONTROLS.sub("", str(value))
    return text if body else _LINE_BREAKS.sub(" ", text)


def emit(data: Any, human: Callable[[], None]) -> None:
    if settings().json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        human()


@contextmanager
def progress_bar() -> Iterator[Progress | None]:
    """Bars on stderr when it is a terminal, one per phase of the work (rich allows one
    live display at a time); None off a terminal or under --json."""
    if settings().json or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import Progress as Bars  # imported only for long work on a terminal

    with Bars(transient=True, console=_stderr_console()) as bars:
        tasks: dict[str, Any] = {}

        def update(step: Step) -> None:
            if step.phase not in tasks:
                tasks[step.phase] = bars.add_task(step.phase.capitalize(), total=None)
            bars.update(tasks[step.phase], completed=step.done, total=step.total)

        yield update


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


def _tag_text(tags: list[str]) -> str:
    return " ".join("#" + printable(t) for t in tags)


def _print_summary(n: int | None, item: Mapping[str, Any]) -> None:
    head = f"{n}. " if n is not None else ""
    tags = f"  {_tag_text(item['tags'])}" if item["tags"] else ""
    conflict = click.style("  git conflict", fg="yellow") if item.get("conflict") else ""
    click.echo(f"{head}{click.style(printable(item['title']), bold=True)}  [{printable(item['namespace'])}]{tags}  "
               f"({printable(item['age'])}){conflict}")
    click.echo(f"   {_ids(item)}")


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@common
@click.version_option(package_name="agent-memory")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """A memory for AI agents that humans can read, edit and version.

    Every memory is a markdown file in the vault; the index is a cache.
    With no command, runs the MCP server on stdio.
    """
    ctx.ensure_object(Settings)
    if ctx.invoked_subcommand is None:
        ctx.invoke(serve)


@cli.command()
@common
@click.argument("path", required=False)
@click.option("--memories-folder", default=None, metavar="FOLDER",
              help="Put new memories' YYYY/MM/DD/ folders under FOLDER (writes .agent-memory.toml).")
@handle_errors
def init(path: str | None, memories_folder: str | None) -> None:
    """Create a vault with its .gitignore.

    The vault is ./.memory by default, or PATH, --dir or $AGENT_MEMORY_DIR. In an
    Obsidian vault, --memories-folder keeps agents' dated folders in one place.

    \b
    Examples:
      agent-memory init
      agent-memory init ~/notes --memories-folder Agent
    """
    target = Path(path or settings().dir or os.environ.get("AGENT_MEMORY_DIR") or VAULT_DIRNAME)
    with Vault.init(target, memories_folder=memories_folder) as vault:
        if vault.is_obsidian_vault and not vault.settings.memories_folder:
            click.echo(  # a proposal, not a change: the vault is the person's
                f"This is an Obsidian vault: to keep new memories in one folder instead of YYYY/ folders at its "
                f"top, run `agent-memory --dir {printable(vault.root)} init --memories-folder Agent`.", err=True)
        emit({"vault": str(vault.root)}, lambda: click.echo(f"Vault ready at {printable(vault.root)}"))


@cli.command()
@common
@click.argument("content", required=False)
@click.option("-n", "--namespace", default="default", show_default=True, help="Namespace of the memory.")
@click.option("-t", "--tag", "tags", multiple=True, help="A tag (repeat for more).")
@click.option("--title", default="", help="Title (default: the first words).")
@click.option("--source", default="", help="Where the fact came from.")
@click.option("--ttl-days", type=float, default=0, help="Expire after this many days (0: never).")
@click.option("--type", "kind", default=None, help="Kind of memory (fact, decision, lesson, procedure...).")
@click.option("--importance", type=float, default=None, help="How much it matters (0-10).")
@handle_errors
def add(content: str | None, namespace: str, tags: tuple[str, ...], title: str, source: str, ttl_days: float,
        kind: str | None, importance: float | None) -> None:
    """Remember CONTENT; prints the new id.

    CONTENT - or none reads standard input. The file written is named on stderr.

    \b
    Examples:
      agent-memory add "Customer ACME prefers deploys on Fridays" -n support -t customer
      git log -1 --format=%B | agent-memory add -t release
    """
    if content in (None, "-"):
        content = sys.stdin.read()
    with open_vault() as vault:
        result = vault.remember(content, namespace=namespace, tags=list(tags), title=title, source=source, ttl_days=ttl_days,
                                type=kind, importance=importance)

        def human() -> None:
            click.echo(printable(result["memory"]["id"]))  # stdout: the id alone, for $(agent-memory add ...)
            where = printable(f"{result['memory']['path']} in {vault.root}")
            if result["deduplicated"]:
                click.echo(f"(already remembered: the existing memory {where} was kept)", err=True)
            else:
                click.echo(f"Wrote {where}", err=True)

        emit(result, human)


@cli.command()
@common
@click.argument("query")
@click.option("-n", "--namespace", default=None, help="Only this namespace.")
@click.option("-t", "--tag", "tags", multiple=True, help="Only memories with this tag (repeat: all of them).")
@click.option("--limit", default=10, show_default=True, type=int, help="Most hits to return (1-100).")
# Not a click.Choice: a bad value is bad input (the vault's message, exit 1), not a usage error (exit 2).
@click.option("--match", metavar="[" + "|".join(MATCH_MODES) + "]", default="auto", show_default=True,
              help="auto: all terms, else any; all; any.")
@click.option("--since", default=None, help="Only memories created on or after this date.")
@click.option("--until", default=None, help="Only memories created before this date.")
@click.option("--path", "path_prefix", default=None, help="Only files under this vault folder.")
@click.option("--offset", default=0, type=int, help="Skip this many hits (for paging).")
@click.option("--profile", default=None, metavar="[facts|conversation]",
              help="Ranking profile (default: the vault's recall.profile setting, else facts).")
@click.option("--explain", is_flag=True, help="Also print the SQL run and where each hit's score came from.")
@click.option("--depth", default=0, type=int, help="Also show memories linked to the hits, up to this many links away (0-3).")
@click.option("--type", "kind", default=None, help="Only memories of this type.")
@click.option("--min-importance", type=float, default=None, help="Only memories with at least this importance (0-10).")
@click.option("--semantic/--no-semantic", default=None,
              help="Rank by meaning when no memory holds every word (default: recall.semantic, on with the extra).")
@handle_errors
def search(query: str, namespace: str | None, tags: tuple[str, ...], limit: int, match: str,
           since: str | None, until: str | None, path_prefix: str | None, offset: int, profile: str | None,
           explain: bool, depth: int, kind: str | None, min_importance: float | None, semantic: bool | None) -> None:
    """Recall memories with a plain question.

    \b
    Examples:
      agent-memory search "when does ACME prefer to deploy?"
      agent-memory search deploys -t customer --json
    """
    with open_vault() as vault:
        result = vault.search(query, namespace=namespace, tags=list(tags), limit=limit, match=match,
                              since=since, until=until, path_prefix=path_prefix, offset=offset, profile=profile,
                              explain=explain, depth=depth, type=kind, min_importance=min_importance,
                              semantic=semantic)

    def human() -> None:
        if result.get("corrected"):
            fixes = ", ".join(f"{typed} -> {used}" for typed, used in result["corrected"].items())
            click.echo(click.style(f"Searched for corrected words: {printable(fixes)}", dim=True))
        if result.get("note"):
            click.echo(click.style(printable(result["note"]), dim=True))
        for n, hit in enumerate(result["hits"], offset + 1):
            _print_summary(n, hit)
            click.echo(f"   {printable(hit['snippet'])}")
        if "next_offset" in result:
            click.echo(click.style(f"more: --offset {result['next_offset']}", dim=True))
        if result.get("hint"):
            click.echo(printable(result["hint"]))
        if "related" in result:
            linked = result["related"]
            click.echo(click.style(f"\nlinked (depth {linked['depth']}): {linked['count']}", dim=True))
            for node in linked["nodes"]:
                click.echo(f"  {node['distance']}  {printable(node['id'])}  {printable(node['title'])}  ({printable(node['path'])})")
            if linked.get("note"):
                click.echo(click.style(printable(linked["note"]), dim=True))
        if "explain" in result:
            _print_explanation(result["explain"])

    emit(result, human)


def _print_explanation(explained: Mapping[str, Any]) -> None:
    click.echo(f"\nprofile {explained['profile']}; {len(explained['statements'])} statements:")
    for n, statement in enumerate(explained["statements"], 1):
        click.echo(f"{n:>3}. {printable(statement['sql'])}")
        click.echo(click.style(f"     params {printable(json.dumps(statement['params'], ensure_ascii=False))}", dim=True))
    click.echo("scores:")
    for n, scored in enumerate(explained["scores"], 1):
        parts = "  ".join(f"{name} {value:g}" for name, value in scored["parts"].items())
        click.echo(f"{n:>3}. {printable(scored['id'])}  score {scored['score']:g}  {parts}")


@cli.command(name="list")
@common
@click.option("-n", "--namespace", default=None, help="Only this namespace.")
@click.option("-t", "--tag", "tags", multiple=True, help="Only memories with this tag (repeat: all of them).")
@click.option("--limit", default=20, show_default=True, type=int, help="How many (1-100).")
@click.option("--offset", default=0, type=int, help="Skip this many (for paging).")
@click.option("--path", "path_prefix", default=None, help="Only files under this vault folder.")
@click.option("--type", "kind", default=None, help="Only memories of this type.")
@click.option("--min-importance", type=float, default=None, help="Only memories with at least this importance (0-10).")
@handle_errors
def list_(namespace: str | None, tags: tuple[str, ...], limit: int, offset: int, path_prefix: str | None,
          kind: str | None, min_importance: float | None) -> None:
    """List memories, newest first.

    \b
    Example:
      agent-memory list --tag customer --limit 50
    """
    with open_vault() as vault:
        result = vault.list(namespace=namespace, tags=list(tags), limit=limit, offset=offset, path_prefix=path_prefix,
                            type=kind, min_importance=min_importance)

    def human() -> None:
        for n, item in enumerate(result["memories"], offset + 1):
            _print_summary(n, item)
        shown = f"{offset + 1}-{offset + result['count']}" if result["count"] else "0"
        more = f"; next: --offset {result['next_offset']}" if "next_offset" in result else ""
        click.echo(click.style(f"{shown} of {result['total']}{more}", dim=True))

    emit(result, human)


@cli.command()
@common
@click.argument("memory_id")
@handle_errors
def show(memory_id: str) -> None:
    """Show one memory (by id or vault-relative path).

    \b
    Example:
      agent-memory show people/priya.md
    """
    with open_vault() as vault:
        memory = vault.get(memory_id)

    def human() -> None:
        _print_summary(None, memory)
        click.echo(printable(f"   version {memory['version'][:12]}  created {memory['created']}  updated {memory['updated']}"
                         + (f"  expires {memory['expires']}" if memory["expires"] else "")))
        for relation, targets in memory["relations"].items():
            click.echo(printable(f"   {relation}: " + ", ".join(f"[[{t}]]" for t in targets)))
        for problem in memory["problems"]:
            click.echo(click.style(f"   problem: {printable(problem)}", fg="yellow"))
        if memory["conflict"]:
            click.echo(click.style("   this file holds git conflict markers; resolve them by hand", fg="yellow"))
        click.echo()
        click.echo(printable(memory["content"].rstrip("\n"), body=True))

    emit(memory, human)


@cli.command()
@common
@click.argument("memory_id")
@click.option("--content", default=None,
              help="New content: replaces the whole body as it is now (the old one is kept in .trash/).")
@click.option("--append", default=None, help="Text to add at the end of the content.")
@click.option("--replace", "replace", nargs=2, default=None, metavar="OLD NEW",
              help="Replace OLD (which must occur exactly once) with NEW.")
@click.option("--add-tag", "add_tags", multiple=True, help="Tag to add (repeatable).")
@click.option("--remove-tag", "remove_tags", multiple=True, help="Tag to remove (repeatable).")
@click.option("-n", "--namespace", default=None, help="Move to this namespace.")
@click.option("--title", default=None, help="New title.")
@click.option("--source", default=None, help="New source.")
@click.option("--ttl-days", type=float, default=None, help="Expire this many days from now (0: never).")
@click.option("--type", "kind", default=None, help="New type ('' removes it).")
@click.option("--importance", type=IMPORTANCE_OR_EMPTY, default=None, help="New importance (0-10; '' removes it).")
@click.option("--expected-version", default=None, help="Refuse if the file changed since this version.")
@handle_errors
def edit(memory_id: str, content: str | None, append: str | None, replace: tuple[str, str] | None,
         add_tags: tuple[str, ...], remove_tags: tuple[str, ...], namespace: str | None, title: str | None,
         source: str | None, ttl_days: float | None, kind: str | None, importance: float | str | None,
         expected_version: str | None) -> None:
    """Change a memory, or open it in $EDITOR.

    Only the front-matter keys that change are rewritten. With no change options it
    opens the file in $EDITOR (the file is the memory: the index follows when the
    editor exits).

    \b
    Examples:
      agent-memory edit people/priya.md --append "Prefers calls after 3pm."
      agent-memory edit 01m8r9k34bnrxpbt --add-tag friday
      agent-memory edit people/priya.md
    """
    flags = (content, append, replace, namespace, title, source, ttl_days, kind, importance)
    with open_vault() as vault:
        if all(f is None for f in flags) and not add_tags and not remove_tags:
            _open_in_editor(vault, memory_id)
            return
        if content is not None and not expected_version:
            # A person typing --content means the body as it is now: that version is theirs.
            expected_version = vault.get(memory_id)["version"]
        old, new = replace if replace else (None, None)
        result = vault.update(memory_id, content=content, append=append, replace_old=old, replace_new=new,
                              add_tags=list(add_tags), remove_tags=list(remove_tags), namespace=namespace,
                              title=title, source=source, ttl_days=ttl_days, type=kind, importance=importance,
                              expected_version=expected_version)
    emit(result, lambda: click.echo(f"{'Updated' if result['changed'] else 'Unchanged'} {_ids(result['memory'])}"))


def _open_in_editor(vault: Vault, memory_id: str) -> None:
    """``$VISUAL``/``$EDITOR`` (else click's default) on the memory's file itself."""
    memory = vault.get(memory_id)
    click.edit(filename=str(vault.root / memory["path"]))
    vault.reconcile_path(memory["path"])
    click.echo(f"Edited {_ids(memory)}", err=True)


@cli.command()
@common
@click.argument("memory_ids", nargs=-1, required=True)
@click.option("--expected-version", default=None, help="Refuse if the file changed since this version (one ID only).")
@click.option("--dry-run", is_flag=True, help="Only say what would be forgotten; change nothing.")
@handle_errors
def forget(memory_ids: tuple[str, ...], expected_version: str | None, dry_run: bool) -> None:
    """Move memories to .trash/ (kept 30 days), all or nothing.

    \b
    Examples:
      agent-memory forget 01m8r9k34bnrxpbt
      agent-memory forget 01m8r9k34bnrxpbt people/priya.md --dry-run
    """
    with open_vault() as vault:
        result = vault.forget_many(list(memory_ids), expected_version=expected_version, dry_run=dry_run)

    def human() -> None:
        for item in result["memories"]:
            if dry_run:
                click.echo(f"Would forget {_ids(item)}")
            else:
                click.echo(f"Forgot {_ids(item)}: moved to {printable(item['trashed_to'])}")
        if dry_run:
            click.echo(click.style(f"{result['count']} would be forgotten; nothing was changed", dim=True))

    emit(result, human)


@cli.command()
@common
@click.argument("key", required=False)
@handle_errors
def restore(key: str | None) -> None:
    """Put a forgotten, expired or replaced memory back.

    By id, old path or trash path; never overwrites. With no argument, list what the
    trash can give back.

    \b
    Examples:
      agent-memory restore
      agent-memory restore 01m8r9k34bnrxpbt
    """
    with open_vault() as vault:
        if key is None:
            entries = vault.trash_list()
            emit({"entries": entries}, lambda: _print_trash(entries))
            return
        result = vault.restore(key)
    emit(result, lambda: click.echo(printable(f"Restored {result['id']} to {result['path']} ({result['reason']})")))


def _print_trash(entries: list[Any]) -> None:
    if not entries:
        click.echo("Nothing in the trash that the tool put there.")
    for entry in entries:
        click.echo(printable(f"{entry['at']}  {entry['reason']:<9}  {entry['trash']}  (from {entry['source']})"))


@cli.command()
@common
@click.argument("memory_id")
@click.argument("target_id")
@click.option("-r", "--relation", default="related_to", show_default=True,
              help="Front-matter property that holds the link (one word).")
@handle_errors
def link(memory_id: str, target_id: str, relation: str) -> None:
    """Link MEMORY_ID to TARGET_ID in its front matter.

    Adds "[[target]]" to MEMORY_ID's RELATION property (related_to by default).

    \b
    Example:
      agent-memory link people/priya.md acme-billing --relation works_on
    """
    with open_vault() as vault:
        result = vault.link(memory_id, target_id, relation=relation)
    emit(result, lambda: click.echo(printable(
        f"{'Linked' if result['changed'] else 'Already linked'} {result['source']['path']} "
        f"-{result['relation']}-> {result['link']}")))


@cli.command()
@common
@click.argument("memory_id")
@click.argument("target_id")
@click.option("-r", "--relation", default="related_to", show_default=True,
              help="Front-matter property the link was written in (as given to `link`).")
@handle_errors
def unlink(memory_id: str, target_id: str, relation: str) -> None:
    """Remove the link from MEMORY_ID to TARGET_ID that `link` wrote.

    \b
    Example:
      agent-memory unlink people/priya.md acme-billing --relation works_on
    """
    with open_vault() as vault:
        result = vault.unlink(memory_id, target_id, relation=relation)
    emit(result, lambda: click.echo(printable(
        f"Unlinked {result['source']['path']} -{result['relation']}-> {', '.join(result['removed'])}"
        if result["changed"] else f"Not linked: {result['source']['path']} has no {result['relation']} link to {target_id}")))


@cli.command(name="mv")
@common
@click.argument("memory_id")
@click.argument("new_path")
@handle_errors
def mv(memory_id: str, new_path: str) -> None:
    """Rename or move a note, and rewrite the links to it.

    Every [[link]] to the note across the vault is rewritten in place (|alias,
    #heading and ! embeds kept), all files or none; an existing file is never
    overwritten. A note without an id changes its id (its path).

    \b
    Examples:
      agent-memory mv "Kessel Run.md" "places/Kessel Run.md"
      agent-memory mv people/priya.md archive/
    """
    with open_vault() as vault:
        result = vault.move(memory_id, new_path)

    def human() -> None:
        click.echo(printable(f"Moved {result['old_path']} -> {result['new_path']}"))
        if result["old_id"] != result["new_id"]:
            click.echo(printable(f"id {result['old_id']} -> {result['new_id']}"))
        for item in result["rewritten"]:
            click.echo(printable(f"  rewrote {item['links']} link{'s' if item['links'] != 1 else ''} in {item['path']}"))

    emit(result, human)


@cli.command()
@common
@click.argument("memory_id")
@click.option("--limit", type=int, default=20, show_default=True, help="Most commits to show (1-100).")
@handle_errors
def history(memory_id: str, limit: int) -> None:
    """The git commits that changed a memory, newest first.

    Renames are followed. Each commit with its date, author, message and what
    it changed: the front-matter keys and the body lines added and removed.
    Read-only.

    \b
    Example:
      agent-memory history people/priya.md --limit 5
    """
    with open_vault() as vault:
        result = vault.history(memory_id, limit=limit)

    def human() -> None:
        for entry in result["commits"]:
            click.echo(printable(f"{entry['commit'][:10]}  {entry['date']}  {entry['author']} <{entry['email']}>"))
            click.echo(printable(f"   {entry['message'].splitlines()[0] if entry['message'] else '(no message)'}"))
            moved = f" from {entry['old_path']}" if "old_path" in entry else ""
            keys = f"; keys: {', '.join(entry['keys_changed'])}" if entry["keys_changed"] else ""
            click.echo(printable(f"   {entry['status']} {entry['path']}{moved}{keys}; "
                                 f"+{entry['lines_added']} -{entry['lines_removed']} lines"))
            for line in entry["removed"]:
                click.echo(click.style(printable(f"   - {line}"), fg="red"))
            for line in entry["added"]:
                click.echo(click.style(printable(f"   + {line}"), fg="green"))
        if "note" in result:
            click.echo(printable(result["note"]))

    emit(result, human)


@cli.group(name="git")
@common
def git_group() -> None:
    """Work with the git repository the vault lives in.

    \b
    Example:
      agent-memory git setup
    """


@git_group.command(name="setup")
@common
@handle_errors
def git_setup() -> None:
    """Make git merge memory files key by key.

    Adds `*.md merge=agent-memory` to the vault's .gitattributes (scoped to the
    vault's folder; commit it) and registers the driver, with this Python's
    absolute path, in the repository's config (run it once in every clone).
    Safe to run again.

    \b
    Example:
      agent-memory git setup
    """
    from .git.setup import setup  # only here: nothing else needs it

    result = setup(vault_path())

    def human() -> None:
        where = printable(result["gitattributes"])
        click.echo(f"Added {result['attributes_line']} to {where}" if result["gitattributes_changed"]
                   else f"{where} already has {result['attributes_line']}")
        click.echo(f"Registered the merge driver in {printable(result['repository'])}'s git config")
        click.echo(printable(result["note"]))

    emit(result, human)


@cli.command()
@common
@click.argument("keys", nargs=-1)
@click.option("--all", "approve_all", is_flag=True, help="Approve everything the vault asks for that is not approved yet.")
@click.option("--revoke", is_flag=True, help="Withdraw this clone's approval of KEYS (all with --all).")
@handle_errors
def trust(keys: tuple[str, ...], approve_all: bool, revoke: bool) -> None:
    """Approve vault settings that loosen a guard (this clone only).

    The vault's .agent-memory.toml and .prompts/ may come from a teammate (git, a
    synced folder), so a value that loosens a guard — secrets.mode = "warn", a
    secrets.allow entry, git.commit, git.subfolder, git.hooks, a .prompts/ file —
    is ignored until you approve it here. An approval is of the value now in the
    file, kept outside the vault: a later change to it needs approving again.
    Without KEYS, lists what the vault asks for and whether it is approved.

    \b
    Examples:
      agent-memory trust                  # review
      agent-memory trust git.commit       # approve the current git.commit value
      agent-memory trust secrets.allow .prompts
      agent-memory trust --all
      agent-memory trust --revoke git.commit
    """
    from .trust import approvals  # only here: nothing else needs the command's part

    root = vault_path()
    wanted = list(keys) or None
    if revoke:
        if not keys and not approve_all:
            raise click.ClickException("Name the keys to withdraw (or --all); `agent-memory trust` lists them.")
        gone = approvals.revoke(root, wanted)
        emit({"revoked": gone}, lambda: click.echo(
            f"Withdrew the approval of {', '.join(gone)}." if gone else "Nothing was approved for those keys."))
        return
    if keys or approve_all:
        done = approvals.approve(root, wanted)
        emit({"approved": [item.to_dict() for item in done]}, lambda: _print_approved(done))
        return
    items = approvals.review(root)
    emit({"settings": [item.to_dict() for item in items]}, lambda: _print_review(items, root))


def _print_approved(done: list[Any]) -> None:
    if not done:
        click.echo("Nothing to approve: everything the vault asks for is approved already (or it asks for nothing).")
        return
    click.echo("Approved for this clone:")
    for item in done:
        click.echo(f"  {printable(item.shown)}")


def _print_review(items: list[Any], root: Path) -> None:
    if not items:
        click.echo("The vault asks for nothing that loosens a guard.")
        return
    for item in items:
        state = "approved" if item.approved else click.style("not approved: ignored", fg="yellow")
        click.echo(f"  {printable(item.shown)}  ({state})")
    pending = list(dict.fromkeys(item.key for item in items if not item.approved))
    if pending:
        from .trust.approvals import approve_hint

        click.echo(f"To approve: {printable(approve_hint(root, pending))}")


@cli.command(name="merge-file")
@click.argument("base", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("ours", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("theirs", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("marker_size", type=int, default=7, required=False)
@click.argument("path", default="", required=False)
@click.pass_context
def merge_file(ctx: click.Context, base: Path, ours: Path, theirs: Path, marker_size: int, path: str) -> None:
    """git's merge driver for memory files (run by git).

    git runs it as `merge-file %O %A %B %L %P` once `agent-memory git setup`
    registered it. The merge goes into OURS; exit 0 when clean, 1 when conflict
    markers remain. Tags, aliases and relations merge as sets, `updated` takes
    the later time, `created` the earlier, the body merges line by line.

    \b
    Example (what git runs; by hand, OURS is overwritten):
      agent-memory merge-file base.md ours.md theirs.md 7 2026/07/20/acme.md
    """
    from .git.merge import run_driver

    ctx.exit(run_driver(base, ours, theirs, marker_size, path))


@cli.command()
@common
@handle_errors
def reindex() -> None:
    """Rebuild the index from the files alone.

    \b
    Example:
      agent-memory reindex
    """
    vault = Vault(vault_path(), sync=False)
    with vault, progress_bar() as progress:
        report = vault.reindex(progress=progress)

    def human() -> None:
        click.echo(f"Indexed {report['added']} files ({report['expired']} expired moved to .trash/).")
        if "embedded" in report:
            click.echo(f"Embedded {report['embedded']} memories for semantic recall (the others kept their vectors).")
        for problem in report["problems"]:
            click.echo(click.style(printable(f"  {problem['path']}: {problem['problem']}"), fg="yellow"))

    emit(report, human)


@cli.command()
@common
@handle_errors
def stats() -> None:
    """Totals, tags, problems and the index of the vault.

    Totals, namespaces, top tags, TTLs, problems, index size and search mode.

    \b
    Example:
      agent-memory stats --json
    """
    with open_vault() as vault:
        result = vault.stats()

    def human() -> None:
        click.echo(f"Vault      {printable(result['vault'])}")
        click.echo(f"Memories   {result['total']}  ({result['with_ttl']} with a TTL, {result['trash_files']} in .trash/)")
        click.echo(printable("Namespaces " + ", ".join(f"{k} {v}" for k, v in result["namespaces"].items())))
        click.echo(printable("Top tags   " + ", ".join(f"#{k} {v}" for k, v in result["top_tags"].items())))
        click.echo(f"Index      {printable(result['index_path'])}  {result['index_bytes'] / 1e6:.1f} MB, schema v{result['schema_version']}")
        click.echo(f"Search     {result['search_mode']}")
        click.echo(printable(f"Semantic   {vector_summary(result['semantic'])}"))
        for item in result["parse_problems"]:
            click.echo(click.style(printable(f"problem    {item['path']}: {item['problem']}"), fg="yellow"))
        for path in result["conflicts"]:
            click.echo(click.style(f"conflict   {printable(path)}", fg="yellow"))
        for memory_id, paths in result["duplicate_ids"].items():
            click.echo(click.style(printable(f"duplicate  {memory_id}: {', '.join(paths)}"), fg="yellow"))

    emit(result, human)


EXPORT_FORMATS = ("json", "mcp-knowledge-graph")  # json: this tool's own; transfer.formats.EXPORT_FORMATS


@cli.command()
@common
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), default="-",
              help="File to write (default: standard output).")
@click.option("-n", "--namespace", default=None, help="Only this namespace.")
@click.option("--format", "export_format", type=click.Choice(EXPORT_FORMATS), default="json", show_default=True,
              help="json: this tool's backup. mcp-knowledge-graph: the MCP reference memory server's memory.jsonl.")
@handle_errors
def export(output: str, namespace: str | None, export_format: str) -> None:
    """Write every memory out: a JSON backup, or a memory.jsonl.

    Each item has the front matter as written, the body, and the file's raw text,
    which import writes back byte for byte. --format mcp-knowledge-graph writes one
    entity a line (name, entityType, observations), then the relations.

    \b
    Examples:
      agent-memory export -o backup.json
      agent-memory export --format mcp-knowledge-graph -o memory.jsonl
    """
    with open_vault() as vault:
        if export_format == "json":
            items: list[Any] = list(vault.export_memories(namespace=namespace))
        else:
            items = vault.export_memories(namespace=namespace, format=export_format)
    if export_format == "json":
        text = json.dumps(items, ensure_ascii=False, indent=2) + "\n"
        what = f"{len(items)} memories"
    else:
        text = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in items)
        entities = sum(1 for record in items if record["type"] == "entity")
        what = f"{entities} entities and {len(items) - entities} relations"
    if output == "-":
        click.echo(text, nl=False)
    else:
        Path(output).write_text(text, encoding="utf-8")
        click.echo(f"Exported {what} to {output}", err=True)


# transfer.formats.FORMATS, not imported on every start (tests/test_importers.py checks they agree)
IMPORT_FORMATS = ("mcp-knowledge-graph", "mcp-memory-vault", "memory-mcp", "agentmemory")


@contextmanager
def _source_file(source: str) -> Iterator[Path]:
    """The path an importer reads: ``source``, or for ``-`` standard input copied into a
    temporary file (an importer reads a file, and may look at its first bytes)."""
    if source != "-":
        yield Path(source)
        return
    import tempfile

    with tempfile.TemporaryDirectory(prefix="agent-memory-import-") as folder:
        path = Path(folder) / "stdin"
        path.write_bytes(sys.stdin.buffer.read())
        yield path


@cli.command(name="import")
@common
@click.option("--from", "source_format", type=click.Choice(IMPORT_FORMATS), default=None,
              help="The file is another memory server's: mcp-knowledge-graph (memory.jsonl), "
                   "mcp-memory-vault (its export JSON), memory-mcp (its memory.db, or JSON as its tools return "
                   "it) or agentmemory (its .memory/ folder, with memories.db beside it).")
@click.argument("source", type=click.Path(allow_dash=True))
@handle_errors
def import_(source: str, source_format: str | None) -> None:
    """Import a JSON array written by export, all or nothing.

    Duplicates are skipped. The file may hold any number of memories (the MCP tool
    takes 500 per call); they are checked, then written, in one all-or-nothing pass.
    With --from, the file is another memory server's and keeps its dates, types and
    links; importing it again updates what changed there and adds nothing twice,
    never undoes an edit made here since, and does not bring back what was forgotten.

    \b
    Examples:
      agent-memory import backup.json --dir ~/new-vault
      agent-memory import --from mcp-knowledge-graph memory.jsonl
      agent-memory import --from agentmemory .memory
    """
    if source_format is not None:
        with _source_file(source) as path, open_vault() as vault, progress_bar() as progress:
            result = vault.import_memories(path, progress=progress, format=source_format)
        _import_summary(result)
        return
    from .limits import load_json

    raw = _decoded(sys.stdin.buffer.read(), "standard input") if source == "-" else _read_text(source)
    items = load_json(raw, "standard input" if source == "-" else source)
    with open_vault() as vault, progress_bar() as progress:
        result = vault.import_memories(items, progress=progress)
    _import_summary(result)


def _import_summary(result: Any) -> None:
    def human() -> None:
        click.echo(f"Imported {result['imported']}, updated {result['updated']}, unchanged {result['unchanged']}, "
                   f"expired {result['expired']}, links {result['links']}; skipped {result['duplicates']} duplicates.")
        if result["forgotten"]:
            click.echo(f"  {result['forgotten']} forgotten here since an earlier import: not brought back "
                       "(agent-memory restore ID does that)")
        if result["kept"]:
            click.echo(f"  {result['kept']} edited here since the last import: kept as they are "
                       "(the source's changes to them were not applied)")
        for rel in result["paths"][:IMPORT_PATHS_SHOWN]:
            click.echo(f"  wrote {printable(rel)}")
        if len(result["paths"]) > IMPORT_PATHS_SHOWN:
            click.echo(f"  … and {len(result['paths']) - IMPORT_PATHS_SHOWN} more (--json lists them all)")

    emit(result, human)


IMPORT_PATHS_SHOWN = 20


def _read_text(path: str) -> str:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise click.ClickException(f"Cannot read {path}: {exc.strerror}.") from exc
    return _decoded(data, path)


def _decoded(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise click.ClickException(f"{where} is not UTF-8 text (byte {exc.start}); save it as UTF-8 and import it "
                                   "again. Nothing was imported.") from None


@cli.command()
@common
@click.option("--older-than", "older_than", type=float, default=30, show_default=True,
              help="Remove what has been in .trash/ longer than this many days.")
@handle_errors
def gc(older_than: float) -> None:
    """Empty .trash/ of what the tool put there 30+ days ago.

    Also moves expired memories there.

    \b
    Example:
      agent-memory gc --older-than 7
    """
    with open_vault() as vault:
        result = vault.gc(older_than_days=older_than)

    def human() -> None:
        for rel in result["removed"]:
            click.echo(f"removed {printable(rel)}")
        click.echo(f"Removed {len(result['removed'])} files from the trash; kept {result['kept']}; "
                   f"moved {result['expired_moved']} expired memories there.")
        if "note" in result:
            click.echo(printable(result["note"]), err=True)

    emit(result, human)


@cli.command()
@common
@click.option("--apply", "apply_ids", multiple=True, metavar="RECORD",
              help="Let a record doctor lists as not acted on act (it is yours: from another of your machines, or "
                   "your state folder was lost). Repeatable.")
@click.option("--discard", "discard_ids", multiple=True, metavar="RECORD",
              help="Delete a record doctor lists as not acted on (it is not yours). Repeatable.")
@handle_errors
def doctor(apply_ids: tuple[str, ...] = (), discard_ids: tuple[str, ...] = ()) -> None:
    """Read-only health check; exits 1 when something needs attention.

    With --apply or --discard it decides about records the tool set aside instead (the
    "records" check lists them, with what applying each would do).

    \b
    Examples:
      agent-memory doctor
      agent-memory doctor --apply move-3fa2c1d0e9b8
      agent-memory doctor --discard trash-91be0c44a7d2
    """
    if apply_ids or discard_ids:
        _decide_records(apply_ids, discard_ids)
        return
    from .vault.doctor import diagnose

    checks = diagnose(locate_vault(settings().dir))

    def human() -> None:
        for check in checks:
            mark = click.style("[  ok]", fg="green") if check.ok else click.style("[fail]", fg="red")
            click.echo(f"{mark} {check.name}: {printable(check.detail)}")
            for item in check.items[:50]:
                click.echo(f"       {printable(item)}")
            if len(check.items) > 50:
                click.echo(f"       … and {len(check.items) - 50} more")

    emit({"ok": all(c.ok for c in checks), "checks": [c.to_dict() for c in checks]}, human)
    if not all(c.ok for c in checks):
        sys.exit(1)


def _decide_records(apply_ids: tuple[str, ...], discard_ids: tuple[str, ...]) -> None:
    """``doctor --apply`` / ``--discard``: one library call per record, in the order given."""
    from .trust import records

    both = set(apply_ids) & set(discard_ids)
    if both:
        raise click.UsageError(f"{', '.join(sorted(both))}: give a record to --apply or to --discard, not both.")
    done: dict[str, list[str]] = {"applied": [], "discarded": []}
    with open_vault() as vault:
        for rid in apply_ids:
            done["applied"].append(records.apply(vault, rid.strip()))
        for rid in discard_ids:
            done["discarded"].append(records.discard(vault, rid.strip()))

    def human() -> None:
        for line in done["applied"] + done["discarded"]:
            click.echo(printable(line))

    emit(done, human)


@cli.command()
@common
@click.option("--http", is_flag=True, help="Serve streamable HTTP instead of stdio.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address for --http.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535),
              help="Port for --http (0: any free one; the log names it).")
@click.option("--token", default=None, envvar="AGENT_MEMORY_TOKEN", help="Bearer token for --http.")
@click.option("--token-file", default=None, type=click.Path(dir_okay=False), help="File holding the bearer token.")
@click.option("--max-sessions", default=100, show_default=True, type=click.IntRange(min=1),
              help="Open --http sessions at most (per token too); a new one ends the session idle longest.")
@click.option("--session-idle-timeout", default=300.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Seconds an --http session may send no request (an open event stream does not count) before "
                   "it ends.")
@click.option("--request-timeout", default=20.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Seconds from connecting (or from a request's first byte) until the whole request is in; "
                   "else 408 and the connection closes. Also how long a client may stop reading.")
@click.option("--keep-alive", default=75, show_default=True, type=click.IntRange(min=1),
              help="Seconds an idle --http connection stays open (sent as Keep-Alive: timeout=N).")
@click.option("--max-connections", default=None, type=click.IntRange(min=1),
              help="Open --http connections at most; a new one closes the one waiting longest for a request "
                   "[default: 1000, or fewer to fit the open-file limit].")
@click.option("--allow-origin", "allow_origins", multiple=True, metavar="ORIGIN",
              help="Also accept requests from web pages on ORIGIN, e.g. http://localhost:6274 (repeatable). "
                   "Otherwise a browser's Origin must be this server's own host and port.")
@click.option("--git-commit", is_flag=True,
              help="Commit each tool write to the vault's git repository (as the git.commit setting does).")
@handle_errors
def serve(http: bool = False, host: str = "127.0.0.1", port: int = 8765, token: str | None = None,
          token_file: str | None = None, max_sessions: int = 100, session_idle_timeout: float = 300.0,
          request_timeout: float = 20.0, keep_alive: int = 75, max_connections: int | None = None,
          allow_origins: tuple[str, ...] = (), git_commit: bool = False) -> None:
    """Run the MCP server (stdio by default).

    \b
    Examples:
      agent-memory serve --dir ~/.memory
      agent-memory serve --http --token-file ~/.memory-token
      agent-memory serve --http --port 0 --allow-origin http://localhost:6274
      agent-memory serve --git-commit
    """
    from .server import run  # imports mcp: only here
    from .server.transport import HttpLimits

    limits = HttpLimits(max_sessions=max_sessions, session_idle_timeout=session_idle_timeout,
                        request_timeout=request_timeout, keep_alive=keep_alive, max_connections=max_connections,
                        allow_origins=allow_origins)
    run(vault_path(), http=http, host=host, port=port, token=token, token_file=token_file, limits=limits,
        git_commit=git_commit)


@cli.command()
@common
@handle_errors
def sync() -> None:
    """Commit pending tool writes, pull, update the index, push.

    Pulls by rebase (a merge when the rebase conflicts), keeping your uncommitted
    edits (--autostash). Only a vault that is its repository's top folder, or one
    whose settings say [git] subfolder = true. A conflict is left for you to resolve.

    \b
    Example:
      agent-memory sync --json
    """
    from .errors import SyncConflict

    with open_vault() as vault:
        try:
            result = vault.sync()
        except SyncConflict as exc:
            if settings().json:
                click.echo(json.dumps({**exc.result, "error": str(exc)}, ensure_ascii=False, indent=2))
            raise

    def human() -> None:
        click.echo(f"Synced {result['branch']} with {result['upstream']}: committed {result['committed']} tool "
                   f"write{'s' if result['committed'] != 1 else ''}, pulled {result['pulled']} commit"
                   f"{'s' if result['pulled'] != 1 else ''} ({result['method']}), pushed {result['pushed']}; "
                   f"{result['indexed']} file{'s' if result['indexed'] != 1 else ''} reindexed.")
        if result["merged"]:
            click.echo(printable(f"  merged: {', '.join(result['merged'])}"))
        if result.get("split"):
            click.echo(printable(f"  two memories had one path; theirs kept as: {', '.join(result['split'])}"))
        if result.get("tracked_private"):
            click.echo(printable(f"  git tracks {', '.join(result['tracked_private'][:5])}"
                                 f"{' and more' if len(result['tracked_private']) > 5 else ''}: this machine's index "
                                 "and trash, never read as records, committed or pushed by agent-memory; take them "
                                 "out of git: git rm -r --cached .index .trash, then commit"), err=True)
        for item in result.get("withheld", []):
            click.echo(printable(f"  not committed or pushed: {item} — remove it from the file (or approve its "
                                 "fingerprint in secrets.allow), then sync again"), err=True)
        if "note" in result:
            click.echo(printable(result["note"]))

    emit(result, human)


@cli.command()
@common
@click.option("--debounce", default=0.05, show_default=True, type=click.FloatRange(min=0),
              help="Seconds a file must be quiet before it is indexed (a save is several events).")
@click.option("--sweep-interval", default=60.0, show_default=True, type=click.FloatRange(min=0.1),
              help="Seconds between full reconciles that catch anything the events missed.")
@handle_errors
def watch(debounce: float, sweep_interval: float) -> None:
    """Keep the index in step with the files until Ctrl-C.

    Prints one line per change; a file that cannot be read as written (broken YAML)
    is reported as a problem.

    \b
    Example:
      agent-memory watch
    """
    import signal
    import threading
    import time

    from .watch.watcher import Change, Watcher  # imports watchdog: only here

    as_json = settings().json

    def log(change: Change) -> None:
        if as_json:
            click.echo(json.dumps({"action": change.action, "path": change.path, "detail": change.detail}))
        else:
            what = f"{change.path}: {change.detail}" if change.path and change.detail else change.path or change.detail
            click.echo(f"{time.strftime('%H:%M:%S')} {change.action:<8} {printable(what)}")

    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    with Vault(vault_path(), sync=False) as vault, \
            Watcher(vault, debounce=debounce, sweep_interval=sweep_interval, on_change=log):
        click.echo(f"Watching {vault.root} (Ctrl-C to stop)", err=True)
        try:
            while not stopped.wait(1.0):
                pass
        except KeyboardInterrupt:
            pass
    click.echo("Stopped.", err=True)


def main() -> None:
    cli(obj=Settings())


if __name__ == "__main__":
    main()
