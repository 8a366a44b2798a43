"""What this machine may act on. Everything in the vault may come from someone else (a
pulled file, a synced folder, a record under ``.index/`` or ``.trash/``): ``confine`` is
the one rule for paths, ``register`` lists the records this user's own operations left
(``records`` shows and settles the others), ``approvals`` keeps a pulled setting from
loosening a guard until this clone approves it, ``credentials`` keeps secrets out of the
vault, and ``state`` is this user's folder outside the vault where that knowledge lives.
"""
