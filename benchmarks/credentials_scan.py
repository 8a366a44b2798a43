"""How fast the credential guard scans a note, beside a same-run reference.

Every tool write scans its text (up to the 100,000-character content limit) before it
reaches the vault. The reference is one regular-expression pass that visits every word
of the same text once (``re.finditer(r"\\S+")``): what any scan of the text costs at least.
Inputs are plain prose and the adversarial shapes the tests use (a careless pattern
backtracks or rescans on them).

    python benchmarks/credentials_scan.py
"""

from __future__ import annotations

import random
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_memory.trust.credentials import find_credentials  # noqa: E402

WORDS = ["customer", "acme", "prefers", "deploys", "on", "fridays", "the", "token", "password", "secret", "key", "is"]
ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def inputs() -> dict[str, str]:
    rng = random.Random(70)
    return {
        "prose": " ".join(random.Random(1).choice(WORDS) for _ in range(25_000))[:100_000],
        "letters": "a" * 100_000,
        "base64": "".join(rng.choice(ALNUM + "+/") for _ in range(100_000)),
        "repeated prefixes": (("sk-proj-" + "ghp" + "_" + "eyJhbG" + "AKIA" + "glpat" + "-aB") * 3_572)[:100_000],
        "jwt starts": (("eyJ" + "a" * 30 + ".") * 2_940)[:100_000],
        "begin lines": ("-----BEGIN RSA PRIVATE KEY-----\n" * 3_125)[:100_000],
        "url pieces": ("a://b:c" * 14_286)[:100_000],
        "assignments": ("password: " * 10_000)[:100_000],
        "colons and ats": ("x:y@" * 25_000)[:100_000],
    }


def fastest(work, text: str, runs: int = 7) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        work(text)
        best = min(best, time.perf_counter() - start)
    return best


def reference(text: str) -> int:
    return sum(1 for _ in re.finditer(r"\S+", text))


def main() -> None:
    print("| input (100,000 chars) | scan ms | reference ms | ratio |")
    print("|---|---|---|---|")
    for name, text in inputs().items():
        scan, ref = fastest(find_credentials, text), fastest(reference, text)
        print(f"| {name} | {scan * 1000:.2f} | {ref * 1000:.2f} | {scan / ref:.1f}x |")


if __name__ == "__main__":
    main()
