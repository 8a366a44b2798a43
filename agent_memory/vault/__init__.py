"""The vault, the library's one entry point: ``vault.Vault`` composes the jobs (each a
module here: ``writes``, ``relations`` (unlink), ``moves``, ``maintenance``, over the
shared ``core``) with ``index.reconcile`` and ``git.sync``; ``doctor`` checks a vault
and says what to fix.
"""
