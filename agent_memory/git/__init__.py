"""The vault's git: ``run`` is the one way the tool runs git (safely, whatever the
repository's config says) and finds the repository; ``commits`` turns tool writes into
commits, ``sync`` is ``agent-memory sync``, ``setup`` is ``agent-memory git setup``,
``merge`` is the merge driver for memory files and ``history`` reads a memory's history.
"""
