"""The ``agent-memory`` command: the click group and its global options, one module per
command group, and how the CLI prints (results, warnings, progress).

``main`` is the entry point installed scripts name (``agent_memory.cli:main``) and
``python -m agent_memory`` runs; it stays here so existing installs keep working.
"""

from . import app


def main() -> None:
    """Run the ``agent-memory`` command line."""
    app.main()
