"""The MCP server over one ``Vault``: tools, prompts and resources, on stdio or HTTP.

Nothing is registered at import time; ``app.build_server(vault)`` makes a fresh server,
``transport.run`` serves one for ``agent-memory serve``. ``mcp`` is imported only inside
this package (and ``watchdog`` only in ``watch/``), so the CLI's other commands start fast.

- ``tools``: the tools as plain functions, and ``TOOLS``, the table of them
- ``arguments``: what each tool accepts, and the check of a call's arguments as sent
- ``registry``: the table on a server (the vault, ``seen`` and progress filled in)
- ``seen``: what a connection remembers between calls (the versions it saw)
- ``progress_notifications``: long work's steps as MCP progress notifications
- ``prompts``: prompts from ``prompts/*.md`` and the vault's ``.prompts/*.md``
- ``resources``: ``memory://instructions|stats|schema`` and ``memory://{+id}``
- ``instructions``: what the server tells the model at connect time
- ``app``: ``build_server`` and its lifespan (background sync, clean stdout)
- ``transport``: ``run`` for ``agent-memory serve``, the HTTP app and its bearer check;
  ``sessions`` and ``connections`` bound what HTTP clients may hold (``connection_limits``:
  how many, how long, without importing uvicorn's protocol)
"""
