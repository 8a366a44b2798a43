"""Find credentials in text before it reaches the vault, and in files before a commit.

A token pasted into a memory would be in git history for good. Shape rules for known
formats decide first; a keyword rule catches a random-looking value assigned to a word
like ``password``. Only kinds, positions and fingerprints leave this module, never the
value. The rules, the placeholders let through and the fingerprint format are in
docs/design/credentials.md.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import codecs
import functools
import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..errors import SecretRefused
from ..patterns import lazy_pattern


class SecretsSettings(Protocol):
    """What the guard reads of a vault's settings (``settings.Settings`` is one; settings
    imports this module to check fingerprints, so this one names only what it reads)."""

    @property
    def secrets_mode(self) -> str: ...

    @property
    def secrets_allow(self) -> tuple[str, ...]: ...


SETTINGS_FILE_NAME = ".agent-memory.toml"  # named in messages; settings.py owns the loading
FINGERPRINT_PREFIX = "sha256:"
_FINGERPRINT_HEX = 16
_FINGERPRINT_RE = re.compile(rf"{FINGERPRINT_PREFIX}[0-9a-f]{{{_FINGERPRINT_HEX}}}")

# A random part with fewer distinct characters than this is a mask (xxxx, 0000, ****).
_MIN_DISTINCT = 6

# The kinds whose rules do more than match (named once, so the scan loop cannot drift).
_KEY_BLOCK = "private key block"
_URL_PASSWORD = "password in a URL"
_AWS_KEY_ID = "AWS access key id"
_AWS_SECRET = "AWS secret access key"


@dataclass(frozen=True)
class Finding:
    """One credential found: what kind, where, and a fingerprint — never the value.

    ``start``/``end`` index the fingerprinted span in the scanned text (for redaction);
    ``line`` is 1-based, for messages.
    """

    kind: str
    fingerprint: str
    start: int
    end: int
    line: int


def fingerprint(value: str) -> str:
    """The stable, printable fingerprint of a value: ``sha256:`` + 16 hex digits.

    Plain SHA-256 so a user can compute it for a value they mean to approve:
    ``printf %s "$VALUE" | sha256sum | cut -c1-16``.
    """
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
    return FINGERPRINT_PREFIX + digest[:_FINGERPRINT_HEX]


def is_fingerprint(text: str) -> bool:
    """Whether ``text`` is in the fingerprint format (settings validates ``secrets.allow``)."""
    return _FINGERPRINT_RE.fullmatch(text) is not None


# --------------------------------------------------------------------------- value checks


def _entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    counts = Counter(value)
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _not_mask(value: str) -> bool:
    """The random part of a token: a mask like ``xxxx…`` or ``0000…`` is a placeholder."""
    return len(set(value.lower())) >= _MIN_DISTINCT


def _mixed(value: str) -> bool:
    """Random base62 of 20+ characters has upper and lower case letters and digits; a
    kebab-case name (``sk-my-service-key``) or a word placeholder does not."""
    return (
        _not_mask(value)
        and any(c.isupper() for c in value)
        and any(c.islower() for c in value)
        and any(c.isdigit() for c in value)
    )


def _two_cases(value: str) -> bool:
    """Hugging Face tokens are letters only, of both cases."""
    return _not_mask(value) and any(c.isupper() for c in value) and any(c.islower() for c in value)


_CALL_RE = re.compile(r"[A-Za-z_$][A-Za-z0-9_$.]*\(")  # password = derive_key(…)
_IDENTIFIER_RE = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*(?:\.[A-Za-z_$][A-Za-z0-9_$]*)+")  # a.b.c in code
_VERSION_RE = re.compile(r"v?\d+(?:\.\d+)+(?:[-+][0-9A-Za-z.]+)?")
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ][0-9:.]+(?:Z|[+-]\d{2}:?\d{2})?)?")
_PLACEHOLDER_WORDS = (
    "xxxx", "****", "....", "…", "•", "example", "your", "changeme", "change_me", "placeholder",
    "redacted", "dummy", "<", ">", "{", "}", "[", "]",
)
_REFERENCE_PREFIXES = ("$", "%", "/", "~", "./", "../", "env:", "env.", "process.env", "os.environ", "os.getenv", "getenv(", "secrets.", "vault:", "op://", "arn:")


_MASK_CHARS = frozenset("*x.•…#?_-")


def _is_placeholder(value: str) -> bool:
    """Templating, masks, references to where a secret lives — not secrets themselves."""
    low = value.lower()
    if low.startswith(_REFERENCE_PREFIXES) or any(word in low for word in _PLACEHOLDER_WORDS):
        return True
    return set(low) <= _MASK_CHARS  # "xxx", "***", "..."


def _looks_random(value: str) -> bool:
    """The keyword rule's test: does a value assigned to ``password``/``token``/… look
    like a generated secret rather than a word, a number, a path, a version or a date?

    At least 8 characters with a digit, at least 3 bits of entropy per character, not a
    placeholder, reference or code (``token = Keyword.Reserved``, ``self.key2``,
    ``password = derive(v)``),
    and either three character classes (lower, upper, digit, symbol: ``Str0ngP@ss!``)
    or, from 16 characters on, letters and digits (hex and base62 keys). A password of
    letters and symbols only is missed: without a digit, values next to these words are
    mostly code and prose. Cheap tests first: most such values are short words or numbers.
    """
    if len(value) < 8:
        return False
    lower = any(c.islower() for c in value)
    upper = any(c.isupper() for c in value)
    digit = any(c.isdigit() for c in value)
    symbol = any(not c.isalnum() for c in value)
    if not digit or (lower + upper + symbol < 2 and not (len(value) >= 16 and (lower or upper))):
        return False
    if "://" in value or _VERSION_RE.fullmatch(value) or _DATE_RE.fullmatch(value):
        return False
    if _IDENTIFIER_RE.fullmatch(value) or _CALL_RE.match(value):
        return False
    return not _is_placeholder(value) and _entropy(value) >= 3.0


def _jwt_header(value: str) -> bool:
    """A JWT's first part is base64url of a JSON object naming ``alg`` or ``typ``."""
    head = value.split(".", 1)[0]
    try:
        decoded = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (ValueError, binascii.Error, UnicodeDecodeError, RecursionError):
        return False
    return isinstance(decoded, dict) and ("alg" in decoded or "typ" in decoded)


# Passwords of documentation: "https://user:password@host", "admin:secret@…".
_URL_GENERIC_PASSWORDS = {"password", "pass", "passwd", "pwd", "secret", "mypassword", "yourpassword"}
# Hosts reserved for documentation (RFC 2606): an example, not a place to log in to.
_EXAMPLE_HOST = re.compile(r"(?:[A-Za-z0-9-]+\.)*(?:example\.(?:com|net|org)|[A-Za-z0-9-]+\.(?:example|invalid))")


def _url_password(secret: str) -> bool:
    """``user:password@host``: any real password counts, however short (``admin:pw``);
    templating, masks, a password that is just the word "password" or "secret", and
    the documentation hosts ``example.com``/``*.example`` do not."""
    userinfo, _, host = secret.rpartition("@")
    password = userinfo.partition(":")[2]
    if not password or _is_placeholder(password) or password.lower() in _URL_GENERIC_PASSWORDS:
        return False
    if len(userinfo) <= 3:
        return False  # "a:b", as URL parsers' documentation writes it
    return not _EXAMPLE_HOST.fullmatch(host.rstrip("."))


# --------------------------------------------------------------------------- rules

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_TOKEN = "A-Za-z0-9_-"
_BASE64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def _start(literal: str, inside: str = _TOKEN) -> str:
    """``literal``, but not where it continues a longer word: ``sk-`` in ``task-``.

    The lookbehind comes *after* the literal so the regex engine still jumps from one
    occurrence of the literal to the next (a leading lookbehind makes it try every
    position: 30 ms instead of 0.05 ms per 100 KB), and a long run of token characters
    is tried once, at its start, not once per repeated prefix inside it.
    """
    lit = re.escape(literal)
    return f"{lit}(?<![{inside}]{lit})"


@dataclass(frozen=True)
class _Rule:
    """One credential shape.

    ``group`` is the span fingerprinted and reported; ``check`` takes the ``random``
    group and may reject a look-alike. ``lowered`` rules match against an
    ASCII-lowercased copy of the text (case-insensitive keywords without ``(?i)``,
    which is 6x slower); values are always taken from the original text.
    """

    kind: str
    pattern: Callable[[], re.Pattern[str]]  # compiled when a text first holds one of ``needs``
    check: Callable[[str], bool] = _not_mask
    group: str | int = "secret"
    random: str | int = "secret"
    trim: str = ""  # trailing characters that end a sentence rather than the value
    lowered: bool = False
    needs: tuple[str, ...] = ()  # every match holds one of these (where the rule looks): without any, it is skipped


def _rule(
    kind: str,
    pattern: str,
    check: Callable[[str], bool] = _not_mask,
    *,
    group: str | int = "secret",
    random: str | int | None = "random",
    trim: str = "",
    lowered: bool = False,
    needs: tuple[str, ...] = (),
) -> _Rule:
    """A rule; ``needs``: literals of ``pattern`` one of which every match contains
    (lower case for a ``lowered`` rule): a text without any is not searched with it,
    a few substring tests instead of a regex pass (most texts hold no credential)."""
    return _Rule(kind, lazy_pattern(pattern), check, group, group if random is None else random, trim, lowered, needs)


_E = r"(?![A-Za-z0-9_-])"  # not followed by a token character: not part of a longer string

# Quantifiers are bounded and possessive (``{m,n}+``): a failed attempt never backtracks.
_RULES: tuple[_Rule, ...] = (
    # Specific shapes first: where spans overlap, the earlier rule names the finding.
    _rule(_KEY_BLOCK, r"-----BEGIN (?:[A-Z0-9]{1,20}+ ){0,4}PRIVATE KEY(?: BLOCK)?-----", group=0, random=0,
          needs=("-----BEGIN ",)),
    _rule(_AWS_KEY_ID, rf"(?P<secret>{_start('A', 'A-Za-z0-9+/')}(?:KIA|SIA|BIA|CCA|3T[A-Z0-9])(?P<random>[A-Z2-7]{{16}}+))(?![A-Za-z0-9])", needs=("KIA", "SIA", "BIA", "CCA", "3T")),
    _rule(
        _AWS_SECRET,
        r"secret_?access_?key[\"']?[ \t]{0,20}+(?:=>|:=|[:=])[ \t]{0,20}+[\"']?(?P<secret>[a-z0-9/+]{40}+)(?![a-z0-9/+=])",
        _mixed,
        random=None,
        lowered=True,
        needs=("secret",),
    ),
    _rule("GitHub token", rf"(?P<secret>{_start('gh')}[pousr]_(?P<random>[A-Za-z0-9]{{36,251}}+)){_E}", needs=("gh",)),
    _rule("GitHub token", rf"(?P<secret>{_start('github_pat_')}(?P<random>[A-Za-z0-9_]{{50,244}}+)){_E}", needs=("github_pat_",)),
    _rule("GitLab token", rf"(?P<secret>{_start('gl')}(?:pat|dt|rt|ptt|soat|ft|oas|cbt|imt)-(?P<random>[A-Za-z0-9_-]{{20,240}}+(?:\.[A-Za-z0-9_-]{{2,40}}+){{0,2}}+)){_E}", needs=("gl",)),
    _rule("Slack token", rf"(?P<secret>{_start('xox')}[abposr]-(?:[0-9]{{1,20}}+-){{1,4}}+(?P<random>[A-Za-z0-9]{{10,64}}+)(?:-[A-Za-z0-9]{{1,64}}+){{0,3}}+){_E}", needs=("xox",)),
    _rule("Slack webhook URL", r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9]{5,20}+/[A-Za-z0-9]{5,20}+/(?P<random>[A-Za-z0-9]{16,64}+))", needs=("hooks.slack.com/",)),
    _rule("Stripe secret key", rf"(?P<secret>{_start('sk_')}(?:live|test|prod)_(?P<random>[A-Za-z0-9]{{16,247}}+)){_E}", needs=("sk_",)),
    _rule("Stripe restricted key", rf"(?P<secret>{_start('rk_')}(?:live|test|prod)_(?P<random>[A-Za-z0-9]{{16,247}}+)){_E}", needs=("rk_",)),
    _rule("Stripe webhook secret", rf"(?P<secret>{_start('whsec_')}(?P<random>[A-Za-z0-9+/]{{24,64}}+)){_E}", needs=("whsec_",)),
    _rule("Anthropic API key", rf"(?P<secret>{_start('sk-ant-')}(?:[a-z]{{2,8}}[0-9]{{2}}-)?(?P<random>[A-Za-z0-9_-]{{32,200}}+)){_E}", _mixed, needs=("sk-ant-",)),
    _rule("OpenAI API key", rf"(?P<secret>{_start('sk-')}(?!ant-)(?:(?:proj|svcacct|admin|None)-)?(?P<random>[A-Za-z0-9_-]{{20,250}}+)){_E}", _mixed, needs=("sk-",)),
    _rule("Google API key", rf"(?P<secret>{_start('AIza')}(?P<random>[A-Za-z0-9_-]{{35}}+)){_E}", needs=("AIza",)),
    _rule("Google OAuth client secret", rf"(?P<secret>{_start('GOCSPX-')}(?P<random>[A-Za-z0-9_-]{{28}}+)){_E}", needs=("GOCSPX-",)),
    _rule("npm token", rf"(?P<secret>{_start('npm_')}(?P<random>[A-Za-z0-9]{{36}}+)){_E}", _mixed, needs=("npm_",)),
    _rule("PyPI token", rf"(?P<secret>{_start('pypi-AgEIcHlwaS5vcmc')}(?P<random>[A-Za-z0-9_-]{{50,400}}+)){_E}", needs=("pypi-",)),
    _rule("Docker Hub token", rf"(?P<secret>{_start('dckr_pat_')}(?P<random>[A-Za-z0-9_-]{{27,64}}+)){_E}", needs=("dckr_pat_",)),
    _rule("Hugging Face token", rf"(?P<secret>{_start('hf_')}(?P<random>[A-Za-z]{{34,40}}+)){_E}", _two_cases, needs=("hf_",)),
    _rule("SendGrid API key", rf"(?P<secret>{_start('SG.')}(?P<random>[A-Za-z0-9_-]{{22}}+)\.[A-Za-z0-9_-]{{43}}+){_E}", needs=("SG.",)),
    _rule("DigitalOcean token", rf"(?P<secret>{_start('do')}[opr]_v1_(?P<random>[a-f0-9]{{64}}+)){_E}", needs=("_v1_",)),
    _rule("Shopify token", rf"(?P<secret>{_start('shp')}(?:at|ca|pa|ss)_(?P<random>[a-fA-F0-9]{{32}}+)){_E}", needs=("shp",)),
    _rule("age secret key", rf"(?P<secret>{_start('AGE-SECRET-KEY-1', 'A-Z0-9')}(?P<random>[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{{58}}+))(?![A-Z0-9])", needs=("AGE-SECRET-KEY-1",)),
    _rule("JWT", rf"(?P<secret>{_start('eyJ')}[A-Za-z0-9_-]{{8,2000}}+\.eyJ[A-Za-z0-9_-]{{8,8000}}+\.[A-Za-z0-9_-]{{16,2000}}+){_E}", _jwt_header, random=None, needs=("eyJ",)),
    # An HTTP Authorization header's opaque token (a curl command pasted into a note).
    _rule("bearer token", _start("bearer", "a-z") + r"[ \t]{1,20}+(?P<secret>[a-z0-9._~+/=-]{20,2048}+)", _looks_random, random=None,
          trim=".", lowered=True, needs=("bearer",)),
    # "://" is the literal; the scheme before it is checked in code (_url_scheme_ok).
    _rule(
        _URL_PASSWORD,
        r"://(?P<secret>(?P<userinfo>[^\s:/?#@\"'<>\[\]]{0,128}+:[^\s/?#@\"'<>]{1,256}+)@(?:\[[0-9A-Fa-f:.]{2,45}+\]|[A-Za-z0-9._~%-]{1,253}+))",
        _url_password,
        random=None,
        trim=".",
        needs=("://",),
    ),
    _rule(
        "password or secret value",
        r"(?:passwd|password|passphrase|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|auth[_-]?key|private[_-]?key)"
        r"(?:[_-]?(?:key|token|value|base|string)){0,2}"  # SECRET_KEY, SECRET_KEY_BASE, token_value
        r"[\"']?(?:[ \t]{0,20}+(?:=>|:=|[:=])|[ \t]{1,20}+is[ \t])[ \t]{0,20}+[\"'`]?(?P<secret>[^\s\"'`,;<>\[\]{}]{1,256}+)",
        _looks_random,
        random=None,
        trim=".:",
        lowered=True,
        needs=("pass", "pwd", "secret", "token", "api", "access", "auth", "private"),
    ),
)

_SCHEME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+.-")


def _url_scheme_ok(text: str, colon: int) -> bool:
    """A URL scheme (RFC 3986: a letter, then letters, digits, ``+.-``; 2–32 long)
    ends right before the ``://`` at ``colon``."""
    start = colon
    while start > 0 and colon - start < 33 and text[start - 1] in _SCHEME_CHARS:
        start -= 1
    return 2 <= colon - start <= 32 and text[start].isascii() and text[start].isalpha()


_KEY_BLOCK_END = re.compile(r"-----END (?:[A-Z0-9]{1,20}+ ){0,4}PRIVATE KEY(?: BLOCK)?-----")
_KEY_BLOCK_SCAN = 16_384  # how far after a BEGIN line the key's body is looked for
# One word of what follows a BEGIN line: separated by whitespace or by the literal
# "\n" of a key pasted from JSON or an environment variable.
_PEM_WORD = re.compile(r"(?:\s|\\[nr])*+([^\s\\]++)")
_PEM_BODY = re.compile(r"[A-Za-z0-9+/=]++")


def _private_key(text: str, match: re.Match[str]) -> tuple[int, int, str] | None:
    """A BEGIN line followed by a base64 body of 64+ characters: the span up to its END
    line (or the body's end) and the body without whitespace, for the fingerprint.

    Header lines of encrypted PEM (``Proc-Type: 4,ENCRYPTED``) are skipped; the body
    ends at the first word that is not base64. A BEGIN line mentioned in prose or
    followed by ``...`` is no key. Reads only as far as the body goes (never a fixed
    window per BEGIN line), so repeated BEGIN lines cost linear time.
    """
    pos, limit = match.end(), min(len(text), match.end() + _KEY_BLOCK_SCAN)
    body: list[str] = []
    end = match.end()
    while True:
        word = _PEM_WORD.match(text, pos, limit)
        if word is None:
            break
        token = word[1]
        if token.startswith("-----END"):
            closing = _KEY_BLOCK_END.match(text, word.start(1))
            if closing:
                end = closing.end()
            break
        if not body and (":" in token or "," in token):
            pass  # a PEM header line ("DEK-Info: AES-128-CBC,2F…")
        elif _PEM_BODY.fullmatch(token):
            body.append(token)
            end = word.end(1)
        else:
            break
        pos = word.end()
    joined = "".join(body)
    if len(joined) < 64 or not _not_mask(joined):
        return None
    return match.start(), end, joined


_AWS_NEAR = 300  # chars either side of an access key id where its secret key is looked for
_AWS_SECRET_CANDIDATE = re.compile(r"[A-Za-z0-9/+]{40}+(?![=])")


def _aws_secrets(text: str) -> list[tuple[int, int]]:
    """Every 40-character base64 word with mixed case and digits (a hex git commit id
    never qualifies: no upper case), found once per text; only those near an access
    key id become findings (on its own such a word is too common to be a credential)."""
    out = []
    for m in _AWS_SECRET_CANDIDATE.finditer(text):
        start = m.start()
        if start > 0 and text[start - 1] in _BASE64_CHARS:
            continue  # the middle of a longer base64 run
        if _mixed(m[0]):
            out.append(m.span())
    return out


# --------------------------------------------------------------------------- scanning


def find_credentials(text: str) -> list[Finding]:
    """Every credential in ``text``, in text order, one finding per span.

    Where spans overlap (``GITHUB_TOKEN=ghp_…`` is both a GitHub token and a keyword
    assignment), the more specific rule — earlier in ``_RULES`` — wins.

    A write scans its content twice, once to guard it and once to name its file
    (``redact_for_names``): the last few texts' findings are kept, so it costs one scan.
    """
    return list(_scanned(text))


@functools.lru_cache(maxsize=8)
def _scanned(text: str) -> tuple[Finding, ...]:
    """``find_credentials``, kept for the last few texts (findings are frozen)."""
    spans: list[tuple[int, int, str, str]] = []  # start, end, kind, fingerprinted value
    taken: list[tuple[int, int]] = []  # the spans so far, sorted and never overlapping

    def add(start: int, end: int, kind: str, value: str) -> None:
        i = bisect.bisect_left(taken, (start, end))
        if (i > 0 and taken[i - 1][1] > start) or (i < len(taken) and taken[i][0] < end):
            return
        taken.insert(i, (start, end))
        spans.append((start, end, kind, value))

    # Same length, so positions carry over (ASCII text: ``lower`` is that, and quicker).
    lowered = text.lower() if text.isascii() else text.translate(_ASCII_LOWER)
    aws_secrets: list[tuple[int, int]] | None = None  # computed once, if an access key id is found
    for rule in _RULES:
        searched = lowered if rule.lowered else text
        if rule.needs:
            for literal in rule.needs:  # a loop, not any(): this runs for every rule of every scan
                if literal in searched:
                    break
            else:
                continue
        for match in rule.pattern().finditer(searched):
            if rule.kind == _KEY_BLOCK:
                block = _private_key(text, match)
                if block:
                    add(block[0], block[1], rule.kind, block[2])
                continue
            if rule.kind == _URL_PASSWORD and not _url_scheme_ok(text, match.start()):
                continue
            start, end = match.span(rule.group)
            while rule.trim and end - start > 1 and (
                text[end - 1] in rule.trim or (text[end - 1] == ")" and "(" not in text[start : end - 1])
            ):
                end -= 1  # a sentence's full stop after "…@db.internal." or a closing ")" is not part of it
            value = text[start:end]
            if rule.random == rule.group:
                random_part = value
            else:
                random_part = text[match.start(rule.random):match.end(rule.random)]
            if not rule.check(random_part):
                continue
            add(start, end, rule.kind, value)
            if rule.kind == _AWS_KEY_ID:
                if aws_secrets is None:
                    aws_secrets = _aws_secrets(text)
                i = bisect.bisect_left(aws_secrets, (start - _AWS_NEAR - 40, 0))
                while i < len(aws_secrets) and aws_secrets[i][0] <= end + _AWS_NEAR:
                    near_start, near_end = aws_secrets[i]
                    add(near_start, near_end, _AWS_SECRET, text[near_start:near_end])
                    i += 1
    spans.sort()
    findings: list[Finding] = []
    line, counted = 1, 0
    for start, end, kind, value in spans:
        line += text.count("\n", counted, start)
        counted = start
        findings.append(Finding(kind, fingerprint(value), start, end, line))
    return tuple(findings)


def _allowed(settings: SecretsSettings | None) -> frozenset[str]:
    return frozenset(getattr(settings, "secrets_allow", ()) or ())


def check_text(text: str, settings: SecretsSettings | None = None) -> list[Finding]:
    """The findings in ``text`` that the vault has not approved (``secrets.allow``)."""
    allowed = _allowed(settings)
    return [f for f in find_credentials(text) if f.fingerprint not in allowed]


def texts_of(data: bytes) -> list[str]:
    """The text a file's bytes carry, as a credential scan must read it: UTF-8, and when
    the bytes hold a NUL also UTF-16 read both ways (Windows PowerShell's ``>`` and
    Notepad's "Unicode" save text so; a token in it leaves with a push all the same).
    Little- and big-endian from the first byte between them read UTF-16 text of either
    order at either byte alignment (a UTF-16 string inside a binary file too)."""
    out = [data.decode("utf-8", "replace")]
    if b"\0" in data:
        out += [data.decode("utf-16-le", "replace"), data.decode("utf-16-be", "replace")]
        if data.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):  # UTF-32 text says so with a BOM
            out.append(data.decode("utf-32", "replace"))
    return out


def check_bytes(data: bytes, settings: SecretsSettings | None = None) -> list[Finding]:
    """``check_text`` of each text ``texts_of`` finds in ``data``, one finding per credential."""
    found: dict[str, Finding] = {}
    for text in texts_of(data):
        for finding in check_text(text, settings):
            found.setdefault(finding.fingerprint, finding)
    return list(found.values())


def redact(text: str, findings: Sequence[Finding]) -> str:
    """``text`` with each finding's span replaced by ``[redacted <kind>]``: for slugs,
    titles and log lines that must never carry the secret."""
    out: list[str] = []
    pos = 0
    for f in sorted(findings, key=lambda f: f.start):
        if f.start < pos:
            continue
        out.append(text[pos:f.start])
        out.append(f"[redacted {f.kind}]")
        pos = f.end
    out.append(text[pos:])
    return "".join(out)


# A credential word, then ":", "=", ":=", "=>", "is" or "was", then its value: in a file
# name or a commit message the value goes, whatever it looks like ("password: hunter2").
# A word glued to letters or digits is another word ("tokens", "spin"); "_" and "-" join
# words of one name ("DB_PASSWORD=…"), and so does an upper-case name ("DBPASSWORD=…").
# A phrase without such a value stays intact.
_CREDENTIAL_WORD = (
    r"(?<![A-Za-z0-9])(?:pass(?:word|phrase|wd|code)|pwd|pin|secret|token|credentials?|otp"
    r"|(?:api|access|auth|private|secret|signing|ssh)[ _-]?key|apikey"
    # an upper-case name with the word glued on: DBPASSWORD (DB_PASSWORD once markdown took the "_")
    r"|(?-i:[A-Z0-9]+(?:PASSWORD|PASSWD|PASSPHRASE|PWD|SECRET|TOKEN|APIKEY)))"
    r"(?:[ _-]?(?:key|token|value|code|number|string))?(?![A-Za-z0-9])"
)
_NAMED_VALUE = lazy_pattern(  # compiled on the first text holding a hint below
    _CREDENTIAL_WORD + r"[\"']?(?:[ \t]*(?P<sign>:=|=>|[:=])|[ \t]+(?P<verb>is|was|are|were)(?![A-Za-z0-9])[ \t]*:?)"
    r"[ \t]*(?P<value>[^\n]*)",
    re.IGNORECASE,
)
# After "is"/"was" these words start no value: "the token is in the vault", "… is not set".
_NOT_A_VALUE = frozenset(
    "a an the in on at of for from to into under with within not no now still being been here there also only "
    "kept stored saved set rotated expired revoked valid invalid missing required needed managed shared "
    "available unknown empty same different".split()
)
# Words that may stand between "is"/"was" and the value: "the password is now hunter2",
# "is set to hunter2" (then the next word decides, as above: "the token is now rotated").
_BRIDGE = frozenset("now still also currently set to".split())
_WORD_THEN_MORE = re.compile(r"(\S+)\s+")  # a word something follows
_CLAUSE_END = re.compile(r"[,;|]|\.(?:\s|$)|\s[-–—]\s")
REDACTED = "[redacted]"
# Every match of ``_NAMED_VALUE`` holds one of these, in some case (its credential word
# does): an ASCII text without any has no value to redact, told by a few substring tests
# instead of trying the whole pattern at every position. Only ASCII: there case is all
# that ``re.IGNORECASE`` equates (beyond it ``ſ`` matches ``s``, ``K`` matches ``k``).
_CREDENTIAL_HINTS = ("pass", "pwd", "pin", "secret", "token", "credential", "otp", "key")


def redact_named_values(text: str) -> str:
    """``text`` with the value after each credential word redacted, up to the end of its
    clause (``,``, ``;``, ``. ``, a dash, the line): "The wifi password: hunter2, ask Bo"
    becomes "The wifi password: [redacted], ask Bo"; "the password is now x" and "is set to
    x" lose "x" too. "token budget", "pin numpy", "the password policy" and "the token
    is in the vault" have no value and stay."""
    if text.isascii():
        lowered = text.lower()
        if not any(hint in lowered for hint in _CREDENTIAL_HINTS):
            return text
    out: list[str] = []
    pos = 0
    for match in _NAMED_VALUE().finditer(text):
        if match.start() < pos:
            continue
        start = match.start("value")
        rest = text[start:]
        end = _CLAUSE_END.search(rest)
        value = rest[: end.start()] if end else rest
        value = value.rstrip(" \t.:!?)")
        if not value.strip():
            continue
        if match["verb"]:
            skipped = _bridged(value)
            start, value = start + skipped, value[skipped:]
            word = value.split()[0] if value.strip() else ""
            if not word or (word[0] not in "\"'`" and word.lower() in _NOT_A_VALUE):
                continue  # no value, or none said here: "the token is in the vault"; a quoted one is one
        out.append(text[pos:start])
        out.append(REDACTED)
        pos = start + len(value)
    out.append(text[pos:])
    return "".join(out)


def _bridged(value: str) -> int:
    """How many characters of ``value`` are bridge words before the value itself
    ("now ", "set to "); "to" only after "set"."""
    skipped, last = 0, ""
    for word in _WORD_THEN_MORE.finditer(value):
        bare = word[1].lower()
        if bare not in _BRIDGE or (bare == "to" and last != "set"):
            break
        skipped, last = word.end(), bare
    return skipped


def redact_for_names(text: str) -> str:
    """``text`` fit for a file name or a commit message (SPEC §3): every credential found
    (approved or not: a name is shown everywhere) as ``[redacted <kind>]``, and every
    value that follows a credential word as ``[redacted]``."""
    return redact_named_values(redact(text, find_credentials(text)))


_LISTED = 5  # findings named in one message; the rest are counted

Found = Sequence[Finding] | Mapping[str, Sequence[Finding]]  # one text, or where -> findings


def _by_where(findings: Found, where: str) -> dict[str, Sequence[Finding]]:
    if isinstance(findings, Mapping):
        return {w: f for w, f in findings.items() if f}
    return {where: findings}


def _describe(found: dict[str, Sequence[Finding]]) -> str:
    """``a credential in the content: GitHub token (line 1, fingerprint sha256:…)`` or
    ``3 credentials — in the content: …; in the title: …`` — kinds, fields and
    positions, never the values; at most ``_LISTED`` named, the rest counted."""
    total = sum(len(f) for f in found.values())
    groups: list[str] = []
    listed = 0
    for where, findings in found.items():
        shown = findings[: max(0, _LISTED - listed)]
        listed += len(shown)
        if shown:
            groups.append(f"in {where}: " + ", ".join(f"{f.kind} (line {f.line}, fingerprint {f.fingerprint})" for f in shown))
    more = f", and {total - listed} more" if total > listed else ""
    if total == 1:
        return f"a credential {groups[0]}"
    return f"{total} credentials — " + "; ".join(groups) + more


def _fingerprints(found: dict[str, Sequence[Finding]]) -> str:
    unique = dict.fromkeys(f.fingerprint for findings in found.values() for f in findings)
    return ", ".join(f'"{fp}"' for fp in list(unique)[:_LISTED])


def refusal_message(findings: Found, where: str = "the content") -> str:
    """Why nothing was written and the three ways forward, naming the kinds found.

    ``where`` names the field ("the title", "import item 3"); or pass a mapping of
    field -> findings to name several in one message. The fingerprints shown are the
    ones to approve; the secret itself never appears.
    """
    found = _by_where(findings, where)
    return (
        f"Refused: found what looks like {_describe(found)}. Nothing was written. "
        "Remove the secret and remember where it lives instead (e.g. \"the deploy token is in the team "
        f"password manager under 'CI'\"). If it is not a secret, approve it by adding its fingerprint to "
        f"secrets.allow in {SETTINGS_FILE_NAME} ([secrets] allow = [{_fingerprints(found)}]), or set "
        f'secrets.mode = "warn" there to store such text with a warning; either applies once approved in this '
        "clone (agent-memory trust)."
    )


def warning_message(findings: Found, where: str = "the content") -> str:
    """What ``secrets.mode = "warn"`` reports after storing the text anyway."""
    return (
        f"Warning: stored, but found what looks like {_describe(_by_where(findings, where))}. "
        f"If it is a secret, remove it from the memory (and from git history); if not, add its "
        f"fingerprint to secrets.allow in {SETTINGS_FILE_NAME} (then agent-memory trust) to silence this."
    )


def _refuses(settings: SecretsSettings | None) -> bool:
    return getattr(settings, "secrets_mode", "refuse") != "warn"


def enforce(text: str, settings: SecretsSettings | None = None, where: str = "the content") -> list[Finding]:
    """The write-path guard: raise ``SecretRefused`` when ``text`` holds an unapproved
    credential and ``secrets.mode`` is ``refuse`` (the default, also without settings);
    in ``warn`` mode return the findings so the caller can pass ``warning_message`` on."""
    findings = check_text(text, settings)
    if findings and _refuses(settings):
        raise SecretRefused(refusal_message(findings, where))
    return findings


def refuse_in_name(name: str, settings: SecretsSettings | None = None, where: str = "the new name") -> None:
    """A file name never carries a credential (SPEC §3), whatever ``secrets.mode`` says:
    unlike a body it cannot be stored with a warning, it shows in every listing, link
    and commit. Approved fingerprints pass."""
    findings = check_text(name, settings)
    if findings:
        raise SecretRefused(f"Refused: found what looks like {_describe(_by_where(findings, where))}. A file name "
                            "never carries a credential (whatever secrets.mode says); nothing was changed. "
                            "Choose another name.")


def enforce_fields(fields: Mapping[str, str], settings: SecretsSettings | None = None) -> dict[str, list[Finding]]:
    """``enforce`` over several fields of one write at once (``{"the content": …,
    "the title": …, "the tags": " ".join(tags)}``), so one refusal names every field
    that holds a credential. Returns field -> findings (only fields with findings)."""
    found = {where: check_text(text, settings) for where, text in fields.items() if text}
    found = {where: findings for where, findings in found.items() if findings}
    if found and _refuses(settings):
        raise SecretRefused(refusal_message(found))
    return found
