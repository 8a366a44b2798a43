"""``agent-memory doctor``: a read-only health check of the installation and a vault.

It never opens the index for writing and never touches a file, so it is safe to run
on a vault that another process is using, or on one that is broken.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import sqlite3
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..git.dates import head_from_files
from ..git.setup import driver_problem
from ..trust import approvals, credentials
from ..note import parse
from ..errors import SettingsError
from ..index.db import DB_NAME, SCHEMA_VERSION
from ..index.facts import FileFacts
from ..index.peek import peek, peek_choice
from ..index.rows import link_key
from ..recall.choice import choose
from ..recall.rank import PROFILES
from ..settings import load_settings
from ..disk.layout import index_folder, is_ignored_dir
from ..disk.store import Store


@dataclass
class Check:
    """One check's verdict. ``ok`` False is a problem (doctor exits 1); ``warn`` is
    worth a look but no problem (exit 0). ``items`` lists what was found, one line each;
    ``groups`` holds the same items by the note that holds them, where that helps."""

    name: str
    ok: bool
    detail: str
    items: list[str] = field(default_factory=list)
    warn: bool = False
    groups: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def plural(n: int, one: str, many: str | None = None) -> str:
    """``1 note``, ``2 notes``: the count and the word as it agrees with it."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def check_python() -> Check:
    ok = sys.version_info >= (3, 11)
    return Check("python", ok, f"Python {sys.version.split()[0]}" + ("" if ok else " (3.11 or newer is needed)"))


def check_sqlite() -> Check:
    version = sqlite3.sqlite_version
    try:
        conn = sqlite3.connect(":memory:")
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61 remove_diacritics 2')")
        conn.close()
    except sqlite3.Error as exc:
        return Check("sqlite", False, f"SQLite {version} without a usable FTS5: {exc}")
    return Check("sqlite", True, f"SQLite {version} with FTS5")


def check_mcp() -> Check:
    try:
        version = importlib.metadata.version("mcp")
    except importlib.metadata.PackageNotFoundError:
        return Check("mcp", False, "the mcp package is not installed: reinstall agent-memory")
    ok = _supported_mcp(version)
    return Check("mcp", ok, f"mcp {version}" + ("" if ok else " (2.3 or a later 2.x expected)"))


def _supported_mcp(version: str) -> bool:
    """The range pyproject.toml pins (>=2.3,<3): the SDK keeps its API within a major."""
    parts = version.split(".")
    try:
        major, minor = int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return False
    return major == 2 and minor >= 3


def check_vault(root: Path, index_dir: Path | None = None) -> list[Check]:
    if not root.exists():
        return [Check("vault", False, f"no vault at {root}: run `agent-memory --dir {root} init`")]
    if not root.is_dir():
        return [Check("vault", False, f"{root} is a file, not a folder")]
    writable = os.access(root, os.W_OK)
    checks = [Check("vault", writable, f"{root}" + (" (writable)" if writable else " is not writable"))]

    facts: dict[str, FileFacts] = {}
    problems: list[str] = []
    conflicts: list[str] = []
    owners: dict[str, list[tuple[str, str]]] = {}
    skipped: list[str] = []
    links: list[tuple[str, str, str]] = []  # (file, relation, target as written)
    secrets: list[str] = []
    try:
        allowed = frozenset(approvals.settings_for(root).secrets_allow)  # as this clone approved it
    except SettingsError as exc:
        allowed = frozenset()
        problems.append(f"{exc}")
    kept_aside: list[str] = []
    for rel, _stat in Store(root).walk(skipped=lambda path, why: skipped.append(f"{path}: {why}"), kept_aside=kept_aside):
        try:
            data = (root / rel).read_bytes()
        except OSError as exc:
            problems.append(f"{rel}: cannot be read ({exc.strerror})")
            continue
        st = (root / rel).stat()
        facts[rel] = FileFacts.read(data, st)
        note = parse.parse(data, rel)
        found = [f"{rel}: {p}" for p in note.problems]
        if found and note.unreadable:
            found[-1] += " (tools will not change this file until it is fixed)"
        problems.extend(found)
        if note.conflict:
            conflicts.append(rel)
        owners.setdefault(note.id, []).append((note.created or "", rel))
        links.extend((rel, relation, target) for relation, target in note.links)
        found_secrets = [f for f in credentials.find_credentials(data.decode("utf-8", "replace")) if f.fingerprint not in allowed]
        secrets.extend(f"{rel}: {f.kind} (line {f.line}, fingerprint {f.fingerprint})" for f in found_secrets)
    checks.append(Check("files", not problems, f"{len(facts)} memory files" + (
        f", {len(problems)} with problems (indexed from their body; fix them by hand)" if problems else " parse cleanly"
    ), problems))
    checks.append(Check("skipped files", not skipped, "none" if not skipped else
                        f"{len(skipped)} .md files are left out of the index, so search cannot see them", skipped))
    checks.append(Check("saves kept aside", True, "none" if not kept_aside else
                        f"{len(kept_aside)} files hold what a move or sync took aside and kept (a save made as it "
                        "ran, then a crash or a conflict): compare each with the note it is named after, keep what "
                        "you want in the note, and delete the file", kept_aside, warn=bool(kept_aside)))
    dupes = [
        f"{memory_id}: " + ", ".join(rel for _, rel in sorted(paths)) + " (the first owns the id)"
        for memory_id, paths in sorted(owners.items()) if len(paths) > 1
    ]
    checks.append(Check("duplicate ids", not dupes, "none" if not dupes else f"{len(dupes)} ids claimed by several files", dupes))
    checks.append(Check("conflict markers", not conflicts, "none" if not conflicts else
                        f"{len(conflicts)} files hold git conflict markers: resolve them by hand", conflicts))
    checks.extend(link_checks(root, links))
    checks.append(Check("credentials", not secrets, "none" if not secrets else
                        f"{len(secrets)} credentials in files (the value is not shown): move each secret to where "
                        "secrets live (a password manager, the CI's secret store) and leave a pointer, or approve "
                        "one with its fingerprint in secrets.allow of .agent-memory.toml", secrets))
    checks.append(_check_index(root, index_folder(root, index_dir), facts))
    checks.append(_check_semantic(root, index_folder(root, index_dir), facts))
    checks.append(_check_profile(root, index_folder(root, index_dir)))
    checks.append(check_records(root))
    driver = driver_problem(root)
    if driver is not None:
        checks.append(Check("merge driver", False, driver))
    checks.append(_check_approvals(root))
    shallow = _check_shallow(root)
    if shallow is not None:
        checks.append(shallow)
    return checks


def _check_shallow(root: Path) -> Check | None:
    """A shallow clone cannot date the notes older than its first commit: said once here
    (read from the ``.git`` folder's files, no git run), nothing when the clone is whole."""
    seen = head_from_files(root)
    if not seen or not seen[1]:
        return None
    return Check("git dates", True, "a shallow clone: notes with no dates of their own that are older than its first "
                 "commit show their files' dates (`git fetch --unshallow` gives them git's)", warn=True)


def check_records(root: Path) -> Check:
    """Records the tool left itself that it does not act on: not in this user's register
    (planted, synced in, from another machine, after the state folder was lost), tracked
    by git, or failing the rule for their paths. Each with what applying it would do."""
    from ..trust.records import listing

    found = listing(root)
    if not found:
        return Check("records", True, "none set aside: every record in .index/ and .trash/ is this user's")
    return Check("records", False, f"{len(found)} record(s) not acted on: look at each, then `agent-memory doctor "
                 "--apply ID` if it is yours (from another of your machines, or your state folder was lost) or "
                 "`--discard ID`", [r.line() for r in found])


def _check_approvals(root: Path) -> Check:
    """What the vault's settings and .prompts/ ask for that loosens a guard and this
    clone has not approved: ignored, which is safe, so no problem — but said."""
    try:
        pending = [item for item in approvals.review(root) if not item.approved]
    except SettingsError:
        pending = []  # the files check reports the broken settings file
    if not pending:
        return Check("settings approval", True, "nothing waits for approval")
    keys = [item.key for item in pending]
    return Check("settings approval", True, f"{len(pending)} value{'s' if len(pending) != 1 else ''} that loosen a "
                 f"guard {'are' if len(pending) != 1 else 'is'} ignored until approved: {approvals.approve_hint(root, keys)}",
                 [item.shown for item in pending])


def _check_semantic(root: Path, folder: Path, facts: dict[str, FileFacts]) -> Check:
    """Semantic recall: off (and why), or whether every memory file has its vector
    (read-only: the vectors file is opened for reading only)."""
    from ..semantic.model_files import VECTORS_FILE
    from ..semantic.status import INSTALL_HINT, extra_installed

    if not extra_installed():
        return Check("semantic recall", True, f"off: the optional extra is not installed ({INSTALL_HINT})")
    try:
        setting = load_settings(root).recall_semantic
    except SettingsError:
        setting = None  # the files check reports the broken settings file
    if setting is False:
        return Check("semantic recall", True, "off (recall.semantic = false)")
    from ..semantic import model_files

    try:
        model_files.model_dir(extract=False)
    except model_files.ModelMissing as exc:
        # numpy and tokenizers are often there for other reasons: without the weights
        # recall is simply lexical, which is no fault of the vault.
        return Check("semantic recall", True, f"off: the extra is installed but not the weights. {exc}")
    path = folder / VECTORS_FILE
    if not path.exists():
        return Check("semantic recall", False, "on, no vectors yet: a running server embeds the memories, "
                     "or run `agent-memory reindex`")
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            have = {row[0] for row in conn.execute("SELECT sha256 FROM vectors")}
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return Check("semantic recall", False, f"{path} cannot be read ({exc}): run `agent-memory reindex`")
    missing = sorted(rel for rel, f in facts.items() if f.sha256 not in have)
    if missing:
        return Check("semantic recall", False, f"on, {len(missing)} of {len(facts)} memories have no vector: "
                     "a running server embeds them, or run `agent-memory reindex`", missing[:20])
    return Check("semantic recall", True, f"on, vectors current ({len(facts)} memories, {model_files.MODEL_NAME})")


# An attachment's extension: letters and digits with a letter, as Obsidian's attachments
# have (png, svg, pdf, mp4, excalidraw); "v1.2" is a note name, not a file of type "2".
_ATTACHMENT_EXTENSION = re.compile(r"\.(?=[0-9]*[a-z])[a-z0-9]{1,10}$", re.IGNORECASE)


def is_attachment(target: str) -> bool:
    """Whether a link names a file other than a note (``![[Document.pdf]]``)."""
    name = target.rsplit("/", 1)[-1]
    return bool(_ATTACHMENT_EXTENSION.search(name)) and not name.casefold().endswith(".md")


def _by_note(items: list[tuple[str, str]]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for rel, line in items:
        grouped.setdefault(rel, []).append(line)
    return grouped


def link_checks(root: Path, links: list[tuple[str, str, str]]) -> list[Check]:
    """Broken links to notes (a problem: a rename by hand or a typo broke them) apart
    from links to attachments that are not in the vault (worth a look, no problem:
    attachments are often left out of a copy or a sync, and notes work without them)."""
    broken = set(broken_links(root, links))
    notes: list[tuple[str, str]] = []
    files: list[tuple[str, str]] = []
    for rel, relation, target in links:
        line = f"{rel}: {relation} -> [[{target}]]"
        if line in broken:
            (files if is_attachment(target) else notes).append((rel, line))
    note_groups, file_groups = _by_note(notes), _by_note(files)
    return [
        Check("broken links", not notes, "no link points to a missing note" if not notes else
              f"{plural(len(notes), 'link')} in {plural(len(note_groups), 'note')} point to no note. Fix each link "
              "(or rename the note back); a relation `link` wrote goes with `agent-memory unlink`.",
              [line for _, line in notes], groups=note_groups),
        Check("missing attachments", True, "every linked attachment is in the vault" if not files else
              f"{plural(len(files), 'link')} in {plural(len(file_groups), 'note')} point to attachments (images, "
              "PDFs…) that are not in the vault. The notes work without them; copy the files in if you want them.",
              [line for _, line in files], warn=bool(files), groups=file_groups),
    ]


def broken_links(root: Path, links: list[tuple[str, str, str]]) -> list[str]:
    """``file: relation -> [[target]]`` for each link that resolves to no file of the
    vault, as Obsidian resolves a wikilink: by vault path, a trailing part of it, or the
    file name; ``.md`` may be left out, and attachments (``![[diagram.png]]``) count."""
    by_name: dict[str, list[str]] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not is_ignored_dir(d)]
        base = Path(folder).relative_to(root).as_posix()
        for name in files:
            key = link_key(name if base == "." else f"{base}/{name}")
            by_name.setdefault(key.rsplit("/", 1)[-1], []).append(key)
            if key.endswith(".md"):  # link_key strips one .md; "x.md.md" is rare enough
                by_name.setdefault(key.rsplit("/", 1)[-1][:-3], []).append(key[:-3])

    def resolves(target: str) -> bool:
        key = link_key(target)
        candidates = by_name.get(key.rsplit("/", 1)[-1], [])
        return any(c == key or "/" not in key or c.endswith("/" + key) for c in candidates)

    return [f"{rel}: {relation} -> [[{target}]]" for rel, relation, target in links if not resolves(target)]


def _check_profile(root: Path, folder: Path) -> Check:
    """The recall profile used when none is asked for, and why (read-only)."""
    try:
        setting = load_settings(root).recall_profile
    except SettingsError:
        setting = None  # the files check reports the broken settings file
    if setting is not None:
        return Check("recall profile", True, f"{setting} (set by recall.profile)")
    try:
        peeked = peek_choice(folder)
    except sqlite3.Error:
        peeked = None
    if peeked is None:
        return Check("recall profile", True, "chosen from what the vault holds once it is indexed")
    held, previous = peeked
    choice = choose(held, previous if previous in PROFILES else None)
    return Check("recall profile", True, f"{choice.profile} ({choice.reason}; set recall.profile to choose another)")


def _differences(facts: dict[str, FileFacts], indexed: dict[str, FileFacts]) -> list[str]:
    missing = sorted(facts.keys() - indexed.keys())
    gone = sorted(indexed.keys() - facts.keys())
    stale = sorted(p for p in facts.keys() & indexed.keys() if facts[p].sha256 != indexed[p].sha256)
    return [f"not indexed: {p}" for p in missing] + [f"file gone: {p}" for p in gone] + [f"stale: {p}" for p in stale]


def _check_index(root: Path, folder: Path, facts: dict[str, FileFacts]) -> Check:
    """Whether the index holds the files. Every command folds in what changed when it
    opens the vault, so files changed since the last index are no problem; the index is
    out of sync only when commands trust it without looking: a running watcher vouches
    for it and it still differs once the watcher confirms it is current."""
    try:
        peeked = peek(folder)
    except sqlite3.Error as exc:
        return Check("index", False, f"The index in {folder} cannot be read ({exc}). Delete the folder and run "
                     "`agent-memory reindex`.")
    if peeked is None:
        return Check("index", True, f"No index in {folder} yet: the next command builds it (or run `agent-memory "
                     "reindex`).", warn=True)
    version, indexed = peeked
    if version != SCHEMA_VERSION:
        return Check("index", True, f"The index has schema version {version} (this version uses {SCHEMA_VERSION}): "
                     "the next command rebuilds it.", warn=True)
    items = _differences(facts, indexed)
    if not items:
        return Check("index", True, f"In sync ({plural(len(indexed), 'memory', 'memories')}).")
    from ..watch import vouch

    if vouch.vouched(Store(root).control_dir, root, folder / DB_NAME):
        confirmed = peek(folder)
        items = _differences(facts, confirmed[1]) if confirmed is not None else items
        if items:
            return Check("index", False, f"Out of sync: {plural(len(items), 'file')} {'differs' if len(items) == 1 else 'differ'} from the index although "
                         "the running watcher vouches for it, so commands will not catch up by themselves. Stop "
                         "the watcher (or server) and run `agent-memory reindex`.", items)
        return Check("index", True, f"In sync ({plural(len(indexed), 'memory', 'memories')}).")
    return Check("index", True, f"{plural(len(items), 'file')} changed since the last index: the next command folds "
                 f"{'it' if len(items) == 1 else 'them'} in by itself.", items)


def diagnose(root: Path, index_dir: Path | None = None) -> list[Check]:
    return [check_python(), check_sqlite(), check_mcp(), *check_vault(root, index_dir)]
