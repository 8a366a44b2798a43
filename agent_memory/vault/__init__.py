"""The vault, the library's one entry point: ``vault.Vault`` is a façade over the jobs
it holds (each a module here: ``reads``, ``writes``, ``relations``, ``moves``,
``maintenance``, all over the shared ``core``) and ``index.reconcile`` and
``git.sync``; ``doctor`` checks a vault and says what to fix.
"""
