"""Finding memories: search (a plain question) and list (newest first)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import click

from ..limits import MAX_LIMIT
from ..models import ListResult
from ..recall.engine import MATCH_MODES
from .options import common, open_vault
from .output import emit, marked_snippet, print_summary, printable, progress_bar
from .paths import read_path
from .words import cli_steps, cli_words, handle_errors


@click.command()
@common
@click.argument("words", nargs=-1, required=True, metavar="QUERY...")
@click.option("-n", "--namespace", default=None, help="Only this namespace.")
@click.option("-t", "--tag", "tags", multiple=True, help="Only memories with this tag (repeat: all of them).")
@click.option("--limit", default=10, show_default=True, type=int, help="Most hits to return (1-100).")
# Not a click.Choice: a bad value is bad input (the vault's message, exit 1), not a usage error (exit 2).
@click.option("--match", metavar="[" + "|".join(MATCH_MODES) + "]", default="auto", show_default=True,
              help="auto: all terms, else any; all; any.")
@click.option("--since", default=None, help="Only memories created on or after this date.")
@click.option("--until", default=None, help="Only memories created before this date.")
@click.option("--path", "path_prefix", default=None, help="Only files under this folder (from the current folder when inside the vault; :/FOLDER from the vault root).")
@click.option("--offset", default=0, type=int, help="Skip this many hits (for paging).")
@click.option("--profile", default=None, metavar="[facts|conversation|notes]",
              help="Ranking profile (default: the vault's recall.profile setting, else chosen from what it holds).")
@click.option("--explain", is_flag=True, help="Also print the SQL run and where each hit's score came from.")
@click.option("--depth", default=0, type=int, help="Also show memories linked to the hits, up to this many links away (0-3).")
@click.option("--type", "kind", default=None, help="Only memories of this type.")
@click.option("--min-importance", type=float, default=None, help="Only memories with at least this importance (0-10).")
@click.option("--semantic/--no-semantic", default=None,
              help="Rank by meaning when no memory holds every word (default: recall.semantic, on with the extra).")
@click.option("-w", "--where", "where", multiple=True, metavar="KEY=VALUE",
              help="Only memories whose front-matter property KEY equals VALUE (a list: holds it); KEY alone: has it. "
                   "Repeat: all must hold.")
@handle_errors
def search(words: tuple[str, ...], namespace: str | None, tags: tuple[str, ...], limit: int, match: str,
           since: str | None, until: str | None, path_prefix: str | None, offset: int, profile: str | None,
           explain: bool, depth: int, kind: str | None, min_importance: float | None, semantic: bool | None,
           where: tuple[str, ...]) -> None:
    """Recall memories with a plain question.

    Several words are one question, quoted or not: `search deploy billing` asks
    "deploy billing".

    \b
    Examples:
      agent-memory search "when does ACME prefer to deploy?"
      agent-memory search deploy billing
      agent-memory search deploys -t customer --json
      agent-memory search invoice --where project=acme
    """
    query = " ".join(words)
    with open_vault() as vault, progress_bar() as progress:
        if path_prefix is not None:
            path_prefix = read_path(vault.root, path_prefix, changes=False, folder=True).key
        result = vault.search(query, namespace=namespace, tags=list(tags), limit=limit, match=match,
                              since=since, until=until, path_prefix=path_prefix, offset=offset, profile=profile,
                              explain=explain, depth=depth, type=kind, min_importance=min_importance,
                              semantic=semantic, where=list(where), progress=cli_steps(progress))

    def human() -> None:
        if result.get("corrected"):
            fixes = ", ".join(f"{typed} -> {used}" for typed, used in result["corrected"].items())
            click.echo(click.style(f"Searched for corrected words: {printable(fixes)}", dim=True))
        if result.get("note"):
            click.echo(click.style(printable(cli_words(result["note"])), dim=True))
        for n, hit in enumerate(result["hits"], offset + 1):
            print_summary(n, hit)
            click.echo(f"   {marked_snippet(hit['snippet'], hit['highlights'])}")
        if "next_offset" in result:
            click.echo(click.style(f"more: --offset {result['next_offset']}", dim=True))
        if result.get("hint"):
            click.echo(printable(cli_words(result["hint"])))
        if "related" in result:
            linked = result["related"]
            click.echo(click.style(f"\nlinked (depth {linked['depth']}): {linked['count']}", dim=True))
            for node in linked["nodes"]:
                click.echo(f"  {node['distance']}  {printable(node['id'])}  {printable(node['title'])}  ({printable(node['path'])})")
            if linked.get("note"):
                click.echo(click.style(printable(cli_words(linked["note"])), dim=True))
        if "explain" in result:
            _print_explanation(result["explain"])

    emit(result, human)


def _pages(page: Callable[[int, int], ListResult], limit: int | None, offset: int) -> ListResult:
    """Up to ``limit`` memories from ``offset`` (every one when None), read a page of
    the library's most at a time: one result as if the library had no cap."""
    result = page(min(MAX_LIMIT, limit or MAX_LIMIT), offset)
    memories = list(result["memories"])
    while "next_offset" in result and (limit is None or len(memories) < limit):
        want = MAX_LIMIT if limit is None else min(MAX_LIMIT, limit - len(memories))
        result = page(want, result["next_offset"])
        memories.extend(result["memories"])
    combined = ListResult(total=result["total"], count=len(memories), offset=offset, memories=memories)
    if "next_offset" in result:
        combined["next_offset"] = result["next_offset"]
    return combined


def _print_explanation(explained: Mapping[str, Any]) -> None:
    click.echo(f"\nprofile {explained['profile']}; {len(explained['statements'])} statements:")
    for n, statement in enumerate(explained["statements"], 1):
        click.echo(f"{n:>3}. {printable(statement['sql'])}")
        click.echo(click.style(f"     params {printable(json.dumps(statement['params'], ensure_ascii=False))}", dim=True))
    click.echo("scores:")
    for n, scored in enumerate(explained["scores"], 1):
        parts = "  ".join(f"{name} {value:g}" for name, value in scored["parts"].items())
        click.echo(f"{n:>3}. {printable(scored['id'])}  score {scored['score']:g}  {parts}")


@click.command(name="list")
@common
@click.option("-n", "--namespace", default=None, help="Only this namespace.")
@click.option("-t", "--tag", "tags", multiple=True, help="Only memories with this tag (repeat: all of them).")
@click.option("--limit", default=20, show_default=True, type=int, help="How many (1 or more; read 100 at a time).")
@click.option("--all", "show_all", is_flag=True, help="Every memory (no --limit).")
@click.option("--offset", default=0, type=int, help="Skip this many (for paging).")
@click.option("--path", "path_prefix", default=None, help="Only files under this folder (from the current folder when inside the vault; :/FOLDER from the vault root).")
@click.option("--type", "kind", default=None, help="Only memories of this type.")
@click.option("--min-importance", type=float, default=None, help="Only memories with at least this importance (0-10).")
@click.option("--since", default=None,
              help="Only memories changed (hand edits too) since: a span back from now (7d, 24h, 2w) or a date.")
@click.option("--until", default=None, help="Only memories last changed before this (a span like 1d, or a date).")
@click.option("-w", "--where", "where", multiple=True, metavar="KEY=VALUE",
              help="Only memories whose front-matter property KEY equals VALUE (a list: holds it); KEY alone: has it. "
                   "Repeat: all must hold.")
@handle_errors
def list_(namespace: str | None, tags: tuple[str, ...], limit: int, show_all: bool, offset: int,
          path_prefix: str | None, kind: str | None, min_importance: float | None, since: str | None,
          until: str | None, where: tuple[str, ...]) -> None:
    """List memories, newest first.

    With --since or --until, by when each file last changed (a person's edit
    included), the latest change first.

    \b
    Examples:
      agent-memory list --tag customer --limit 50
      agent-memory list --all --path Projects | less
      agent-memory list --since 7d
      agent-memory list --where status=done --where project=acme
    """
    if limit < 1:  # bad input (exit 1), as the library's own checks are
        raise click.ClickException(f"--limit must be 1 or more (got {limit}); --all lists every memory.")
    with open_vault() as vault, progress_bar() as progress:
        if path_prefix is not None:
            path_prefix = read_path(vault.root, path_prefix, changes=False, folder=True).key

        def page(size: int, start: int) -> ListResult:
            return vault.list(namespace=namespace, tags=list(tags), limit=size, offset=start,
                              path_prefix=path_prefix, type=kind, min_importance=min_importance, since=since,
                              until=until, where=list(where), progress=cli_steps(progress))

        result = _pages(page, None if show_all else limit, offset)

    def human() -> None:
        for n, item in enumerate(result["memories"], offset + 1):
            print_summary(n, item)
            if since or until:
                click.echo(click.style(f"   changed {item.get('changed', '')}", dim=True))
        shown = f"{offset + 1}-{offset + result['count']}" if result["count"] else "0"
        more = f"; next: --offset {result['next_offset']}" if "next_offset" in result else ""
        click.echo(click.style(f"{shown} of {result['total']}{more}", dim=True))

    emit(result, human)
