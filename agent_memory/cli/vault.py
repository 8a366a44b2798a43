"""Commands on the whole vault: init, stats, reindex, gc, doctor and watch."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from .options import common, global_options, open_vault, vault_path
from .output import emit, plural, printable, progress_bar
from .words import cli_steps, cli_words, handle_errors


@click.command()
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
    from ..disk.layout import VAULT_DIRNAME
    from ..vault.vault import Vault

    target = Path(path or global_options().dir or os.environ.get("AGENT_MEMORY_DIR") or VAULT_DIRNAME)
    with Vault.init(target, memories_folder=memories_folder) as vault:
        if vault.is_obsidian_vault and not vault.settings.memories_folder:
            click.echo(  # a proposal, not a change: the vault is the person's
                f"This is an Obsidian vault: to keep new memories in one folder instead of YYYY/ folders at its "
                f"top, run `agent-memory --dir {printable(vault.root)} init --memories-folder Agent`.", err=True)
        emit({"vault": str(vault.root)}, lambda: click.echo(f"Vault ready at {printable(vault.root)}"))


@click.command()
@common
@handle_errors
def reindex() -> None:
    """Rebuild the index from the files alone.

    \b
    Example:
      agent-memory reindex
    """
    from ..vault.vault import Vault

    vault = Vault(vault_path(), sync=False)
    with vault, progress_bar() as progress:
        report = vault.reindex(progress=progress)

    def human() -> None:
        click.echo(f"Indexed {plural(report['added'], 'file')} in {printable(vault.root)} "
                   f"({plural(report['expired'], 'expired memory', 'expired memories')} moved to .trash/).")
        if report.get("embedded"):  # nothing to say when every vector was already there
            click.echo(f"Embedded {plural(report['embedded'], 'memory', 'memories')} for semantic recall (the others "
                       "kept their vectors).")
        for problem in report["problems"]:
            click.echo(click.style(printable(f"  {problem['path']}: {problem['problem']}"), fg="yellow"))

    emit(report, human)


@click.command()
@common
@handle_errors
def stats() -> None:
    """Totals, tags, problems and the index of the vault.

    Totals, namespaces, top tags, TTLs, problems, index size and search mode.

    \b
    Example:
      agent-memory stats --json
    """
    from ..semantic.status import vector_summary

    with open_vault() as vault, progress_bar() as progress:
        result = vault.stats(progress=cli_steps(progress))

    def human() -> None:
        click.echo(f"Vault      {printable(result['vault'])}")
        click.echo(f"Memories   {result['total']}  ({result['with_ttl']} with a TTL, {result['trash_files']} in .trash/)")
        click.echo(printable("Namespaces " + ", ".join(f"{k} {v}" for k, v in result["namespaces"].items())))
        click.echo(printable("Top tags   " + ", ".join(f"#{k} {v}" for k, v in result["top_tags"].items())))
        click.echo(f"Index      {printable(result['index_path'])}  {result['index_bytes'] / 1e6:.1f} MB, schema v{result['schema_version']}")
        click.echo(f"Search     {result['search_mode']}")
        click.echo(printable(f"Semantic   {vector_summary(result['semantic'])}"))
        chosen = result["recall_profile"]
        how = "recall.profile" if chosen["set_by"] == "setting" else chosen["reason"]
        click.echo(printable(f"Profile    {chosen['name']} ({how})"))
        for item in result["parse_problems"]:
            click.echo(click.style(printable(f"problem    {item['path']}: {item['problem']}"), fg="yellow"))
        for path in result["conflicts"]:
            click.echo(click.style(f"conflict   {printable(path)}", fg="yellow"))
        for memory_id, paths in result["duplicate_ids"].items():
            click.echo(click.style(printable(f"duplicate  {memory_id}: {', '.join(paths)}"), fg="yellow"))

    emit(result, human)


@click.command()
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
    with open_vault() as vault, progress_bar() as progress:
        result = vault.gc(older_than_days=older_than, progress=progress)

    def human() -> None:
        for rel in result["removed"]:
            click.echo(f"removed {printable(rel)}")
        click.echo(f"Removed {plural(len(result['removed']), 'file')} from the trash (older than "
                   f"{older_than:g} days); kept {result['kept']}; moved "
                   f"{plural(result['expired_moved'], 'expired memory', 'expired memories')} there.")
        if "note" in result:
            click.echo(printable(cli_words(result["note"])), err=True)

    emit(result, human)


SHOWN = 10  # what doctor lists of each check without --all


@click.command()
@common
@click.option("--apply", "apply_ids", multiple=True, metavar="RECORD",
              help="Let a record doctor lists as not acted on act (it is yours: from another of your machines, or "
                   "your state folder was lost). Repeatable.")
@click.option("--discard", "discard_ids", multiple=True, metavar="RECORD",
              help="Delete a record doctor lists as not acted on (it is not yours). Repeatable.")
@click.option("--all", "show_all", is_flag=True, help=f"List everything each check found (else the first {SHOWN}).")
@handle_errors
def doctor(apply_ids: tuple[str, ...] = (), discard_ids: tuple[str, ...] = (), show_all: bool = False) -> None:
    """Read-only health check of the installation and the vault.

    Exit status: 0 when nothing needs attention ([warn] lines are worth a look but no
    problem), 1 when a check failed. Each check lists the first few things it found;
    --all lists every one (broken links grouped by the note that holds them).

    With --apply or --discard it decides about records the tool set aside instead (the
    "records" check lists them, with what applying each would do).

    \b
    Examples:
      agent-memory doctor
      agent-memory doctor --all | less
      agent-memory doctor --apply move-3fa2c1d0e9b8
      agent-memory doctor --discard trash-91be0c44a7d2
    """
    from ..disk.layout import locate_vault

    if apply_ids or discard_ids:
        _decide_records(apply_ids, discard_ids)
        return
    from ..vault.doctor import diagnose

    checks = diagnose(locate_vault(global_options().dir))

    def human() -> None:
        for check in checks:
            _print_check(check, show_all)
        failed = [c.name for c in checks if not c.ok]
        click.echo(f"\n{len(failed)} of {len(checks)} checks failed: {', '.join(failed)}." if failed
                   else f"\nAll {len(checks)} checks passed.")

    emit({"ok": all(c.ok for c in checks), "checks": [c.to_dict() for c in checks]}, human)
    if not all(c.ok for c in checks):
        sys.exit(1)


def _print_check(check: Any, show_all: bool) -> None:
    """One check: its mark and sentence, then what it found (by note where grouped),
    the first ``SHOWN`` unless ``show_all``, and how many more --all would list."""
    if not check.ok:
        mark = click.style("[fail]", fg="red")
    else:
        mark = click.style("[warn]", fg="yellow") if check.warn else click.style("[  ok]", fg="green")
    click.echo(f"{mark} {check.name}: {printable(check.detail)}")
    if check.warn and check.ok and not show_all:  # worth a look, no problem: counted, listed on asking
        if check.items:
            click.echo(click.style("       (`agent-memory doctor --all` lists them)", dim=True))
        return
    if check.groups:
        notes = sorted(check.groups.items())
        for rel, lines in notes if show_all else notes[:SHOWN]:
            click.echo(f"       {printable(rel)}")
            for line in lines:
                click.echo(f"         {printable(_link_line(line.removeprefix(rel + ': ')))}")
        hidden, what = len(notes) - SHOWN, "notes"
    else:
        for item in check.items if show_all else check.items[:SHOWN]:
            click.echo(f"       {printable(item)}")
        hidden, what = len(check.items) - SHOWN, "more"
    if not show_all and hidden > 0:
        click.echo(click.style(f"       … and {hidden} more {what if what == 'notes' else ''}".rstrip()
                               + " (`agent-memory doctor --all` lists them all)", dim=True))


def _link_line(line: str) -> str:
    """``links_to -> [[X]]`` (a link in the body) as ``[[X]]``; a front-matter
    relation keeps its name: ``[[X]] (related_to)``."""
    relation, _, link = line.partition(" -> ")
    return link if relation == "links_to" or not link else f"{link} ({relation})"


def _decide_records(apply_ids: tuple[str, ...], discard_ids: tuple[str, ...]) -> None:
    """``doctor --apply`` / ``--discard``: one library call per record, in the order given."""
    from ..trust import records

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


@click.command()
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
    from ..vault.vault import Vault

    import signal
    import threading
    import time

    from ..watch.watcher import Change, Watcher  # imports watchdog: only here

    as_json = global_options().json

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
