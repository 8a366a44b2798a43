"""The vault's git and what comes through it: git setup, sync, the merge driver git
runs (merge-file) and trust, which approves settings a teammate's clone may bring."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from .options import common, global_options, open_vault, vault_path
from .output import emit, printable
from .words import cli_words, handle_errors


@click.group(name="git")
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
    from ..git.setup import setup  # only here: nothing else needs it

    result = setup(vault_path())

    def human() -> None:
        where = printable(result["gitattributes"])
        click.echo(f"Added {result['attributes_line']} to {where}" if result["gitattributes_changed"]
                   else f"{where} already has {result['attributes_line']}")
        click.echo(f"Registered the merge driver in {printable(result['repository'])}'s git config")
        click.echo(printable(cli_words(result["note"])))

    emit(result, human)


@click.command()
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
    from ..trust import approvals  # only here: nothing else needs the command's part

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
        from ..trust.approvals import approve_hint

        click.echo(f"To approve: {printable(approve_hint(root, pending))}")


@click.command(name="merge-file")
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
    from ..git.merge import run_driver

    ctx.exit(run_driver(base, ours, theirs, marker_size, path))


@click.command()
@common
@click.option("--all", "share_all", is_flag=True,
              help="Share your hand changes too (edits, deletes, renames, attachments in the vault), in one commit.")
@click.option("--dry-run", is_flag=True, help="List what sync would commit; change nothing, reach no remote.")
@handle_errors
def sync(share_all: bool, dry_run: bool) -> None:
    """Commit pending tool writes, pull, update the index, push.

    Your own changes to the vault (hand edits, deletes, renames, attachments)
    are named every time and left uncommitted, unless you pass --all (or set
    [git] commit = "all"): then they go in one commit naming them (never
    .obsidian/workspace*, .index/ or .trash/; a file holding a credential is
    held back). Pulls by rebase (a merge when the rebase conflicts); your
    uncommitted edits are set aside in a stash named for sync and put back.
    Only a vault that is its repository's top folder, or one whose settings
    say [git] subfolder = true. A conflict is left for you to resolve. Nothing is
    pushed while the commits to push carry a credential not in secrets.allow,
    whoever made them.

    \b
    Examples:
      agent-memory sync --dry-run
      agent-memory sync --all
      agent-memory sync --json
    """
    from ..errors import SyncConflict

    with open_vault() as vault:
        if dry_run:
            preview = vault.sync_preview(share_all)
            emit(preview, lambda: _print_preview(preview))
            return
        try:
            result = vault.sync(share_all)
        except SyncConflict as exc:
            if global_options().json:
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
            from ..git.sync import untrack_command

            click.echo(printable(f"  git tracks {', '.join(result['tracked_private'][:5])}"
                                 f"{' and more' if len(result['tracked_private']) > 5 else ''}: this machine's index "
                                 "and trash, never read as records, committed or pushed by agent-memory; take them "
                                 f"out of git: {untrack_command(result['tracked_private'])}, then commit"), err=True)
        for item in result.get("withheld", []):
            advice = (" — remove it from the file (or approve its fingerprint in secrets.allow)," if "fingerprint" in item
                      else ";")
            click.echo(printable(f"  not committed or pushed: {item}{advice} then sync again"), err=True)
        if result.get("hand_shared"):
            click.echo(printable(f"  shared your hand changes: {', '.join(result['hand_shared'])}"))
        _print_not_shared(result.get("hand_not_shared", []))
        if "note" in result:
            click.echo(printable(cli_words(result["note"])))

    emit(result, human)


def _print_not_shared(changes: list[str]) -> None:
    """Every hand change sync leaves uncommitted, one a line: never silently unshared."""
    if not changes:
        return
    click.echo(f"  not shared: {len(changes)} file{'s' if len(changes) != 1 else ''} you changed by hand "
               "(agent-memory sync --all shares them):")
    for item in changes:
        click.echo(printable(f"    {item}"))


def _print_preview(preview: Any) -> None:
    tool, hand = preview["tool_writes"], preview["hand_changes"]
    if not tool and not (hand and preview["shares_hand_changes"]):
        click.echo("sync would commit nothing (nothing was changed; no remote was reached).")
    else:
        click.echo("sync would commit (nothing was changed; no remote was reached):")
    for path in tool:
        click.echo(printable(f"  tool write: {path}"))
    if preview["shares_hand_changes"]:
        for item in hand:
            click.echo(printable(f"  by hand: {item}"))
    else:
        _print_not_shared(hand)
    for item in preview["withheld"]:
        click.echo(printable(f"  held back: {item}"), err=True)
