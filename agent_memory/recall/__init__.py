"""Recall: a plain question -> ranked memories.

``terms`` (question -> terms, pure), ``sql`` (the statements, pure builders), ``rank``
(scoring over fetched records, one frozen ``RecallConfig``), ``engine`` (what to fetch
and when: match modes, fallbacks, typos, CJK). ``Vault.search`` calls the engine.
"""
