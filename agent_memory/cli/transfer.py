"""Moving memories in and out: export (a JSON backup or a memory.jsonl) and import (a
backup, or another memory server's files)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from .options import common, open_vault
from .output import emit, printable, progress_bar
from .words import handle_errors


EXPORT_FORMATS = ("json", "mcp-knowledge-graph")  # json: this tool's own; transfer.formats.EXPORT_FORMATS


@click.command()
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


@click.command(name="import")
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
    from ..limits import load_json

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
