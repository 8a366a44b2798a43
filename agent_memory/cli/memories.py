"""Commands on one memory: add, show, edit, forget, restore, link, unlink, mv, history."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..errors import InvalidInput, NotFound
from ..limits import MAX_SOURCE, MAX_TITLE

if TYPE_CHECKING:
    from ..vault.vault import Vault
from .options import common, open_vault
from .paths import ROOT_PREFIX, each, keys, looked_where, read_path, resolved, target_path
from .output import emit, id_and_path, plural, print_summary, printable
from .words import cli_words, handle_errors


class _ImportanceOrEmpty(click.ParamType):  # type: ignore[type-arg]  # generic in click's stubs only
    """A number, or '' (edit --importance '' removes the key, as --type '' does)."""

    name = "NUMBER|''"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float | str:
        if isinstance(value, float) or value == "":
            return value if isinstance(value, float) else ""
        try:
            return float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number (or '' to remove the importance).", param, ctx)


IMPORTANCE_OR_EMPTY = _ImportanceOrEmpty()


@click.command()
@common
@click.argument("words", nargs=-1, metavar="[CONTENT]...")
@click.option("-n", "--namespace", default="default", show_default=True, help="Namespace of the memory.")
@click.option("-t", "--tag", "tags", multiple=True, help="A tag (repeat for more).")
@click.option("--title", default="", help=f"Title, at most {MAX_TITLE} characters (default: the first words).")
@click.option("--source", default="", help=f"Where the fact came from, at most {MAX_SOURCE} characters.")
@click.option("--ttl-days", type=float, default=0, help="Expire after this many days (0: never).")
@click.option("--type", "kind", default=None, help="Kind of memory (fact, decision, lesson, procedure...).")
@click.option("--importance", type=float, default=None, help="How much it matters (0-10).")
@click.option("--batch", "batch", default=None, metavar="FILE",
              help="Remember each item of FILE (a JSON list of objects, or JSON Lines; - for stdin), each on its own.")
@handle_errors
def add(words: tuple[str, ...], namespace: str, tags: tuple[str, ...], title: str, source: str, ttl_days: float,
        kind: str | None, importance: float | None, batch: str | None) -> None:
    """Remember CONTENT; prints the new id.

    CONTENT - or none reads standard input; several words are one content, quoted or
    not (`add Priya works CET hours`). The file written is named on stderr.
    With --batch FILE, each object of FILE ({"content": ..., "namespace", "tags",
    "title", "source", "ttl_days", "type", "importance"}) is remembered on its own
    (at most 500): the ids print one a line, and an item refused is named with why.

    \b
    Examples:
      agent-memory add "Customer ACME prefers deploys on Fridays" -n support -t customer
      git log -1 --format=%B | agent-memory add -t release
      agent-memory add --batch facts.jsonl
    """
    content = " ".join(words) if words else None
    if batch is not None:
        if content is not None:
            raise InvalidInput("Give CONTENT or --batch FILE, not both.")
        _add_batch(batch)
        return
    if content in (None, "-"):
        if sys.stdin.isatty():  # not a pipe: a person who typed `agent-memory add` alone, and would see a hang
            click.echo("Type the memory, then Ctrl-D on a line of its own (or give it as CONTENT: "
                       "agent-memory add \"...\").", err=True)
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


def _batch_items(source: str) -> list[Any]:
    """A batch file's items: a JSON list, or one JSON object a line (JSON Lines)."""
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeError) as exc:
        raise InvalidInput(f"Cannot read {source}: {exc}. Give a JSON or JSON Lines file of memories.") from exc
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except ValueError as exc:
            raise InvalidInput(f"{source} is not valid JSON ({exc}); give a list of objects.") from exc
        return items if isinstance(items, list) else [items]
    items = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                items.append(json.loads(line))
            except ValueError as exc:
                raise InvalidInput(f"{source} line {number} is not JSON ({exc}); nothing was remembered.") from exc
    return items


def _add_batch(source: str) -> None:
    items = _batch_items(source)
    with open_vault() as vault:
        result = vault.remember_many(items)

    def human() -> None:
        for item in result["results"]:
            if item["ok"]:
                click.echo(printable(item["id"]))
        click.echo(f"{result['stored']} stored, {result['deduplicated']} already remembered, "
                   f"{result['failed']} refused", err=True)

    emit(result, human)
    for item in result["results"]:
        if not item["ok"]:
            click.echo(printable(f"agent-memory: error: item {item['index'] + 1}: {cli_words(item['error'])}"), err=True)
    if result["failed"]:
        sys.exit(1)


@click.command()
@common
@click.argument("memory_id")
@handle_errors
def show(memory_id: str) -> None:
    """Show one memory (by id, note name or path).

    A path is from the current folder when it is inside the vault; :/path is from
    the vault root.

    \b
    Examples:
      agent-memory show people/priya.md
      agent-memory show :/people/priya.md
    """
    with open_vault() as vault:
        memory = resolved(vault.root, memory_id, changes=False, call=vault.get)

    def human() -> None:
        print_summary(None, memory)
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


@click.command()
@common
@click.argument("memory_id")
@click.option("--content", default=None,
              help="New content: replaces the whole body as it is now (the old one is kept in .trash/).")
@click.option("--append", default=None, help="Text to add at the end of the content.")
@click.option("--replace", "replace", nargs=2, default=None, metavar="OLD NEW",
              help="Replace OLD (which must occur exactly once) with NEW.")
@click.option("--prepend", default=None, help="Text to add at the start of the content (after a '# Title' line).")
@click.option("--replace-section", "section", nargs=2, default=None, metavar="HEADING TEXT",
              help="Replace what the section under HEADING ('## Status', or 'Status' at any level) holds with TEXT; "
                   "the heading and the other sections stay.")
@click.option("--add-tag", "add_tags", multiple=True, help="Tag to add (repeatable).")
@click.option("--remove-tag", "remove_tags", multiple=True, help="Tag to remove (repeatable).")
@click.option("-n", "--namespace", default=None, help="Move to this namespace.")
@click.option("--title", default=None, help=f"New title (at most {MAX_TITLE} characters).")
@click.option("--source", default=None, help=f"New source (at most {MAX_SOURCE} characters).")
@click.option("--ttl-days", type=float, default=None, help="Expire this many days from now (0: never).")
@click.option("--type", "kind", default=None, help="New type ('' removes it).")
@click.option("--importance", type=IMPORTANCE_OR_EMPTY, default=None, help="New importance (0-10; '' removes it).")
@click.option("--expected-version", default=None, help="Refuse if the file changed since this version.")
@handle_errors
def edit(memory_id: str, content: str | None, append: str | None, replace: tuple[str, str] | None,
         add_tags: tuple[str, ...], remove_tags: tuple[str, ...], namespace: str | None, title: str | None,
         source: str | None, ttl_days: float | None, kind: str | None, importance: float | str | None,
         expected_version: str | None, prepend: str | None, section: tuple[str, str] | None) -> None:
    """Change a memory, or open it in $EDITOR.

    Only the front-matter keys that change are rewritten. With no change options it
    opens the file in $EDITOR (the file is the memory: the index follows when the
    editor exits).

    \b
    Examples:
      agent-memory edit people/priya.md --append "Prefers calls after 3pm."
      agent-memory edit plans/q3.md --replace-section "## Status" "Shipped on 2026-07-20."
      agent-memory edit 01m8r9k34bnrxpbt --add-tag friday
      agent-memory edit people/priya.md
    """
    flags = (content, append, replace, namespace, title, source, ttl_days, kind, importance, prepend, section)
    with open_vault() as vault, looked_where(vault.root, [reading := read_path(vault.root, memory_id, changes=True)]):
        memory_id = reading.key
        if all(f is None for f in flags) and not add_tags and not remove_tags:
            _open_in_editor(vault, memory_id)
            return
        if (content is not None or section is not None) and not expected_version:
            # A person typing --content means the body as it is now: that version is theirs.
            expected_version = vault.get(memory_id)["version"]
        old, new = replace if replace else (None, None)
        heading, section_text = section if section else (None, None)
        result = vault.update(memory_id, content=content, append=append, replace_old=old, replace_new=new,
                              add_tags=list(add_tags), remove_tags=list(remove_tags), namespace=namespace,
                              title=title, source=source, ttl_days=ttl_days, type=kind, importance=importance,
                              expected_version=expected_version, prepend=prepend, replace_section=heading,
                              section_content=section_text)
    emit(result, lambda: click.echo(f"{'Updated' if result['changed'] else 'Unchanged'} {id_and_path(result['memory'])}"))


def _open_in_editor(vault: Vault, memory_id: str) -> None:
    """``$VISUAL``/``$EDITOR`` (else click's default) on the memory's file itself."""
    memory = vault.get(memory_id)
    try:
        click.edit(filename=str(vault.root / memory["path"]))
    except click.ClickException as exc:  # no such editor, or it failed: nothing was changed by this command
        raise click.ClickException(printable(
            f"{exc.message.rstrip('.')}. With no change option, edit opens the file in $VISUAL or $EDITOR: set one to "
            "an editor you have, or change it with --append, --content or --replace.")) from exc
    vault.reconcile_path(memory["path"])
    click.echo(f"Edited {id_and_path(memory)}", err=True)


@click.command()
@common
@click.argument("memory_ids", nargs=-1, required=True)
@click.option("--expected-version", default=None, help="Refuse if the file changed since this version (one ID only).")
@click.option("--dry-run", is_flag=True, help="Only say what would be forgotten; change nothing.")
@handle_errors
def forget(memory_ids: tuple[str, ...], expected_version: str | None, dry_run: bool) -> None:
    """Move memories to .trash/ (kept 30 days), each on its own.

    An ID that cannot be forgotten (not found, a symlink, saved meanwhile) is named
    with its reason on stderr while the others go; the exit code is then 1.

    \b
    Examples:
      agent-memory forget 01m8r9k34bnrxpbt
      agent-memory forget 01m8r9k34bnrxpbt people/priya.md --dry-run
    """
    with open_vault() as vault, looked_where(vault.root, readings := each(vault.root, list(memory_ids), changes=True)):
        try:
            result = vault.forget_many(keys(readings), expected_version=expected_version, dry_run=dry_run)
        except NotFound as exc:
            for reading in readings:
                if exc.memory_id in (reading.key, reading.typed):
                    _already_forgotten(vault, [reading.here, reading.key] if reading.here else [reading.key])
            raise

    def human() -> None:
        for item in result["memories"]:
            if dry_run:
                click.echo(f"Would forget {id_and_path(item)}")
            else:
                click.echo(f"Forgot {id_and_path(item)}: moved to {printable(item['trashed_to'])}")
        if dry_run:
            click.echo(click.style(f"{plural(result['count'], 'memory', 'memories')} would be forgotten; nothing "
                                   "was changed", dim=True))

    emit(result, human)
    for failure in result["failed"]:
        click.echo(printable(f"agent-memory: error: {failure['memory_id']}: {cli_words(failure['error'])}"), err=True)
    if result["failed"]:
        sys.exit(1)


@click.command()
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
        result = vault.restore(_trash_key(vault, key))
    emit(result, lambda: click.echo(printable(f"Restored {result['id']} to {result['path']} ({result['reason']})")))


def _already_forgotten(vault: Vault, keys: list[str]) -> None:
    """A memory not found that the trash holds as forgotten or expired, under any of
    ``keys`` (its readings: from here, from the vault root): say so, and how to bring it
    back, instead of "not found" (nothing was forgotten: all or nothing)."""
    entries = [e for e in vault.trash_list()
               if {e["id"], e["source"]} & set(keys) and e["reason"] in ("forgotten", "expired")]
    if entries:
        entry = max(entries, key=lambda e: e["at"])
        # Its id where it has one of its own; else its old path, from the vault root (works from anywhere).
        key = entry["id"] if entry["id"] and entry["id"] != entry["source"] else ROOT_PREFIX + entry["source"]
        raise click.ClickException(printable(
            f"{entry['source']} was {entry['reason']} already ({entry['at']}; it is in {entry['trash']}), so "
            f"nothing was forgotten. `agent-memory restore {key}` brings it back."))


def _trash_key(vault: Vault, typed: str) -> str:
    """A forgotten note's old path as typed: from the current folder when the trash
    holds a note that was there, :/path from the vault root; else as typed (an id, a
    vault-relative old path or a trash path)."""
    if typed.startswith(ROOT_PREFIX):
        return typed[len(ROOT_PREFIX):]
    reading = read_path(vault.root, typed, changes=False)
    if reading.here and any(entry["source"] == reading.here for entry in vault.trash_list()):
        return reading.here
    return reading.key


def _print_trash(entries: list[Any]) -> None:
    if not entries:
        click.echo("Nothing in the trash that the tool put there.")
    for entry in entries:
        click.echo(printable(f"{entry['at']}  {entry['reason']:<9}  {entry['trash']}  (from {entry['source']})"))


@click.command()
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
    with open_vault() as vault, looked_where(vault.root, readings := [
            read_path(vault.root, memory_id, changes=True), read_path(vault.root, target_id, changes=False)]):
        result = vault.link(readings[0].key, readings[1].key, relation=relation)
    emit(result, lambda: click.echo(printable(
        f"{'Linked' if result['changed'] else 'Already linked'} {result['source']['path']} "
        f"-{result['relation']}-> {result['link']}")))


@click.command()
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
    with open_vault() as vault, looked_where(vault.root, readings := [
            read_path(vault.root, memory_id, changes=True), read_path(vault.root, target_id, changes=False)]):
        result = vault.unlink(readings[0].key, readings[1].key, relation=relation)
    emit(result, lambda: click.echo(printable(
        f"Unlinked {result['source']['path']} -{result['relation']}-> {', '.join(result['removed'])}"
        if result["changed"] else f"Not linked: {result['source']['path']} has no {result['relation']} link to {target_id}")))


@click.command(name="mv")
@common
@click.argument("memory_id")
@click.argument("new_path")
@handle_errors
def mv(memory_id: str, new_path: str) -> None:
    """Rename or move a note, and rewrite the links to it.

    A bare NEW_PATH (no /) renames the note in its own folder; a path with a folder
    is from the current folder when that is inside the vault, :/path from the vault
    root. Every [[link]] to the note across the vault is rewritten in place (|alias,
    #heading and ! embeds kept), all files or none; an existing file is never
    overwritten. A note without an id changes its id (its path).

    \b
    Examples:
      agent-memory mv "Kessel Run" "Kessel Run (ship)"
      agent-memory mv "Kessel Run.md" ":/places/Kessel Run.md"
      agent-memory mv people/priya.md archive/
    """
    with open_vault() as vault, looked_where(vault.root, [reading := read_path(vault.root, memory_id, changes=True)]):
        source = vault.get(reading.key)
        result = vault.move(source["path"], target_path(vault.root, new_path, source["path"]))

    def human() -> None:
        click.echo(printable(f"Moved {result['old_path']} -> {result['new_path']}"))
        if result["old_id"] != result["new_id"]:
            click.echo(printable(f"id {result['old_id']} -> {result['new_id']}"))
        for item in result["rewritten"]:
            click.echo(printable(f"  rewrote {item['links']} link{'s' if item['links'] != 1 else ''} in {item['path']}"))

    emit(result, human)


@click.command()
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
        result = resolved(vault.root, memory_id, changes=False, call=lambda key: vault.history(key, limit=limit))

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
            click.echo(printable(cli_words(result["note"])))

    emit(result, human)
