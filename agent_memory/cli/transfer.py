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
from .output import emit, plural, printable, progress_bar
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
    entity a line (name, entityType, observations), then the relations, as the
    reference server writes memory.jsonl: a graph imported from one comes back
    byte for byte.

    \b
    Examples:
      agent-memory export -o backup.json
      agent-memory export --format mcp-knowledge-graph -o memory.jsonl
    """
    with open_vault() as vault, progress_bar() as progress:
        if export_format == "json":
            items: list[Any] = list(vault.export_memories(namespace=namespace, progress=progress))
        else:
            items = vault.export_memories(namespace=namespace, format=export_format, progress=progress)
    if export_format == "json":
        text = json.dumps(items, ensure_ascii=False, indent=2) + "\n"
        what = plural(len(items), "memory", "memories")
    else:
        from ..vault.graph import records_jsonl  # not imported on every start

        text = records_jsonl(items)  # as the reference server writes memory.jsonl
        entities = sum(1 for record in items if record["type"] == "entity")
        what = f"{plural(entities, 'entity', 'entities')} and {plural(len(items) - entities, 'relation')}"
    if output == "-":
        click.echo(text, nl=export_format != "json" and bool(text))
    else:
        _write_export(Path(output), text)
        click.echo(printable(f"Exported {what} ({export_format}) to {output}"), err=True)


def _write_export(path: Path, text: str) -> None:
    """The export file whole or not at all (an older backup at that name stays until the
    new one is complete), with its permissions; a symlink there is written through, as a
    plain write does. A folder that is not there or not writable is one line."""
    from ..disk.durable import replace_file

    try:
        replace_file(path.resolve(), text.encode("utf-8"))
    except OSError as exc:
        raise click.ClickException(printable(
            f"Cannot write {path}: {exc.strerror or exc}. Nothing was exported; give -o a file in a folder that "
            "exists and you can write, or leave -o out to print to standard output.")) from exc


# transfer.formats.FORMATS, not imported on every start (tests/test_importers.py checks they agree)
IMPORT_FORMATS = ("mcp-knowledge-graph", "mcp-memory-vault", "memory-mcp", "agentmemory", "chatgpt", "claude")


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
                   "it), agentmemory (its .memory/ folder, with memories.db beside it), or a ChatGPT or Claude "
                   "data export (chatgpt, claude: the zip, or conversations.json; one note per conversation).")
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
      agent-memory import --from chatgpt chatgpt-export.zip
    """
    if source_format is not None:
        with _source_file(source) as path, open_vault() as vault, progress_bar() as progress:
            result = vault.import_memories(path, progress=progress, format=source_format)
        _import_summary(result, source, source_format)
        return
    from ..limits import load_json

    raw = _decoded(sys.stdin.buffer.read(), "standard input") if source == "-" else _read_text(source)
    items = load_json(raw, "standard input" if source == "-" else source)
    with open_vault() as vault, progress_bar() as progress:
        result = vault.import_memories(items, progress=progress)
    _import_summary(result, source, None)


def _import_summary(result: Any, source: str, source_format: str | None) -> None:
    """What the import did, naming what it read: the file (or standard input) and, for
    another server's data, the --from format."""
    read = "standard input" if source == "-" else Path(source).name
    what = f"{read}, --from {source_format}" if source_format else f"{read}, an agent-memory export"

    def human() -> None:
        if "conversations" in result:
            click.echo(f"Read {plural(result['conversations'], 'conversation')}.")
        click.echo(printable(f"Imported {result['imported']}, updated {result['updated']}, unchanged "
                             f"{result['unchanged']}, expired {result['expired']}, links {result['links']}; skipped "
                             f"{plural(result['duplicates'], 'duplicate')} (from {what})."))
        if result["forgotten"]:
            click.echo(f"  {result['forgotten']} forgotten here since an earlier import: not brought back "
                       "(agent-memory restore ID does that)")
        for note in result.get("redacted", []):
            click.echo(printable(f"  redacted {', '.join(note['kinds'])} in the conversation "
                                 f"{note['title'] or note['conversation']!r}"))
        for note in result.get("refused", []):
            click.echo(printable(f"  left out the conversation {note['title'] or note['conversation']!r}: "
                                 f"it holds {', '.join(note['kinds'])}"))
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
