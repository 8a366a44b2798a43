"""The guard against credentials on every write path (SPEC §3), and the settings that tune it.

Fake tokens are assembled at run time, so this file holds nothing token-shaped.
"""

from __future__ import annotations

import random
import string
from pathlib import Path

import pytest

from agent_memory.trust import approvals, credentials
from agent_memory.errors import SecretRefused, SettingsError
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, mcp_client, tool_error


def fake_github_token(seed: int = 1) -> str:
    rng = random.Random(seed)
    return "gh" + "p_" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(36))


def fake_private_key() -> str:
    rng = random.Random(7)
    body = "".join(rng.choice(string.ascii_letters + string.digits + "+/") for _ in range(64 * 6))
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    return "\n".join(["-----BEGIN " + "OPENSSH PRIVATE KEY-----", *lines, "-----END " + "OPENSSH PRIVATE KEY-----"])


def md_files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md") if ".trash" not in p.parts)


def settings_file(vault: Vault, text: str, approve: bool = True) -> None:
    """The vault's settings as its person writes them, approved for this clone
    (``agent-memory trust``): a value that loosens a guard applies only then."""
    (vault.root / ".agent-memory.toml").write_text(text)
    if approve:
        approvals.approve(vault.root)


def test_remember_refuses_a_credential_and_writes_nothing(vault: Vault) -> None:
    token = fake_github_token()
    before = md_files(vault.root)
    for call in (
        lambda: vault.remember(f"The deploy bot uses {token} to push"),
        lambda: vault.remember("The deploy bot pushes on Fridays", title=f"bot {token}"),
        lambda: vault.remember("The deploy bot pushes on Fridays", source=f"pasted {token}"),
        lambda: vault.remember(f"The signing key:\n{fake_private_key()}\n"),
    ):
        with pytest.raises(SecretRefused) as refused:
            call()
        assert token not in str(refused.value)
        assert "secrets.allow" in str(refused.value) and 'secrets.mode = "warn"' in str(refused.value)
    assert md_files(vault.root) == before


def test_warn_mode_stores_with_a_warning_and_never_puts_the_secret_in_a_file_name(vault: Vault) -> None:
    token = fake_github_token()
    settings_file(vault, '[secrets]\nmode = "warn"\n')
    result = vault.remember(f"Token {token} is the CI bot's", title=f"CI bot token {token}")
    assert "GitHub token" in result["warnings"][0] and token not in result["warnings"][0]
    assert token not in result["memory"]["path"] and result["memory"]["path"].endswith(".md")
    assert token in (vault.root / result["memory"]["path"]).read_text()
    assert_index_matches_files(vault)


def test_an_approved_fingerprint_passes(vault: Vault) -> None:
    token = fake_github_token(2)
    with pytest.raises(SecretRefused) as refused:
        vault.remember(f"Our public demo token is {token}")
    [finding] = credentials.find_credentials(token)
    assert finding.fingerprint in str(refused.value)
    settings_file(vault, f'[secrets]\nallow = ["{finding.fingerprint}"]\n')
    assert "warnings" not in vault.remember(f"Our public demo token is {token}")


def test_updates_refuse_added_credentials_but_not_a_persons_own(vault: Vault) -> None:
    token = fake_github_token(3)
    memory = vault.remember("The CI bot pushes on Fridays")["memory"]
    before = (vault.root / memory["path"]).read_bytes()
    for call in (
        lambda: vault.update(memory["id"], append=f"It uses {token}"),
        lambda: vault.update(memory["id"], replace_old="Fridays", replace_new=token),
        lambda: vault.update(memory["id"], content=f"Bot token {token}", expected_version=memory["version"]),
        lambda: vault.update(memory["id"], title=token),
    ):
        with pytest.raises(SecretRefused):
            call()
    assert (vault.root / memory["path"]).read_bytes() == before
    # A person's note that already holds a credential can still be edited by the tools.
    (vault.root / "ops.md").write_text(f"# Ops\nThe bot token is {token}\n")
    assert vault.update("ops.md", add_tags=["ops"])["changed"] is True
    assert vault.update("ops.md", append="Rotate it in March.")["changed"] is True
    assert token in (vault.root / "ops.md").read_text()
    assert_index_matches_files(vault)


def test_every_field_a_write_puts_in_the_file_is_guarded(vault: Vault) -> None:
    """The namespace, the type and a relation's name land in the file as much as the
    content does. Before, remember, update and link wrote a token given there as it was."""
    token = fake_github_token(7)
    memory = vault.remember("The CI bot pushes on Fridays")["memory"]
    other = vault.remember("The CI bot is owned by Priya")["memory"]
    before = {rel: (vault.root / rel).read_bytes() for rel in md_files(vault.root)}
    for call in (
        lambda: vault.remember("The deploy bot pushes on Mondays", namespace=token),
        lambda: vault.remember("The deploy bot pushes on Mondays", type=token),
        lambda: vault.update(memory["id"], namespace=token),
        lambda: vault.update(memory["id"], type=token),
        lambda: vault.link(memory["id"], other["id"], relation=token),
    ):
        with pytest.raises(SecretRefused) as refused:
            call()
        assert token not in str(refused.value)
    assert {rel: (vault.root / rel).read_bytes() for rel in md_files(vault.root)} == before


def test_import_refuses_the_whole_batch_when_an_item_holds_a_credential(vault: Vault) -> None:
    items = [{"content": "A harmless fact"}, {"content": f"Bot token {fake_github_token(4)}"}]
    with pytest.raises(SecretRefused, match="Item 1"):
        vault.import_memories(items)
    assert md_files(vault.root) == []


def test_an_imported_file_name_never_carries_a_credential(vault: Vault) -> None:
    """An export's path (or, with secrets.mode = "warn", a title the file is named after)
    holding a token: the memory is written, but laid out by its date under a name with
    the token redacted, as remember names its files. Before, the path was kept as given
    and the title slugified as it was: the token in a file name, even in refuse mode."""
    token = fake_github_token(5)
    result = vault.import_memories([{"content": "The deploy bot pushes on Fridays.", "path": f"bots/{token}.md",
                                     "created": "2026-07-20T09:00:00Z"}])
    assert result["imported"] == 1 and token not in result["paths"][0]
    settings_file(vault, '[secrets]\nmode = "warn"\n')
    result = vault.import_memories([{"content": "The bot rotates its token in March.", "title": f"bot {token}",
                                     "created": "2026-07-21T09:00:00Z"}])
    assert result["imported"] == 1
    names = md_files(vault.root)
    assert len(names) == 2 and not any(token.lower() in name.lower() for name in names), names
    assert not any(token.lower().replace("_", "-") in name for name in names), names
    assert_index_matches_files(vault)


def test_mv_never_names_a_file_after_a_credential_even_in_warn_mode(vault: Vault) -> None:
    token = fake_github_token(6)
    settings_file(vault, '[secrets]\nmode = "warn"\n')
    memory = vault.remember("The deploy bot pushes on Fridays.", title="Deploy bot")["memory"]
    with pytest.raises(SecretRefused) as refused:
        vault.move(memory["id"], f"bots/{token}.md")
    assert token not in str(refused.value)
    assert md_files(vault.root) == [memory["path"]]


def test_a_broken_settings_file_is_a_clear_error_naming_the_key(vault: Vault) -> None:
    settings_file(vault, '[secrets]\nmod = "warn"\n', approve=False)
    with pytest.raises(SettingsError, match="secrets.mode"):
        vault.remember("Anything at all")
    assert md_files(vault.root) == []


def test_new_memories_go_under_the_configured_folder(vault: Vault) -> None:
    settings_file(vault, '[memories]\nfolder = "agent"\n')
    made = vault.remember("A fact the agent learned")["memory"]
    assert made["path"].startswith("agent/2026/07/20/")
    assert_index_matches_files(vault)


@pytest.mark.anyio
async def test_the_model_is_told_what_was_found_and_what_to_do(vault: Vault) -> None:
    token = fake_github_token(5)
    async with mcp_client(vault) as client:
        text = await tool_error(client, "remember", content=f"Deploy with {token}")
    assert "GitHub token" in text and token not in text and "secrets.allow" in text
    assert md_files(vault.root) == []
