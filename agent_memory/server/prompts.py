"""MCP prompts from markdown files: the bundled ``prompts/*.md`` and the vault's own
``.prompts/*.md``, which add to them or replace one by name.

A prompt file is front matter (``name``, ``title``, ``description``, ``arguments``:
``[{name, description, required, aliases}]``) and a body whose ``{{argument}}``
placeholders are filled in with what the client sends (an optional argument left out
becomes ""). ``aliases`` are other names a client may send for an argument: the bundled
prompts that share AgentMemory's prompt names accept its placeholders (``goal``,
``text``, ``narrative``, ...), several of them given at once are joined, each on a line
with its name. Files are read once, when the server is built.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.prompts.base import Prompt, PromptArgument, UserMessage

from ..note import parse
from ..trust import approvals
from ..errors import AgentMemoryError
from ..vault.vault import Vault

log = logging.getLogger("agent_memory.server")

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
VAULT_PROMPTS = ".prompts"
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def bundled_prompts_dir() -> Path | None:
    """``agent_memory/_prompts`` in an installed wheel; the repository's ``prompts/`` in a
    source checkout or editable install."""
    package = Path(__file__).resolve().parent.parent
    for folder in (package / "_prompts", package.parent / "prompts"):
        if folder.is_dir():
            return folder
    return None


@dataclass(frozen=True)
class PromptFile:
    name: str
    title: str | None
    description: str | None
    arguments: list[PromptArgument]
    body: str
    origin: str
    aliases: dict[str, tuple[str, ...]] = field(default_factory=dict)  # argument -> other names for it

    def canonical(self, sent: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments under this prompt's own names: a value sent under an alias moves
        to its argument; several values for one argument are joined, one line each."""
        taken = {alias for names in self.aliases.values() for alias in names}
        out = {key: value for key, value in sent.items() if key not in taken}
        for name, names in self.aliases.items():
            given = [(key, sent[key]) for key in (name, *names) if sent.get(key) not in (None, "")]
            if len(given) == 1:
                out[name] = given[0][1]
            elif given:
                out[name] = "\n".join(f"{key}: {value}" for key, value in given)
        return out

    def render(self, values: dict[str, str]) -> str:
        declared = {a.name for a in self.arguments}

        def fill(match: re.Match[str]) -> str:
            key = match.group(1)
            return str(values.get(key) or "") if key in declared else match.group(0)

        return PLACEHOLDER.sub(fill, self.body)

    def as_prompt(self) -> Prompt:
        def render(**values: str) -> list[UserMessage]:
            return [UserMessage(self.render(values))]

        return Prompt(
            name=self.name, title=self.title, description=self.description, arguments=self.arguments, fn=render,
            context_kwarg=None,
        )


def parse_prompt(text: str, origin: str) -> PromptFile:
    """One prompt file; ValueError says what is wrong with it."""
    note = parse.parse(text.encode("utf-8"), origin)
    meta: dict[str, Any] = note.meta
    name = meta.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name.strip()):
        raise ValueError("front matter needs `name:` (letters, digits, '_', '-', '.')")
    raw_args = meta.get("arguments") or []
    if not isinstance(raw_args, list):
        raise ValueError("`arguments` must be a list of {name, description, required}")  # noqa: TRY004 - callers catch ValueError
    arguments = []
    aliases: dict[str, tuple[str, ...]] = {}
    for raw in raw_args:
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"].strip():
            raise ValueError("every argument needs a `name`")
        other_names = raw.get("aliases") or []
        if not isinstance(other_names, list) or not all(isinstance(a, str) and _NAME.fullmatch(a) for a in other_names):
            raise ValueError(f"`aliases` of {raw['name']!r} must be a list of names")
        if other_names:
            aliases[raw["name"].strip()] = tuple(other_names)
        arguments.append(
            PromptArgument(
                name=raw["name"].strip(),
                description=str(raw["description"]) if raw.get("description") else None,
                required=raw.get("required") is True,
            )
        )
    if not note.body.strip():
        raise ValueError("the prompt has no text after its front matter")
    names = [a.name for a in arguments] + [alias for other in aliases.values() for alias in other]
    if len(names) != len(set(names)):
        raise ValueError("an argument name or alias is given twice")
    return PromptFile(
        name=name.strip(),
        title=str(meta["title"]) if meta.get("title") else None,
        description=str(meta["description"]) if meta.get("description") else None,
        arguments=arguments,
        body=note.body,
        origin=origin,
        aliases=aliases,
    )


def _bundled() -> list[PromptFile]:
    folder = bundled_prompts_dir()
    if folder is None:
        log.warning("no bundled prompts folder found; only the vault's .prompts/ will be served")
        return []
    found = []
    for path in sorted(folder.glob("*.md")):
        try:
            found.append(parse_prompt(path.read_text(encoding="utf-8"), str(path)))
        except (OSError, UnicodeError, ValueError) as exc:
            log.warning("skipping prompt %s: %s", path, exc)
    return found


def _from_vault(vault: Vault) -> list[PromptFile]:
    """The vault's ``.prompts/*.md``, read through ``Vault.read_file`` (confined to the
    vault, symlinks resolved, text only, size-capped). A file this clone has not approved
    with its current content (``agent-memory trust .prompts``) is left out, said in one
    line: its text would reach every agent, and it may be a teammate's."""
    folder = vault.root / VAULT_PROMPTS
    found = []
    pending: list[approvals.Loosening] = []
    for path in sorted(folder.glob("*.md")) if folder.is_dir() else []:
        rel = f"{VAULT_PROMPTS}/{path.name}"
        try:
            text = vault.read_file(rel)["content"]
            if not approvals.prompt_approved(vault.root, path.name, text.encode("utf-8")):
                pending.append(approvals.Loosening(approvals.PROMPTS_KEY, approvals.prompt_value(path.name, text.encode("utf-8")),
                                               approved=False))
                continue
            found.append(parse_prompt(text, rel))
        except (AgentMemoryError, ValueError) as exc:
            log.warning("skipping prompt %s: %s", rel, exc)
    if pending:
        log.warning("%s", approvals.ignored_warning(vault.root, pending))
    return found


def load_prompts(vault: Vault) -> dict[str, PromptFile]:
    """Bundled prompts, then the vault's, a later one replacing an earlier one by name."""
    prompts: dict[str, PromptFile] = {}
    for prompt in [*_bundled(), *_from_vault(vault)]:
        prompts[prompt.name] = prompt
    return prompts


def register_prompts(server: MCPServer, vault: Vault) -> None:
    """Every prompt, and the middleware that reads an alias as its argument before the
    SDK checks the required ones (it would refuse ``goal`` for a missing ``topic``)."""
    prompts = load_prompts(vault)
    for prompt in prompts.values():
        server.add_prompt(prompt.as_prompt())

    async def accept_aliases(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        params = ctx.params if ctx.method == "prompts/get" and isinstance(ctx.params, Mapping) else {}
        name, sent = params.get("name"), params.get("arguments")
        prompt = prompts.get(name) if isinstance(name, str) else None
        if prompt is not None and prompt.aliases and isinstance(sent, Mapping):
            ctx = dataclasses.replace(ctx, params={**params, "arguments": prompt.canonical(sent)})
        return await call_next(ctx)

    server.middleware.append(accept_aliases)
