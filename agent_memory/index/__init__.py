"""The index: a SQLite cache of the files (FTS5 search, links, tags), rebuilt from them
at any time. ``db`` is the database (schema, rows, queries); ``reconcile`` folds new,
changed, moved and deleted files into it.
"""
