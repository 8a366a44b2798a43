"""``supersedes: ["[[old]]"]`` (SPEC §2): a memory another one supersedes ranks below
it, whatever BM25 and recency say. Hand-written files on a real FTS5 index."""

from __future__ import annotations

from pathlib import Path

from agent_memory.recall.rank import Scored, supersede
from agent_memory.vault.vault import Vault


def write(vault: Vault, rel: str, body: str, front: str = "") -> None:
    path = vault.root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\n{front}---\n{body}\n")


def titles(result: dict) -> list[str]:
    return [Path(h["path"]).stem for h in result["hits"]]


def test_a_superseded_memory_ranks_below_the_one_replacing_it(vault: Vault) -> None:
    # The old decision is shorter (better BM25) and was updated later: both favour it.
    write(vault, "decisions/freeze-2024.md", "Deploy freeze on Thursdays.", "updated: 2025-03-01T00:00:00Z\n")
    write(vault, "decisions/freeze-2025.md",
          "From January the deploy freeze moves to Wednesdays, as agreed in the platform review.",
          'supersedes: ["[[freeze-2024]]"]\nupdated: 2025-01-01T00:00:00Z\n')
    write(vault, "notes/other.md", "The deploy freeze calendar is shared with support.", "updated: 2024-01-01T00:00:00Z\n")
    vault.reconcile()
    for match in ("auto", "any"):
        found = titles(vault.search("deploy freeze", match=match))
        assert found.index("freeze-2025") == found.index("freeze-2024") - 1, (match, found)


def test_a_chain_of_replacements_keeps_its_order(vault: Vault) -> None:
    write(vault, "a.md", "Backup window 01:00.", "updated: 2025-06-01T00:00:00Z\n")
    write(vault, "b.md", "Backup window moved to 02:00 after the storage migration finished.",
          'supersedes: "[[a]]"\nupdated: 2025-01-01T00:00:00Z\n')
    write(vault, "c.md", "Backup window is 03:00 now that the nightly batch jobs of the data team run earlier.",
          'supersedes: ["[[b]]"]\nupdated: 2024-01-01T00:00:00Z\n')
    vault.reconcile()
    assert titles(vault.search("backup window")) == ["c", "b", "a"]


def test_a_superseded_memory_without_its_replacement_in_the_result_stays(vault: Vault) -> None:
    write(vault, "old.md", "The VPN gateway is vpn1.", "")
    write(vault, "new.md", "Office wifi password rotates monthly.", 'supersedes: ["[[old]]"]\n')
    vault.reconcile()
    assert titles(vault.search("vpn gateway")) == ["old"]


def test_a_replacement_lacking_a_term_still_ranks_above_the_memory_it_supersedes(vault: Vault) -> None:
    # Only the replaced procedure says "get": it alone holds every term.
    write(vault, "vpn-wireguard.md", "To get VPN access, install the WireGuard client and ask Dmitri for a config.")
    write(vault, "vpn-tailscale.md", "VPN access now goes through Tailscale: sign in with your work account.",
          'supersedes: ["[[vpn-wireguard]]"]\n')
    write(vault, "wifi.md", "To get guest wifi access, ask reception.")
    vault.reconcile()
    for page in (vault.search("how do I get VPN access"), vault.search("how do I get VPN access", limit=1)):
        assert titles(page)[0] == "vpn-tailscale"
        assert page["hits"][0]["complete"] is False  # it is there because it replaces a complete hit
    assert titles(vault.search("how do I get VPN access"))[:2] == ["vpn-tailscale", "vpn-wireguard"]
    # a replacement outside the filters stays out
    assert titles(vault.search("get VPN access", path_prefix="vpn-w")) == ["vpn-wireguard"]
    # paging: one page at a time gives the same order as one large query
    whole = titles(vault.search("how do I get VPN access", limit=10))
    paged = [t for offset in range(len(whole)) for t in titles(vault.search("how do I get VPN access", limit=1,
                                                                              offset=offset))]
    assert paged == whole


def test_supersede_orders_within_a_list() -> None:
    order = [Scored(rid, 1.0, ()) for rid in (1, 2, 3, 4)]
    # 4 replaces 1, 3 replaces 2; 5 (absent) replaces 3; 6 and 7 replace each other.
    moved = supersede(order, {1: {4}, 2: {3}, 3: {5}})
    assert [s.rid for s in moved] == [3, 2, 4, 1]
    cycle = [Scored(rid, 1.0, ()) for rid in (6, 7)]
    assert [s.rid for s in supersede(cycle, {6: {7}, 7: {6}})] == [6, 7]
