"""Which recall profile suits a vault, from what it holds (pure; docs/recall.md).

Three kinds of memory are told apart as they are indexed (``shape_of``): a note a
person named (a file outside the tool's dated ``YYYY/MM/DD/`` layout), a dialog turn
(a tool memory whose text opens with a speaker, ``Caroline: ...``), and any other tool
memory (a fact). The rule (``choose``):

- ``notes`` when notes a person named are at least half of the memories;
- else ``conversation`` when dialog turns are at least half of the tool memories;
- else ``facts`` (also for an empty vault).

With hysteresis, so a vault near a line does not flip as it grows: once a profile is
chosen (and recorded in the index), it is kept until its share falls below 40%, and
another is taken only when its share reaches 60%. The ``recall.profile`` setting, when
set, overrides the rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..note.parse import hand_named

FACT, NOTE, TURN = 0, 1, 2  # what index.db's ``shape`` column holds
FIRST, ENTER, LEAVE = 0.5, 0.6, 0.4  # shares: the first choice; taking another profile; leaving the one chosen
# A dialog turn opens with a speaker's name and a colon (after an optional [date]).
_SPEAKER = re.compile(r"\s*(?:\[[^\]\n]{1,40}\]\s*)?[^\W\d_][\w.'’ -]{0,30}:\s")


def shape_of(path: str, body: str) -> int:
    """A memory's kind as the rule counts it: ``NOTE``, ``TURN`` or ``FACT``."""
    if hand_named(path):
        return NOTE
    return TURN if _SPEAKER.match(body[:80]) else FACT


@dataclass(frozen=True)
class Holdings:
    """How many memories of each kind the vault holds."""

    facts: int = 0
    notes: int = 0
    turns: int = 0

    @property
    def total(self) -> int:
        return self.facts + self.notes + self.turns


@dataclass(frozen=True)
class Choice:
    """The profile recall uses when none is asked for, and why."""

    profile: str
    reason: str
    set_by: str = "vault"  # or "setting": recall.profile


def choose(held: Holdings, previous: str | None = None) -> Choice:
    """The profile for a vault holding ``held``, ``previous`` being the one chosen before
    (None: never chosen), with the thresholds above."""
    if not held.total:
        return Choice("facts", "an empty vault: facts until it holds memories")
    tool = held.facts + held.turns
    note_share = held.notes / held.total
    turn_share = held.turns / tool if tool else 0.0

    def line(profile: str) -> float:
        return FIRST if previous is None else LEAVE if previous == profile else ENTER

    notes = f"{held.notes} of {held.total} memories are notes a person named"
    turns = f"{held.turns} of {tool} tool memories are dialog turns"
    if note_share >= line("notes"):
        return Choice("notes", f"{notes} ({note_share:.0%})")
    if turn_share >= line("conversation"):
        return Choice("conversation", f"{turns} ({turn_share:.0%}); {notes}")
    return Choice("facts", f"{notes} and {turns}: a store of facts")


def overridden(profile: str) -> Choice:
    return Choice(profile, "set by recall.profile", "setting")
