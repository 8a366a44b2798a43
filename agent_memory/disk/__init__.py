"""The vault on disk: ``layout`` says where things are and what is a memory, ``store``
reads and writes files durably (a crash leaves the old file or the new one, never half),
``durable`` replaces a file whole, ``locking`` holds the write lock and the atomic swaps, ``trash`` keeps what was forgotten,
``staging`` lets an import land all or nothing, ``nofollow`` opens the tool's own files
there (records, settings) as untrusted: no symlink followed, no pipe waited on.
"""
