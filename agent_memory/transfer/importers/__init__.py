"""Other memory servers' data -> import items, and our memories -> theirs (pure).

Each module here is one format: a function taking a path (the file or folder as that
server writes it) or the data already parsed (what an MCP caller sends), and returning
import items in the shape ``Vault.import_memories`` takes: ``{content, namespace, tags,
title, source, created, updated, expires, id, path, aliases, type, importance, links}``
(see ``transfer.items.new_fields``), plus:

- ``links``: ``{relation: [target, ...]}``, a target being a note name, or
  ``{"id": ..., "name": ...}``: the memory with that id (in this batch or already in the
  vault, so links resolve across batches), else a note of that name;
- ``relation_types``: ``{relation: name in the source}`` where they differ;
- ``unique_by: "id"``: told apart by id only (two entities may hold the same text);
- ``origin``: the file the body was read from; when that file is a memory of the vault
  itself, it is adopted in place (front matter added, body untouched).

The MCP reference server's graph is the exception: it is imported into the notes
``serve --compat knowledge-graph`` keeps (``vault.graph_import``); ``knowledge_graph``
here gives every other memory back as its records.

Every id is derived from the source's own key (entity name, hash, row id), so importing
the same source again updates what changed and adds nothing twice.
``transfer.formats`` names them for ``agent-memory import --from FORMAT PATH`` and
``import_memories(format=...)``.
"""
