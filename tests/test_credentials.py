"""The guard against credentials (SPEC §3): a table of real-shaped fakes that
must be found, one per kind, and of look-alikes that must pass; messages that name the
kind and never the secret; fingerprints that are stable and approve a value.

The fakes are assembled at run time (prefix + seeded random part), so this file itself
holds no token-shaped string for a secret scanner to trip on.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import itertools
import random
import re
import string
import time
from pathlib import Path

import pytest

from agent_memory.trust import credentials
from agent_memory.trust.credentials import (
    Finding,
    check_text,
    enforce,
    enforce_fields,
    find_credentials,
    fingerprint,
    redact,
    refusal_message,
    warning_message,
)
from agent_memory.errors import InvalidInput, SecretRefused
from agent_memory.settings import SETTINGS_FILE, Settings, load_settings

ALNUM = string.ascii_letters + string.digits
BASE32 = string.ascii_uppercase + "234567"
HEX = "0123456789abcdef"
URLSAFE = ALNUM + "_-"


def rnd(n: int, alphabet: str = ALNUM, seed: int = 0) -> str:
    """A deterministic random string: the same fake on every run."""
    generator = random.Random(f"{seed}-{n}-{alphabet}")
    return "".join(generator.choice(alphabet) for _ in range(n))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def pem(label: str, body_len: int = 400, seed: int = 1, headers: str = "") -> str:
    body = rnd(body_len, ALNUM + "+/", seed)
    lines = "\n".join(body[i : i + 64] for i in range(0, len(body), 64))
    return f"-----BEGIN {label}-----\n{headers}{lines}\n-----END {label}-----"


JWT = ".".join(
    [
        b64url(b'{"alg":"HS256","typ":"JWT"}'),
        b64url(b'{"sub":"1234567890","name":"Priya","iat":1516239022}'),
        rnd(43, URLSAFE, 7),
    ]
)
AWS_EXAMPLE_ID = "AKIA" + "IOSFODNN7EXAMPLE"  # AWS's documented example, detected on purpose
AWS_ID = "AKIA" + rnd(16, BASE32, 2)
AWS_SECRET = rnd(40, ALNUM + "/+", 3)
GITHUB = "ghp" + "_" + rnd(36, seed=4)
GITLAB = "glpat" + "-" + rnd(20, URLSAFE, 5)

# --------------------------------------------------------------------------- true positives

# id, text, kind, the secret (what must never appear in a message)
POSITIVES: list[tuple[str, str, str, str]] = [
    ("aws id", f"aws_access_key_id = {AWS_ID}", "AWS access key id", AWS_ID),
    ("aws example id", f"the key is {AWS_EXAMPLE_ID}", "AWS access key id", AWS_EXAMPLE_ID),
    ("aws temporary id", f"ASIA{rnd(16, BASE32, 8)} expires soon", "AWS access key id", "ASIA" + rnd(16, BASE32, 8)),
    ("aws secret keyword", f"aws_secret_access_key={AWS_SECRET}", "AWS secret access key", AWS_SECRET),
    ("aws secret json", f'{{"SecretAccessKey": "{AWS_SECRET}"}}', "AWS secret access key", AWS_SECRET),
    ("github classic", f"CI uses token {GITHUB} for releases", "GitHub token", GITHUB),
    ("github oauth", "gho" + "_" + rnd(36, seed=10), "GitHub token", "gho" + "_" + rnd(36, seed=10)),
    ("github user-to-server", "ghu" + "_" + rnd(36, seed=11), "GitHub token", "ghu" + "_" + rnd(36, seed=11)),
    ("github server-to-server", "ghs" + "_" + rnd(36, seed=12), "GitHub token", "ghs" + "_" + rnd(36, seed=12)),
    ("github refresh", "ghr" + "_" + rnd(36, seed=13), "GitHub token", "ghr" + "_" + rnd(36, seed=13)),
    (
        "github fine-grained",
        "github_pat_" + rnd(22, seed=14) + "_" + rnd(59, seed=15),
        "GitHub token",
        "github_pat_" + rnd(22, seed=14) + "_" + rnd(59, seed=15),
    ),
    ("github in env", f"export GITHUB_TOKEN={GITHUB}", "GitHub token", GITHUB),
    ("gitlab", f"glab auth login --token {GITLAB}", "GitLab token", GITLAB),
    (
        "slack bot",
        "xoxb" + f"-{rnd(11, string.digits, 16)}-{rnd(13, string.digits, 17)}-{rnd(24, seed=18)}",
        "Slack token",
        "xoxb" + f"-{rnd(11, string.digits, 16)}-{rnd(13, string.digits, 17)}-{rnd(24, seed=18)}",
    ),
    (
        "slack user",
        "xoxp" + f"-{rnd(10, string.digits, 19)}-{rnd(10, string.digits, 20)}-{rnd(11, string.digits, 21)}-{rnd(32, HEX, 22)}",
        "Slack token",
        "xoxp" + f"-{rnd(10, string.digits, 19)}-{rnd(10, string.digits, 20)}-{rnd(11, string.digits, 21)}-{rnd(32, HEX, 22)}",
    ),
    (
        "slack webhook",
        "post to https://hooks.slack.com/services/T" + rnd(8, BASE32, 23) + "/B" + rnd(8, BASE32, 24) + "/" + rnd(24, seed=25),
        "Slack webhook URL",
        rnd(24, seed=25),
    ),
    ("stripe live", "sk" + "_live_" + rnd(24, seed=26), "Stripe secret key", "sk" + "_live_" + rnd(24, seed=26)),
    ("stripe test", "sk" + "_test_" + rnd(24, seed=27), "Stripe secret key", "sk" + "_test_" + rnd(24, seed=27)),
    ("stripe restricted", "rk" + "_live_" + rnd(24, seed=28), "Stripe restricted key", "rk" + "_live_" + rnd(24, seed=28)),
    ("stripe webhook", "whsec" + "_" + rnd(32, seed=29), "Stripe webhook secret", "whsec" + "_" + rnd(32, seed=29)),
    ("openai legacy", "OPENAI_API_KEY=sk" + "-" + rnd(48, seed=30), "OpenAI API key", "sk" + "-" + rnd(48, seed=30)),
    ("openai project", "sk" + "-proj-" + rnd(120, URLSAFE, 31), "OpenAI API key", "sk" + "-proj-" + rnd(120, URLSAFE, 31)),
    (
        "anthropic",
        "key: sk" + "-ant-api03-" + rnd(93, URLSAFE, 32) + "AA",
        "Anthropic API key",
        "sk" + "-ant-api03-" + rnd(93, URLSAFE, 32) + "AA",
    ),
    ("google api key", "maps key AIza" + rnd(35, URLSAFE, 33), "Google API key", "AIza" + rnd(35, URLSAFE, 33)),
    ("google oauth secret", "GOCSPX" + "-" + rnd(28, URLSAFE, 34), "Google OAuth client secret", "GOCSPX" + "-" + rnd(28, URLSAFE, 34)),
    ("npm", "//registry.npmjs.org/:_authToken=npm" + "_" + rnd(36, seed=35), "npm token", "npm" + "_" + rnd(36, seed=35)),
    ("pypi", "pypi" + "-AgEIcHlwaS5vcmc" + rnd(70, URLSAFE, 36), "PyPI token", "pypi" + "-AgEIcHlwaS5vcmc" + rnd(70, URLSAFE, 36)),
    ("docker hub", "dckr" + "_pat_" + rnd(27, URLSAFE, 37), "Docker Hub token", "dckr" + "_pat_" + rnd(27, URLSAFE, 37)),
    ("hugging face", "hf" + "_" + rnd(34, string.ascii_letters, 38), "Hugging Face token", "hf" + "_" + rnd(34, string.ascii_letters, 38)),
    (
        "sendgrid",
        "SG." + rnd(22, URLSAFE, 39) + "." + rnd(43, URLSAFE, 40),
        "SendGrid API key",
        "SG." + rnd(22, URLSAFE, 39) + "." + rnd(43, URLSAFE, 40),
    ),
    ("digitalocean", "dop" + "_v1_" + rnd(64, HEX, 41), "DigitalOcean token", "dop" + "_v1_" + rnd(64, HEX, 41)),
    ("shopify", "shpat" + "_" + rnd(32, HEX, 42), "Shopify token", "shpat" + "_" + rnd(32, HEX, 42)),
    (
        "age",
        "AGE-SECRET-KEY-1" + rnd(58, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 43),
        "age secret key",
        "AGE-SECRET-KEY-1" + rnd(58, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 43),
    ),
    ("rsa key block", "deploy key:\n" + pem("RSA PRIVATE KEY"), "private key block", rnd(400, ALNUM + "+/", 1)[:64]),
    ("openssh key block", pem("OPENSSH PRIVATE KEY", seed=44), "private key block", rnd(400, ALNUM + "+/", 44)[64:128]),
    ("ec key block", pem("EC PRIVATE KEY", 160, seed=45), "private key block", rnd(160, ALNUM + "+/", 45)[:64]),
    ("pkcs8 key block", pem("PRIVATE KEY", seed=46), "private key block", rnd(400, ALNUM + "+/", 46)[:64]),
    ("encrypted pkcs8", pem("ENCRYPTED PRIVATE KEY", seed=47), "private key block", rnd(400, ALNUM + "+/", 47)[:64]),
    ("pgp key block", pem("PGP PRIVATE KEY BLOCK", seed=48), "private key block", rnd(400, ALNUM + "+/", 48)[:64]),
    (
        "encrypted pem with headers",
        pem("RSA PRIVATE KEY", seed=49, headers="Proc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,2F8A1B3C4D5E6F70\n\n"),
        "private key block",
        rnd(400, ALNUM + "+/", 49)[:64],
    ),
    (
        "key block pasted from json",
        '{"private_key": "' + pem("PRIVATE KEY", seed=50).replace("\n", "\\n") + '\\n"}',
        "private key block",
        rnd(400, ALNUM + "+/", 50)[:64],
    ),
    (
        "key block without its end line",
        "-----BEGIN OPENSSH PRIVATE KEY-----\n" + rnd(70, ALNUM + "+/", 51) + "\n" + rnd(70, ALNUM + "+/", 52),
        "private key block",
        rnd(70, ALNUM + "+/", 51),
    ),
    ("jwt", f"Authorization: Bearer {JWT}", "JWT", JWT),
    ("postgres url", "db is postgres://admin:pw@db.internal:5432/app", "password in a URL", "admin:pw"),
    ("url at a sentence end", "Connect with mysql://root:Tr0ub4dor@10.0.0.5.", "password in a URL", "root:Tr0ub4dor"),
    ("redis url without user", "redis://:s3cretPass@cache:6379/0", "password in a URL", ":s3cretPass"),
    ("mongodb+srv url", "mongodb+srv://app:Xy9pQ2zW@cluster0.mongodb.net/", "password in a URL", "app:Xy9pQ2zW"),
    ("ipv6 host url", "ftp://bob:hunter2@[2001:db8::1]/pub", "password in a URL", "bob:hunter2"),
    ("https basic auth url", "https://deploy:9f8e7d6c5b@git.acme.io/repo.git", "password in a URL", "deploy:9f8e7d6c5b"),
    ("password assignment", 'password = "Str0ngP@ss!"', "password or secret value", "Str0ngP@ss!"),
    ("hex api key", "api_key: 5f4dcc3b5aa765d61d8327deb882cf99", "password or secret value", "5f4dcc3b5aa765d61d8327deb882cf99"),
    ("env password", "DB_PASSWORD=Q7v9xLm2Rt4k", "password or secret value", "Q7v9xLm2Rt4k"),
    ("json client secret", '{"client_secret": "' + rnd(32, seed=53) + '"}', "password or secret value", rnd(32, seed=53)),
    ("yaml token", "slack:\n  token: " + rnd(24, seed=54) + "\n", "password or secret value", rnd(24, seed=54)),
    ("prose password", "The password is Xk29fj3kd9Lm.", "password or secret value", "Xk29fj3kd9Lm"),
    ("password in parentheses", "Wi-Fi (password: Xk29fj3kd9Lm) in the lobby", "password or secret value", "Xk29fj3kd9Lm"),
    ("connection string pwd", "Server=db;Uid=sa;Pwd=Q7v!x9Lm2#;Database=app", "password or secret value", "Q7v!x9Lm2#"),
    ("django secret key", "SECRET_KEY = 'dj4ng0-" + rnd(40, ALNUM + "!@#%^&*(-_=+)", 55)[:30] + "'", "password or secret value", "dj4ng0-"),
    ("uuid labelled as a token", "api token: 123e4567-e89b-12d3-a456-426614174000", "password or secret value", "123e4567-e89b"),
    ("go assignment", 'apiKey := "' + rnd(24, seed=56) + '"', "password or secret value", rnd(24, seed=56)),
]


@pytest.mark.parametrize("text, kind, secret", [p[1:] for p in POSITIVES], ids=[p[0] for p in POSITIVES])
def test_each_kind_of_credential_is_found(text: str, kind: str, secret: str) -> None:
    findings = find_credentials(text)
    assert [f.kind for f in findings] == [kind]
    found = text[findings[0].start : findings[0].end]
    assert secret in found  # the span covers the secret, for redaction
    assert findings[0].fingerprint == fingerprint(found) or kind == "private key block"


@pytest.mark.parametrize("text, kind, secret", [p[1:] for p in POSITIVES], ids=[p[0] for p in POSITIVES])
def test_no_message_ever_contains_the_secret(text: str, kind: str, secret: str) -> None:
    findings = find_credentials(text)
    for message in (refusal_message(findings), warning_message(findings), repr(findings)):
        assert kind in message
        assert secret not in message
        assert secret[-12:] not in message  # not even its tail
    with pytest.raises(SecretRefused) as caught:
        enforce(text, Settings(), where="the content")
    assert secret not in str(caught.value)
    assert secret not in redact(text, findings)


def test_an_aws_key_id_brings_the_secret_key_next_to_it() -> None:
    text = f"[default]\naws_access_key_id = {AWS_ID}\nregion = eu-west-1\nkey {AWS_SECRET}\n"
    findings = find_credentials(text)
    assert [(f.kind, f.line) for f in findings] == [("AWS access key id", 2), ("AWS secret access key", 4)]
    assert text[findings[1].start : findings[1].end] == AWS_SECRET


def test_a_40_character_string_far_from_any_key_id_is_not_an_aws_secret() -> None:
    text = f"{AWS_ID} is the id.\n" + "Plenty of unrelated prose follows here. " * 12 + AWS_SECRET
    assert [f.kind for f in find_credentials(text)] == ["AWS access key id"]


def test_a_git_commit_id_next_to_an_aws_key_is_not_its_secret() -> None:
    text = f"rotated {AWS_ID} in commit 696e941d9c0b2a7e8f1d3c4b5a69788766554433 today"
    assert [f.kind for f in find_credentials(text)] == ["AWS access key id"]


def test_the_most_specific_kind_names_a_token_inside_a_url() -> None:
    text = f"git remote add origin https://oauth2:{GITLAB}@gitlab.com/team/repo.git"
    assert [f.kind for f in find_credentials(text)] == ["GitLab token"]


def test_several_credentials_are_each_found_in_text_order_with_their_lines() -> None:
    text = f"first {GITHUB}\nsecond line\nthird postgres://admin:pw@db and {JWT}\n"
    findings = find_credentials(text)
    assert [(f.kind, f.line) for f in findings] == [
        ("GitHub token", 1),
        ("password in a URL", 3),
        ("JWT", 3),
    ]


@pytest.mark.parametrize(
    "text, value",
    [
        ("The password is Xk29fj3kd9Lm.", "Xk29fj3kd9Lm"),
        ("Wi-Fi (password: Xk29fj3kd9Lm) in the lobby", "Xk29fj3kd9Lm"),
        ("password: Xk29fj3kd9Lm: rotate it monthly", "Xk29fj3kd9Lm"),
        ("Connect with mysql://root:Tr0ub4dor@10.0.0.5.", "root:Tr0ub4dor@10.0.0.5"),
    ],
)
def test_punctuation_that_ends_a_sentence_is_not_part_of_the_secret(text: str, value: str) -> None:
    [finding] = find_credentials(text)
    assert text[finding.start : finding.end] == value
    assert finding.fingerprint == fingerprint(value)


# --------------------------------------------------------------------------- near misses


NEAR_MISSES: list[tuple[str, str]] = [
    ("prose", "Customer ACME prefers deploys on Fridays; the API key rotation is quarterly."),
    ("prose about passwords", "The password is stored in 1Password under 'Prod DB'; ask Priya for access."),
    ("prose about tokens", "Use a token bucket: 3 tokens per second, burst of 10. The secret is patience."),
    ("token counts", "max_tokens: 4096\ntoken_budget=2000\ntokens: 1500\ntoken_count = 123456789"),
    ("keyword with a word", "secret: we ship on Fridays\ntoken: abc\naccess_key: see the wiki page"),
    ("passphrase", "password: correct-horse-battery-staple"),
    ("repetitive values", "password: Aa1Aa1Aa1Aa1\ntoken = 1111aaaa1111aaaa2222"),
    ("passwordless", "passwordless login is enabled; password_reset = true"),
    ("uuid", "request 123e4567-e89b-12d3-a456-426614174000 failed"),
    ("git short sha", "fixed in b84e5b6 and 696e941"),
    ("git full sha", "commit 696e941d9c0b2a7e8f1d3c4b5a69788766554433"),
    ("sha256", "sha256 " + hashlib.sha256(b"x").hexdigest()),
    ("sha512 hex", hashlib.sha512(b"x").hexdigest()),
    ("md5 in prose", "checksum 5f4dcc3b5aa765d61d8327deb882cf99 matches"),
    ("memory ids", "see 01jd8x4k2m9q7r3t and 01jd8x4k2m9q7r3v"),
    ("ulid", "01ARZ3NDEKTSV4RRFFQ69G5FAV"),
    ("base64 of plain text", base64.b64encode(b"This is only a sentence about deploys on Fridays, nothing more.").decode()),
    ("base64 of binary", base64.b64encode(bytes(range(200))).decode()),
    ("versions", "Python 3.11.7, v1.2.3, version: 2.31.0-rc1, token: v1.2.3-beta"),
    ("dates", "secret: 2026-07-20T09:00:00Z\npassword: 2026-07-20"),
    ("openai placeholder", "set OPENAI_API_KEY=sk-... or sk-xxxxxxxxxxxxxxxxxxxxxxxx"),
    ("sk- words", "sk-your-api-key-here and sk-learn-style-estimators-for-everyone"),
    ("sk- inside words", "task-management-service-2024-release-candidate-Final and risk-Assessment-2024-Q3-v2-final"),
    ("github mask", "ghp" + "_" + "x" * 36),
    ("aws mask", "AKIA" + "X" * 16 + " and AKIA" + "0" * 16),
    ("aws lower case", "akia" + rnd(16, BASE32, 2).lower()),
    ("aws inside base64", "ZZ" + "AKIA" + rnd(16, BASE32, 2) + "QQ"),
    ("slack placeholder", "xoxb-your-token and xoxp-..."),
    ("stripe publishable", "pk" + "_live_" + rnd(24, seed=60)),
    ("templated values", 'api_key = <your-api-key>\npassword: ${DB_PASSWORD}\ntoken = $GITHUB_TOKEN\nsecret="{{ vault_secret }}"'),
    ("references", "password: os.environ['DB_PASSWORD']\ntoken: op://Private/GitHub/token\nsecret=process.env.SECRET"),
    ("masked values", "password: ********\ntoken = xxxxxxxxxxxx\napi_key: •••••••• secret: …"),
    ("example values", "api_key=your_api_key_here password=EXAMPLE-Passw0rd-123 token=changeme123456"),
    ("bcrypt hash", "password_hash = $2b$12$" + rnd(53, ALNUM + "./", 61)),
    ("path values", "pwd: /home/priya/projects2024\nprivate_key: ~/.ssh/id_ed25519\nsecret: ./secrets/prod.key"),
    ("url placeholders", "postgres://user:password@localhost:5432/db\nredis://:password@localhost admin:secret@db"),
    ("url to a documentation host", "https://samuel:pass@example.com:8000 and ftp://bob:Xy9pQ2zW@files.example"),
    ("url of single letters", "new URL('https://a:b@host/?abc') prints https://a:b@xn--g6w251d/?abc"),
    ("templated url", "postgres://admin:${PGPASSWORD}@db/app and mysql://root:%s@host and https://me:<token>@git.example.com"),
    ("masked url", "https://deploy:****@git.acme.io/repo, https://bob:***@host and https://bob:x@host"),
    ("urls without passwords", "git@github.com:org/repo.git ssh://git@host/repo https://user@host/ http://[::1]:8080/"),
    ("port then at", "https://example.com:8080/a@b and mailto:priya@example.com"),
    ("key block mentioned", "files starting with -----BEGIN OPENSSH PRIVATE KEY----- live in ~/.ssh"),
    ("key block elided", "-----BEGIN PRIVATE KEY-----\n...\n-----END PRIVATE KEY-----"),
    ("key block masked", "-----BEGIN PRIVATE KEY-----\n" + "A" * 64 + "\n" + "A" * 64 + "\n-----END PRIVATE KEY-----"),
    ("public key block", pem("PUBLIC KEY", seed=62)),
    ("certificate", pem("CERTIFICATE", seed=63)),
    ("ssh public key", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + rnd(43, ALNUM + "+/", 64) + " priya@laptop"),
    ("jwt header only", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9 is a JWT header"),
    ("jwt-shaped json without alg", b64url(b'{"a":1,"b":2}') + "." + b64url(b'{"c":"three"}') + "." + rnd(30, URLSAFE, 68)),
    ("not json jwt", "eyJ" + rnd(20, URLSAFE, 65) + ".eyJ" + rnd(20, URLSAFE, 66) + "." + rnd(30, URLSAFE, 67)),
    ("emails", "priya@example.com, ops+alerts@acme.io"),
    ("aizawl", "We met in Aizawl and AIzawl."),
    ("hf identifiers", "hf_model_name_for_the_tests and hf_" + "abcdefghijklmnopqrstuvwxyzabcdefgh"),
    ("obsidian note", "---\ntags: [customer, deploy]\nrelated_to: [\"[[acme-billing]]\"]\n---\nSee [[Security and privacy]]."),
    ("code", "def check_password(password: str) -> bool:\n    return hmac.compare_digest(password, stored)"),
    ("code assignments", "token = Keyword.Reserved\nif token is Name.Variable:\npassword = utf8_to_utf16_dup(v)\napi_key = cfg.api_key2"),
]


@pytest.mark.parametrize("text", [n[1] for n in NEAR_MISSES], ids=[n[0] for n in NEAR_MISSES])
def test_look_alikes_are_not_credentials(text: str) -> None:
    assert find_credentials(text) == []


# --------------------------------------------------------------------------- quick skips


def _mixed_texts() -> list[str]:
    """Every table above, each text also in upper and title case, glued to its neighbour,
    and with a non-ASCII letter in front (a scan of non-ASCII text takes the other path)."""
    texts = [p[1] for p in POSITIVES] + [n[1] for n in NEAR_MISSES]
    texts += [t.upper() for t in texts] + [t.title() for t in texts]
    texts += [a + "\n" + b for a, b in itertools.pairwise(texts)]
    texts += ["é " + t for t in texts]
    texts += ["Paſſword: hunter2, ask Bo", "the \u212aEY is: hunter2", "DB_PASSWORD=hunter2", "pın: 1234",
              "ACCESS KEY: AbC123xYz", "Passcode was 4411; token is now Xy9pQ2zW", "PIN = 9876", "OTP: 123456"]
    return texts


def test_the_quick_skips_never_change_what_a_scan_finds(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rule is skipped for a text without any of its literals (``needs``): the same
    findings as every rule run over every text, for every text of the tables above."""
    texts = _mixed_texts()
    quick = [find_credentials(t) for t in texts]
    assert sum(map(bool, quick)) > len(POSITIVES)  # the tables do hold credentials, in several cases
    monkeypatch.setattr(credentials, "_RULES", tuple(dataclasses.replace(r, needs=()) for r in credentials._RULES))
    credentials._scanned.cache_clear()
    try:
        assert [find_credentials(t) for t in texts] == quick
    finally:
        credentials._scanned.cache_clear()


def test_every_rule_says_what_its_matches_hold() -> None:
    """Each rule's literals are in its pattern as written (lower case where it reads the
    lowered text), so a rule edited without its literals shows up here."""
    for rule in credentials._RULES:
        assert rule.needs, rule.kind
        for literal in rule.needs:
            assert literal in rule.pattern().pattern or re.escape(literal) in rule.pattern().pattern, (rule.kind, literal)
            assert not rule.lowered or literal == literal.lower(), (rule.kind, literal)


def test_the_quick_exit_never_changes_a_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """A text with no credential word is returned as it is without running the value
    pattern: the same names as the pattern run over every text."""
    texts = _mixed_texts()
    quick = [credentials.redact_for_names(t) for t in texts]
    assert any(credentials.REDACTED in q for q in quick)
    monkeypatch.setattr(credentials, "_CREDENTIAL_HINTS", ("",))  # "" is in every text: never a quick exit
    assert [credentials.redact_for_names(t) for t in texts] == quick


# --------------------------------------------------------------------------- fingerprints


def test_fingerprints_are_stable_printable_and_computable_by_hand() -> None:
    # printf %s AKIAIOSFODNN7EXAMPLE | sha256sum | cut -c1-16
    assert fingerprint(AWS_EXAMPLE_ID) == "sha256:" + hashlib.sha256(AWS_EXAMPLE_ID.encode()).hexdigest()[:16]
    assert fingerprint(AWS_EXAMPLE_ID) == "sha256:1a5d44a2dca19669"
    [finding] = find_credentials(f"key {AWS_EXAMPLE_ID}")
    assert finding.fingerprint == "sha256:1a5d44a2dca19669"


def test_the_same_secret_has_the_same_fingerprint_wherever_it_appears() -> None:
    [a] = find_credentials(f"token {GITHUB}")
    [b] = find_credentials(f"# Deploys\n\nThe CI job reads GITHUB_TOKEN={GITHUB} from its env.")
    assert a.fingerprint == b.fingerprint
    [other] = find_credentials("token ghp" + "_" + rnd(36, seed=99))
    assert other.fingerprint != a.fingerprint


def test_a_rewrapped_key_block_keeps_its_fingerprint() -> None:
    block = pem("OPENSSH PRIVATE KEY", seed=44)
    [lf] = find_credentials(block)
    [crlf] = find_credentials(block.replace("\n", "\r\n"))
    [json_escaped] = find_credentials(block.replace("\n", "\\n"))
    assert lf.fingerprint == crlf.fingerprint == json_escaped.fingerprint


def test_a_url_password_is_fingerprinted_with_its_user_and_host() -> None:
    # A short password alone could be guessed back from its hash; with user and host it
    # cannot be looked up, and the same password for another host is another finding.
    [a] = find_credentials("postgres://admin:pw@db.internal/app")
    [b] = find_credentials("postgres://admin:pw@db2.internal/app")
    assert a.fingerprint == fingerprint("admin:pw@db.internal")
    assert a.fingerprint != b.fingerprint
    assert a.fingerprint != fingerprint("pw")


# --------------------------------------------------------------------------- settings


def test_an_approved_fingerprint_is_no_longer_reported() -> None:
    text = f"key {AWS_EXAMPLE_ID} and token {GITHUB}"
    assert [f.kind for f in check_text(text)] == ["AWS access key id", "GitHub token"]
    approved = Settings(secrets_allow=(fingerprint(AWS_EXAMPLE_ID),))
    assert [f.kind for f in check_text(text, approved)] == ["GitHub token"]


def test_approving_through_the_settings_file_works_end_to_end(tmp_path: Path) -> None:
    text = f"The AWS docs use {AWS_EXAMPLE_ID} as their example key id."
    with pytest.raises(SecretRefused) as caught:
        enforce(text, load_settings(tmp_path))
    message = str(caught.value)
    assert 'allow = ["sha256:1a5d44a2dca19669"]' in message  # what to paste
    (tmp_path / SETTINGS_FILE).write_text('[secrets]\nallow = ["sha256:1a5d44a2dca19669"]\n')
    assert enforce(text, load_settings(tmp_path)) == []


def test_refuse_is_the_default_and_warn_returns_the_findings() -> None:
    text = f"token {GITHUB}"
    for settings in (None, Settings()):
        with pytest.raises(SecretRefused):
            enforce(text, settings)
    findings = enforce(text, Settings(secrets_mode="warn"))
    assert [f.kind for f in findings] == ["GitHub token"]
    assert enforce("nothing secret here", Settings()) == []


def test_the_refusal_is_an_invalid_input_error() -> None:
    with pytest.raises(InvalidInput):
        enforce(f"token {GITHUB}")


# --------------------------------------------------------------------------- messages


def test_the_refusal_names_the_kind_where_and_every_way_forward() -> None:
    findings = find_credentials(f"line one\ntoken {GITHUB}")
    message = refusal_message(findings, where="the title")
    assert "GitHub token (line 2, fingerprint sha256:" in message
    assert "in the title" in message
    assert "Nothing was written" in message
    assert "Remove the secret" in message and "where it lives" in message
    assert f"secrets.allow in {SETTINGS_FILE}" in message
    assert f'allow = ["{findings[0].fingerprint}"]' in message
    assert 'secrets.mode = "warn"' in message


def test_the_warning_says_it_was_stored_and_how_to_silence_it() -> None:
    findings = find_credentials(f"token {GITHUB}")
    message = warning_message(findings, where="import item 3")
    assert message.startswith("Warning: stored")
    assert "GitHub token" in message and "in import item 3" in message
    assert "secrets.allow" in message


def test_one_refusal_names_every_field_that_holds_a_credential() -> None:
    fields = {
        "the content": f"deploy with {GITHUB}",
        "the title": "Deploy notes",
        "the source": f"postgres://admin:pw@db.internal and {JWT}",
        "the tags": "",
    }
    with pytest.raises(SecretRefused) as caught:
        enforce_fields(fields, Settings())
    message = str(caught.value)
    assert message.startswith("Refused: found what looks like 3 credentials — in the content: GitHub token (line 1")
    assert "; in the source: password in a URL (line 1" in message and ", JWT (line 1" in message
    assert "the title" not in message and "the tags" not in message
    for secret in (GITHUB, "admin:pw", JWT):
        assert secret not in message
    found = enforce_fields(fields, Settings(secrets_mode="warn"))
    assert {where: [f.kind for f in fs] for where, fs in found.items()} == {
        "the content": ["GitHub token"],
        "the source": ["password in a URL", "JWT"],
    }
    assert enforce_fields({"the content": "nothing here", "the title": ""}) == {}


def test_a_text_full_of_secrets_gets_a_bounded_message() -> None:
    text = "\n".join("ghp" + "_" + rnd(36, seed=100 + i) for i in range(40))
    findings = find_credentials(text)
    assert len(findings) == 40
    message = refusal_message(findings)
    assert "40 credentials" in message
    assert "and 35 more" in message
    assert len(message) < 2000


def test_redact_replaces_each_secret_with_its_kind() -> None:
    text = f"CI uses token {GITHUB} and postgres://admin:pw@db"
    redacted = redact(text, find_credentials(text))
    assert redacted == "CI uses token [redacted GitHub token] and postgres://[redacted password in a URL]"
    assert find_credentials(redacted) == []


def test_a_finding_holds_no_part_of_the_secret() -> None:
    [finding] = find_credentials(f"token {GITHUB}")
    assert isinstance(finding, Finding)
    assert all(GITHUB[4:12] not in str(value) for value in vars(finding).values())


# --------------------------------------------------------------------------- speed


def _fastest(text: str, runs: int = 5) -> float:
    """The least CPU time this thread spent scanning ``text``: CPU time, not wall time, so
    other work on the machine does not stretch one side of a comparison more than the other."""
    best = float("inf")
    for _ in range(runs):
        start = time.thread_time()
        find_credentials(text)
        best = min(best, time.thread_time() - start)
    return best


def prose(chars: int = 100_000) -> str:
    words = ["customer", "acme", "prefers", "deploys", "on", "fridays", "the", "token", "password", "secret", "key", "is"]
    return " ".join(random.Random(1).choice(words) for _ in range(chars // 4))[:chars]


ADVERSARIAL = {
    # inputs shaped to make a careless pattern backtrack or rescan (each is 100,000 chars)
    "letters": "a" * 100_000,
    "base64": rnd(100_000, ALNUM + "+/", 70),
    "repeated prefixes": ("sk-proj-" + "ghp" + "_" + "eyJhbG" + "AKIA" + "glpat" + "-aB") * 3_572,
    "jwt starts": ("eyJ" + "a" * 30 + ".") * 2_940,
    "begin lines": "-----BEGIN RSA PRIVATE KEY-----\n" * 3_125,
    "url pieces": "a://b:c" * 14_286,
    "assignments": "password: " * 10_000,
    "colons and ats": "x:y@" * 25_000,
    "slack digits": ("xoxb" + "-1" * 20 + "-") * 2_381,
}


@pytest.mark.parametrize("text", list(ADVERSARIAL.values()), ids=list(ADVERSARIAL))
def test_no_input_makes_the_scan_slow(text: str) -> None:
    """A pattern that backtracks or rescans costs hundreds of times a plain note's scan on
    such input; a sound scanner stays within a small multiple (under 8 here). The bound is
    against plain prose of the same length scanned in this same test, in CPU time, not a
    fixed time (how fast a scan is: benchmarks/credentials_scan.py)."""
    reference = _fastest(prose())
    assert _fastest(text[:100_000]) < 100 * reference
