"""Recall: a plain question -> ranked memories, and the links between memories.

``terms`` (question -> terms, pure), ``sql`` (the statements, pure builders), ``rank``
(scoring over fetched records, one frozen ``RecallConfig``), ``engine`` (what to fetch
and when: match modes, fallbacks, typos, CJK), ``graph`` (wikilink targets resolved as
Obsidian does, and the walk over them). ``Vault.search`` calls the engine.
"""
