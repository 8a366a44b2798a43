"""What the server tells the model at connect time (also ``memory://instructions``)."""

INSTRUCTIONS = """\
This server is a long-term memory shared across sessions (and with people, who read and
edit the same memories as markdown files).

When to remember: call `remember` for durable facts, preferences, decisions, procedures
and solved problems that will matter in a later session — not for chit-chat or things
only true for this conversation. One self-contained fact per memory; name people,
systems and dates explicitly; add 2-6 tags and a namespace (one word, e.g. `people`,
`projects`). For facts that go stale (a temporary workaround, this week's on-call), set
`ttl_days`.

How to recall: before starting a task or answering from memory, call `recall` with a
plain question ("When does ACME prefer to deploy?") — no special syntax. Narrow with
`namespace`, `tags`, `since`/`until` or `path_prefix`; if `note` says the hits are
partial, or `hint` says nothing matched, try other words or browse with
`list_memories`. `get_memory` reads one memory whole; `retrieve_context` gathers whole
memories that fit a token budget; `related` follows links between memories, which you
add with `link_memories`. To answer "when did this change and who changed it", call
`memory_history`: the git commits that changed the memory, newest first, with what
each changed.

Keep memories accurate: search before you remember, and when a memory exists, correct
or extend it with `update_memory` (pass the `version` you read as `expected_version`)
instead of adding a near-duplicate. `forget` what turned out to be wrong or is no
longer true (it moves to the vault's trash). Errors say what to do next: follow them.
"""
