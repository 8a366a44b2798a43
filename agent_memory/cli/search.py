"""Finding memories: search (a plain question) and list (newest first)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import click

from ..recall.engine import MATCH_MODES
from .options import common, open_vault
from .output import emit, print_summary, printable
from .words import cli_words, handle_errors


@click.command()
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
            click.echo(click.style(printable(cli_words(result["note"])), dim=True))
        for n, hit in enumerate(result["hits"], offset + 1):
            print_summary(n, hit)
            click.echo(f"   {printable(hit['snippet'])}")
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
            print_summary(n, item)
        shown = f"{offset + 1}-{offset + result['count']}" if result["count"] else "0"
        more = f"; next: --offset {result['next_offset']}" if "next_offset" in result else ""
        click.echo(click.style(f"{shown} of {result['total']}{more}", dim=True))

    emit(result, human)
