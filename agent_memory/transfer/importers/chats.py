"""ChatGPT and Claude conversation exports -> one dated note per conversation (pure).

Neither format is documented; what is read here is what their "export data" archives
hold, pinned by the samples under ``tests/data/chats/``:

- ChatGPT: ``conversations.json``, a list of conversations, each ``{id | conversation_id,
  title, create_time, update_time, current_node, mapping}`` where ``mapping`` is a tree
  of ``{id: {message, parent, children}}``. The conversation shown is the branch from
  ``current_node`` back to the root (edits and regenerations are other branches).
  A message is ``{author: {role, name}, create_time, content: {content_type, parts |
  text}, metadata: {model_slug, is_visually_hidden_from_conversation}}``; ``parts`` may
  hold objects (images, files) as well as text.
- Claude: ``conversations.json``, a list of ``{uuid, name, created_at, updated_at,
  chat_messages: [{sender: human | assistant, text, content: [blocks], created_at,
  attachments, files}]}`` beside ``users.json`` (the account's ``full_name``) and
  ``projects.json`` in the zip.

Both files can be hundreds of MB: ``conversations`` reads the top-level list one
conversation at a time (``json.JSONDecoder.raw_decode`` over a growing window of the
stream), so memory holds one conversation, not the export. A conversation longer than
the content limit becomes several notes (``part 2 of 3``), each linked to the one before.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import os
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from ...errors import InvalidInput
from ...limits import MAX_CONTENT

CHAT_FORMATS = ("chatgpt", "claude")
READ_CHUNK = 1 << 20  # characters read at a time from the export
MAX_CONVERSATION_CHARS = 256 << 20  # one conversation's JSON at most: past it the export is refused
PART_BUDGET = MAX_CONTENT - 2_000  # a part's messages, leaving room for its heading lines
_DECODER = json.JSONDecoder()
_NAMES = {"chatgpt": "ChatGPT", "claude": "Claude"}


@dataclass
class Conversation:
    """One conversation as read from an export, ready to become notes."""

    source: str  # chatgpt | claude
    key: str  # the conversation's own id in the export
    title: str
    created: str | None
    updated: str | None
    messages: list[tuple[str, str | None, str]] = field(default_factory=list)  # (speaker, time, text)

    @property
    def participants(self) -> list[str]:
        return list(dict.fromkeys(speaker for speaker, _, _ in self.messages))


# --------------------------------------------------------------------------- reading the export


def iter_array(stream: IO[str], what: str) -> Iterator[Any]:
    """The elements of the JSON array ``stream`` holds, one at a time. The window of
    text kept grows (doubling) only while one element is longer than it, so reading is
    linear and memory is bounded by the largest element."""
    buffer = ""
    pos = 0
    eof = False
    started = False
    want = READ_CHUNK

    def fill() -> bool:
        nonlocal buffer, pos, eof
        chunk = stream.read(want)
        if not chunk:
            eof = True
            return False
        buffer = buffer[pos:] + chunk
        pos = 0
        return True

    while True:
        while pos < len(buffer) and buffer[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(buffer):
            if eof or not fill():
                raise _cut_short(what)
            continue
        if not started:
            if buffer[pos] == "\ufeff":
                pos += 1
                continue
            if buffer[pos] != "[":
                raise InvalidInput(f"{what} is not a list of conversations (it starts with {buffer[pos]!r}).")
            started = True
            pos += 1
            continue
        if buffer[pos] == "]":
            return
        try:
            value, end = _DECODER.raw_decode(buffer, pos)
        except json.JSONDecodeError as exc:
            if eof and exc.pos >= len(buffer.rstrip()):
                raise _cut_short(what) from None
            if eof:
                raise InvalidInput(f"{what} is not valid JSON near character {exc.pos}: {exc.msg}.") from None
            if len(buffer) - pos > MAX_CONVERSATION_CHARS:
                raise InvalidInput(f"{what} holds a conversation over {MAX_CONVERSATION_CHARS >> 20} MB of JSON; "
                                   "nothing past it was read.") from None
            want = max(READ_CHUNK, len(buffer) - pos)  # double the window: one element is longer than it
            fill()
            continue
        yield value
        pos = end
        want = READ_CHUNK
        if pos > READ_CHUNK:
            buffer, pos = buffer[pos:], 0


def _cut_short(what: str) -> InvalidInput:
    return InvalidInput(f"{what} ends before its list of conversations is closed (the export is cut short); "
                        "download it again. Conversations in batches already imported stay; importing the "
                        "whole export again adds nothing twice.")


def _open_member(archive: zipfile.ZipFile, name: str) -> IO[bytes] | None:
    """A member named ``name`` at the archive's top or one folder down (never extracted)."""
    for info in archive.infolist():
        parts = info.filename.replace("\\", "/").split("/")
        if parts[-1] == name and len(parts) <= 2 and not info.is_dir():
            return archive.open(info)
    return None


def conversations(path: Any, source: str) -> Iterator[Conversation]:
    """Each conversation of an export (``conversations.json``, or the zip holding it),
    or of its list of conversations already parsed (what an MCP caller sends)."""
    if isinstance(path, list):
        for n, raw in enumerate(path):
            if not isinstance(raw, dict):
                raise InvalidInput(f"Conversation {n + 1} is not an object; is this a {_NAMES[source]} export?")
            yield chatgpt_conversation(raw, n) if source == "chatgpt" else claude_conversation(raw, n, None)
        return
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidInput(f"A {_NAMES[source]} import reads its export's zip or conversations.json, or its list "
                           "of conversations.")
    where = os.fspath(path)
    try:
        if zipfile.is_zipfile(where):
            with zipfile.ZipFile(where) as archive:
                yield from _from_zip(archive, source, where)
            return
        with open(where, encoding="utf-8-sig", newline="") as handle:
            yield from _read(handle, source, None, where)
    except (OSError, zipfile.BadZipFile) as exc:
        raise InvalidInput(f"Cannot read {where}: {getattr(exc, 'strerror', None) or exc}.") from exc
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{where} is not UTF-8 text (byte {exc.start}); export it again.") from None


def _from_zip(archive: zipfile.ZipFile, source: str, where: str) -> Iterator[Conversation]:
    member = _open_member(archive, "conversations.json")
    if member is None:
        raise InvalidInput(f"{where} has no conversations.json; give the zip the {_NAMES[source]} export sent, "
                           "or the conversations.json inside it.")
    user = _user_name(archive) if source == "claude" else None
    with io.TextIOWrapper(member, encoding="utf-8-sig", newline="") as handle:
        yield from _read(handle, source, user, f"{where}:conversations.json")


def _user_name(archive: zipfile.ZipFile) -> str | None:
    """The account's name from Claude's ``users.json`` (small), for the participants."""
    member = _open_member(archive, "users.json")
    if member is None:
        return None
    with member:
        try:
            users = json.loads(member.read(1 << 20).decode("utf-8-sig"))
        except (ValueError, UnicodeDecodeError):
            return None
    first = users[0] if isinstance(users, list) and users else users
    name = first.get("full_name") if isinstance(first, dict) else None
    return name.strip() if isinstance(name, str) and name.strip() else None


def _read(stream: IO[str], source: str, user: str | None, where: str) -> Iterator[Conversation]:
    for n, raw in enumerate(iter_array(stream, where)):
        if not isinstance(raw, dict):
            raise InvalidInput(f"{where}: conversation {n + 1} is not an object; is this a {_NAMES[source]} export?")
        yield chatgpt_conversation(raw, n) if source == "chatgpt" else claude_conversation(raw, n, user)


# --------------------------------------------------------------------------- the two formats


def _time(value: Any) -> str | None:
    """An export's time (epoch seconds, or ISO text) as canonical UTC."""
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            moment = dt.datetime.fromtimestamp(value, dt.timezone.utc)
        elif isinstance(value, str) and value.strip():
            moment = dt.datetime.fromisoformat(value.strip())
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=dt.timezone.utc)
        else:
            return None
        return moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (ValueError, OverflowError, OSError):
        return None


def _obj(value: Any) -> dict[str, Any]:
    """An export's object, or an empty one where something else stands."""
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _key(raw: dict[str, Any], names: tuple[str, ...], n: int) -> str:
    for name in names:
        value = raw.get(name)
        if isinstance(value, (str, int)) and str(value).strip():
            return str(value).strip()
    raise InvalidInput(f"Conversation {n + 1} has no id ({' or '.join(names)}); is this the right export?")


def chatgpt_conversation(raw: dict[str, Any], n: int) -> Conversation:
    """A ChatGPT conversation: the branch from ``current_node`` back to the root, in order."""
    mapping = _obj(raw.get("mapping"))
    chain: list[dict[str, Any]] = []
    node_id = raw.get("current_node")
    seen: set[str] = set()
    while isinstance(node_id, str) and node_id in mapping and node_id not in seen:  # a cycle ends the walk
        seen.add(node_id)
        node = _obj(mapping[node_id])
        chain.append(node)
        node_id = node.get("parent")
    conversation = Conversation("chatgpt", _key(raw, ("conversation_id", "id"), n), _text(raw.get("title")).strip(),
                                _time(raw.get("create_time")), _time(raw.get("update_time")))
    for node in reversed(chain):
        message = node.get("message")
        if isinstance(message, dict):
            _add_chatgpt_message(conversation, message)
    return conversation


def _add_chatgpt_message(conversation: Conversation, message: dict[str, Any]) -> None:
    metadata = _obj(message.get("metadata"))
    if metadata.get("is_visually_hidden_from_conversation"):
        return
    author = _obj(message.get("author"))
    role = _text(author.get("role"))
    if role == "system":
        return
    content = _obj(message.get("content"))
    pieces: list[str] = []
    for part in content.get("parts") or []:
        if isinstance(part, str):
            pieces.append(part)
        elif isinstance(part, dict):  # an image, a file, audio: named, not embedded
            text = part.get("text")
            pieces.append(text if isinstance(text, str) else f"*[{_text(part.get('content_type')) or 'attachment'}]*")
    if not pieces and isinstance(content.get("text"), str):  # code, execution output, quotes
        pieces.append(content["text"])
    text = "\n\n".join(p for p in pieces if p.strip()).strip()
    if not text:
        return
    if role == "user":
        speaker = "You"
    elif role == "assistant":
        model = _text(metadata.get("model_slug"))
        speaker = f"ChatGPT ({model})" if model else "ChatGPT"
    else:
        speaker = f"Tool ({_text(author.get('name')) or role or 'unknown'})"
    conversation.messages.append((speaker, _time(message.get("create_time")), text))


def claude_conversation(raw: dict[str, Any], n: int, user: str | None) -> Conversation:
    """A Claude conversation: ``chat_messages`` in order, text and tool blocks as read."""
    conversation = Conversation("claude", _key(raw, ("uuid", "id"), n), _text(raw.get("name")).strip(),
                                _time(raw.get("created_at")), _time(raw.get("updated_at")))
    for message in raw.get("chat_messages") or []:
        if not isinstance(message, dict):
            continue
        text = _claude_text(message)
        if not text:
            continue
        sender = _text(message.get("sender"))
        speaker = (user or "You") if sender == "human" else "Claude" if sender == "assistant" else sender or "unknown"
        conversation.messages.append((speaker, _time(message.get("created_at")), text))
    return conversation


def _claude_text(message: dict[str, Any]) -> str:
    pieces: list[str] = []
    for block in message.get("content") or []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            pieces.append(block["text"])
        elif kind == "tool_use":
            pieces.append(f"*[used {_text(block.get('name')) or 'a tool'}]*")
        elif kind == "tool_result":
            inner = block.get("content")
            texts = [b.get("text") for b in inner if isinstance(b, dict)] if isinstance(inner, list) else [inner]
            pieces += [t for t in texts if isinstance(t, str)]
    if not pieces and isinstance(message.get("text"), str):  # older exports: text only
        pieces.append(message["text"])
    for attached in (message.get("attachments") or []) + (message.get("files") or []):
        if isinstance(attached, dict) and _text(attached.get("file_name")):
            pieces.append(f"*[attached {attached['file_name']}]*")
    return "\n\n".join(p.strip() for p in pieces if p.strip())


# --------------------------------------------------------------------------- notes


def note_id(source: str, key: str, part: int = 1) -> str:
    """Our id of a conversation's note: from the export's own id, so importing the
    export again updates the note instead of adding a second one."""
    digest = hashlib.sha256(f"{source}:{key}".encode()).hexdigest()[:16]
    return f"{source}-{digest}" + (f"-p{part}" if part > 1 else "")


def _stamp(moment: str | None) -> str:
    return moment.replace("T", " ").removesuffix("Z") + " UTC" if moment else "undated"


def _blocks(conversation: Conversation) -> list[str]:
    """Each message as markdown: who and when, then its text; a message over a part's
    budget is cut at line ends into several blocks."""
    blocks: list[str] = []
    for speaker, when, text in conversation.messages:
        head = f"### {speaker}" + (f" · {_stamp(when)}" if when else "")
        body = text
        while len(body) > PART_BUDGET - len(head) - 40:
            cut = body.rfind("\n", 0, PART_BUDGET - len(head) - 40)
            cut = cut if cut > 0 else PART_BUDGET - len(head) - 40
            blocks.append(f"{head} (continued below)\n\n{body[:cut].rstrip()}\n")
            body = body[cut:].lstrip("\n")
        blocks.append(f"{head}\n\n{body}\n")
    return blocks


def note_items(conversation: Conversation, namespace: str = "default") -> list[dict[str, Any]]:
    """The import items of one conversation: one note, or several (``part 2 of 3``)
    when its messages pass the content limit, each linked to the one before."""
    parts: list[list[str]] = [[]]
    size = 0
    for block in _blocks(conversation):
        if parts[-1] and size + len(block) + 1 > PART_BUDGET:
            parts.append([])
            size = 0
        parts[-1].append(block)
        size += len(block) + 1
    name = _NAMES[conversation.source]
    title = conversation.title or f"{name} conversation {_stamp(conversation.created)}"
    people = ", ".join(conversation.participants) or "nobody (no messages)"
    items = []
    for n, blocks in enumerate(parts, 1):
        part_title = title if len(parts) == 1 else f"{title} (part {n} of {len(parts)})"
        head = (f"# {part_title}\n\n- Date: {_stamp(conversation.created)}\n- Participants: {people}\n"
                f"- {name} conversation: {conversation.key}\n")
        content = head + "\n" + ("\n".join(blocks) if blocks else "*(no messages)*\n")
        item: dict[str, Any] = {
            "id": note_id(conversation.source, conversation.key, n),
            "title": part_title,
            "content": content,
            "namespace": namespace,
            "tags": [conversation.source, "conversation"],
            "type": "conversation",
            "source": f"{name} conversation {conversation.key}",
            "created": conversation.created,
            "updated": conversation.updated or conversation.created,
            "unique_by": "id",
            "links": {"continues": [{"id": note_id(conversation.source, conversation.key, n - 1)}]} if n > 1 else {},
        }
        items.append(item)
    return items
