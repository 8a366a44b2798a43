"""One markdown file <-> one ``Note``, pure (text in, text or data out), so the format's
rules can be tested as tables: ``parse`` reads a file, ``patch`` edits one keeping every
byte it does not change, ``render`` writes new ones; ``safe_yaml``, ``tags``, ``links``
and ``split`` are the pieces they share.
"""
