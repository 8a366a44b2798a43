"""The MCP server over one ``Vault``: tools, prompts and resources, on stdio or HTTP.

Nothing is registered at import time; ``build_server(vault)`` makes a fresh server.
``mcp`` is imported only inside this package (and ``watchdog`` only in ``watch/``), so the
CLI's other commands start fast.

- ``tools``: the tools and how models' arguments are accepted
- ``prompts``: prompts from ``prompts/*.md`` and the vault's ``.prompts/*.md``
- ``resources``: ``memory://instructions|stats|schema`` and ``memory://{+id}``
- ``app``: ``build_server`` and its lifespan (background sync, clean stdout)
- ``transport``: ``run`` for ``agent-memory serve``, the HTTP app and its bearer check
"""

from .app import build_server
from .transport import build_http_app, run

__all__ = ["build_http_app", "build_server", "run"]
