"""Folding a person's edits into the index as they happen: ``watcher`` runs the watchdog
observer (``agent-memory watch``, and the server's background sync) and ``vouch`` lets
a running watcher vouch for the index, so commands skip their walk.
"""
