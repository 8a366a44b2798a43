"""The vault settings file, ``<vault>/.agent-memory.toml`` (SPEC §1), read from real
files: defaults, every key, and the errors a person meets when the file is wrong —
each naming the key, the file and what is allowed (or the closest known key)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_memory.errors import InvalidInput, SettingsError
from agent_memory.settings import KEYS, SETTINGS_FILE, Settings, load_settings

REAL_LOOKING_TOKEN = "ghp_" + "aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5"


def write(vault: Path, text: str | bytes) -> Path:
    path = vault / SETTINGS_FILE
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def error_of(vault: Path) -> str:
    with pytest.raises(SettingsError) as caught:
        load_settings(vault)
    return str(caught.value)


# --------------------------------------------------------------------------- defaults


def test_a_vault_without_the_file_gets_the_documented_defaults(tmp_path: Path) -> None:
    settings = load_settings(tmp_path)
    assert settings == Settings()
    assert settings.memories_folder == ""  # the vault root
    assert settings.secrets_mode == "refuse"
    assert settings.secrets_allow == ()
    assert settings.recall_profile is None  # unset: chosen from what the vault holds
    assert settings.recall_semantic is None  # unset: on when the semantic extra is installed
    assert settings.git_commit is False
    assert settings.git_author == ""
    assert settings.git_subfolder is False


def test_a_missing_vault_folder_also_gets_defaults(tmp_path: Path) -> None:
    assert load_settings(tmp_path / "not-there") == Settings()


def test_an_empty_file_or_one_of_comments_gets_defaults(tmp_path: Path) -> None:
    write(tmp_path, "")
    assert load_settings(tmp_path) == Settings()
    write(tmp_path, "# settings for this vault\n\n[secrets]\n# mode = \"warn\"\n")
    assert load_settings(tmp_path) == Settings()


def test_the_keys_are_exactly_the_ones_spec_names() -> None:
    assert list(KEYS) == [
        "memories.folder",
        "secrets.mode",
        "secrets.allow",
        "recall.profile",
        "recall.semantic",
        "git.commit",
        "git.author",
        "git.subfolder",
        "git.hooks",  # the opt-in to the repository's hooks for the tool's own git commands
        "server.compat",  # serve's tool set: its own, or another memory server's
    ]


# --------------------------------------------------------------------------- every key


EVERY_KEY = [
    # toml, field, expected value
    ('[memories]\nfolder = "Agent"\n', "memories_folder", "Agent"),
    ('[memories]\nfolder = "Agent/"\n', "memories_folder", "Agent"),
    ('[memories]\nfolder = "Agent/Memories"\n', "memories_folder", "Agent/Memories"),
    ('[memories]\nfolder = "Agent//Memories/"\n', "memories_folder", "Agent/Memories"),
    ('[memories]\nfolder = "Notes des agents"\n', "memories_folder", "Notes des agents"),
    ('[memories]\nfolder = ""\n', "memories_folder", ""),
    ('[secrets]\nmode = "warn"\n', "secrets_mode", "warn"),
    ('[secrets]\nmode = "refuse"\n', "secrets_mode", "refuse"),
    ('[secrets]\nallow = ["sha256:1a5d44a2dca19669"]\n', "secrets_allow", ("sha256:1a5d44a2dca19669",)),
    ('[secrets]\nallow = [" SHA256:1A5D44A2DCA19669 "]\n', "secrets_allow", ("sha256:1a5d44a2dca19669",)),
    (
        '[secrets]\nallow = ["sha256:1a5d44a2dca19669", "sha256:4b09b09836f5874d", "sha256:1a5d44a2dca19669"]\n',
        "secrets_allow",
        ("sha256:1a5d44a2dca19669", "sha256:4b09b09836f5874d"),
    ),
    ("[secrets]\nallow = []\n", "secrets_allow", ()),
    ('[recall]\nprofile = "conversation"\n', "recall_profile", "conversation"),
    ("[recall]\nsemantic = true\n", "recall_semantic", True),
    ("[git]\ncommit = true\n", "git_commit", True),
    ('[git]\nauthor = "Agent Smith <agent@example.com>"\n', "git_author", "Agent Smith <agent@example.com>"),
    ('[git]\nauthor = "  Priya <priya@example.com>  "\n', "git_author", "Priya <priya@example.com>"),
    ('[git]\nauthor = ""\n', "git_author", ""),
    ("[git]\nsubfolder = true\n", "git_subfolder", True),
    # TOML's dotted keys and inline tables mean the same tables
    ('secrets.mode = "warn"\n', "secrets_mode", "warn"),
    ('memories = { folder = "Agent" }\n', "memories_folder", "Agent"),
]


@pytest.mark.parametrize("toml, field_name, expected", EVERY_KEY, ids=[c[0].strip() for c in EVERY_KEY])
def test_every_key_is_read(tmp_path: Path, toml: str, field_name: str, expected: object) -> None:
    write(tmp_path, toml)
    settings = load_settings(tmp_path)
    assert getattr(settings, field_name) == expected
    others = {f: v for f, v in vars(Settings()).items() if f != field_name}
    assert {f: getattr(settings, f) for f in others} == others  # nothing else moved


def test_a_full_file_with_comments_sets_everything(tmp_path: Path) -> None:
    write(
        tmp_path,
        """\
# Settings of this vault: committed, so everyone who syncs it gets the same.
[memories]
folder = "Agent"   # dated layout goes under Agent/

[secrets]
mode = "warn"
allow = [
  "sha256:1a5d44a2dca19669",  # the AWS docs example
]

[recall]
profile = "conversation"
semantic = true

[git]
commit = true
author = "Agent <agent@example.com>"
subfolder = true
""",
    )
    assert load_settings(tmp_path) == Settings(
        memories_folder="Agent",
        secrets_mode="warn",
        secrets_allow=("sha256:1a5d44a2dca19669",),
        recall_profile="conversation",
        recall_semantic=True,
        git_commit=True,
        git_author="Agent <agent@example.com>",
        git_subfolder=True,
    )


def test_a_bom_and_crlf_from_a_windows_editor_are_fine(tmp_path: Path) -> None:
    write(tmp_path, b'\xef\xbb\xbf[secrets]\r\nmode = "warn"\r\n')
    assert load_settings(tmp_path).secrets_mode == "warn"


# --------------------------------------------------------------------------- unknown keys


UNKNOWN = [
    # toml, the unknown name as the message quotes it, the suggestion
    ('[secrets]\nmoda = "warn"\n', "'secrets.moda'", "did you mean 'secrets.mode'?"),
    ('[secrets]\nallowed = []\n', "'secrets.allowed'", "did you mean 'secrets.allow'?"),
    ("[git]\ncommits = true\n", "'git.commits'", "did you mean 'git.commit'?"),
    ('[recall]\nprofil = "facts"\n', "'recall.profil'", "did you mean 'recall.profile'?"),
    ('[secret]\nmode = "warn"\n', "[secret]", "did you mean [secrets]?"),
    ('[memory]\nfolder = "Agent"\n', "[memory]", "did you mean [memories]?"),
    ('folder = "Agent"\n', "'folder'", "did you mean 'memories.folder'?"),
    ('mode = "warn"\n', "'mode'", "did you mean 'secrets.mode'?"),
]


@pytest.mark.parametrize("toml, name, suggestion", UNKNOWN, ids=[c[1] for c in UNKNOWN])
def test_an_unknown_key_names_itself_the_file_and_the_closest_known_key(
    tmp_path: Path, toml: str, name: str, suggestion: str
) -> None:
    path = write(tmp_path, toml)
    message = error_of(tmp_path)
    assert str(path) in message
    assert f"Unknown {'table' if name.startswith('[') else 'key'} {name}" in message
    assert suggestion in message
    assert "Known keys: memories.folder, secrets.mode, secrets.allow" in message


def test_an_unknown_key_with_nothing_close_gets_no_wrong_suggestion(tmp_path: Path) -> None:
    write(tmp_path, "[zzz]\nqqq = 1\n")
    message = error_of(tmp_path)
    assert "Unknown table [zzz]." in message
    assert "did you mean" not in message
    assert "Known keys:" in message


def test_a_known_table_written_as_a_value_is_explained(tmp_path: Path) -> None:
    write(tmp_path, 'secrets = "warn"\n')
    message = error_of(tmp_path)
    assert "'secrets' = \"warn\" must be a table [secrets] holding mode, allow." in message


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    write(tmp_path, '[secrets]\nmoda = "warn"\nmode = "deny"\n[recall]\nsemantic = "yes"\n[gti]\ncommit = true\n')
    message = error_of(tmp_path)
    assert "Unknown key 'secrets.moda'" in message
    assert 'secrets.mode = "deny" is not allowed' in message
    assert 'recall.semantic = "yes" is not a boolean' in message
    assert "Unknown table [gti] — did you mean [git]?" in message


def test_the_error_is_an_invalid_input_error(tmp_path: Path) -> None:
    write(tmp_path, "[nope]\n")
    with pytest.raises(InvalidInput):
        load_settings(tmp_path)


# --------------------------------------------------------------------------- bad values


BAD_VALUES = [
    # toml, what the message says (key, value as written, why), what is allowed
    ('[secrets]\nmode = "deny"\n', 'secrets.mode = "deny" is not allowed', 'use "refuse" or "warn"'),
    ('[secrets]\nmode = "Warn"\n', 'secrets.mode = "Warn" is not allowed', 'use "refuse" or "warn"'),
    ("[secrets]\nmode = true\n", "secrets.mode = true is not allowed", 'use "refuse" or "warn"'),
    ('[recall]\nprofile = "chat"\n', 'recall.profile = "chat" is not allowed', 'use "facts", "conversation" or "notes"'),
    ('[recall]\nsemantic = "true"\n', 'recall.semantic = "true" is a string, not a boolean (write it without quotes)', "use true or false"),
    ("[recall]\nsemantic = 1\n", "recall.semantic = 1 is not a boolean", "use true or false"),
    ('[git]\ncommit = "yes"\n', 'git.commit = "yes" is not true, false or "all"', 'use true, false or "all"'),
    ("[git]\nsubfolder = 0\n", "git.subfolder = 0 is not a boolean", "use true or false"),
    ('[git]\nauthor = "bob"\n', 'git.author = "bob" is not in the form "Name <email>"', 'use a string "Name <email>"'),
    ('[git]\nauthor = "<bob@example.com>"\n', "is not in the form", "Name <email>"),
    ('[git]\nauthor = "Bob <bob@example.com> x"\n', "is not in the form", "Name <email>"),
    ('[git]\nauthor = "Bob <>"\n', "is not in the form", "Name <email>"),
    ("[git]\nauthor = 42\n", "git.author = 42 is not a string", "Name <email>"),
    ('[git.author]\nname = "Bob"\n', "git.author = a table is not a string", "Name <email>"),
    ("[memories]\nfolder = 3\n", "memories.folder = 3 is not a string", 'such as "Agent"'),
    ('[memories]\nfolder = "/home/me/notes"\n', "is an absolute path", '"" is the vault root'),
    ('[memories]\nfolder = "/"\n', "is an absolute path", '"" is the vault root'),
    ('[memories]\nfolder = "~/notes"\n', "is an absolute path", 'such as "Agent"'),
    ('[memories]\nfolder = "C:/Users/me"\n', "is an absolute path", 'such as "Agent"'),
    ('[memories]\nfolder = "../elsewhere"\n', "leaves the vault ('..')", 'such as "Agent"'),
    ('[memories]\nfolder = "Agent/../../x"\n', "leaves the vault ('..')", 'such as "Agent"'),
    ('[memories]\nfolder = ".obsidian"\n', "names a dot-folder ('.obsidian')", 'such as "Agent"'),
    ('[memories]\nfolder = "Agent/.trash"\n', "names a dot-folder ('.trash')", 'such as "Agent"'),
    ('[memories]\nfolder = "./Agent"\n', "names a dot-folder ('.')", 'such as "Agent"'),
    ('[memories]\nfolder = "Agent\\\\Notes"\n', "contains a backslash", 'such as "Agent"'),
    ('[memories]\nfolder = "Agent\\u0000x"\n', "contains a control character (such as NUL)", 'such as "Agent"'),
    ('[memories]\nfolder = "Agent\\nx"\n', "contains a control character", 'such as "Agent"'),
    ('[memories]\nfolder = " Agent"\n', "leading or trailing spaces", 'such as "Agent"'),
    ('[memories]\nfolder = "Agent: notes"\n', "contains ':', which Windows refuses in folder names", 'such as "Agent"'),
    ('[memories]\nfolder = "Agent/what?"\n', "contains '?'", 'such as "Agent"'),
    ('[secrets]\nallow = "sha256:1a5d44a2dca19669"\n', "secrets.allow is not a list", "a list of fingerprints"),
    ('[secrets]\nallow = ["sha256:1a5d"]\n', "secrets.allow has item 1 that is not a fingerprint", "a list of fingerprints"),
    ('[secrets]\nallow = ["sha256:1a5d44a2dca19669", 7]\n', "secrets.allow has item 2 that is not a fingerprint", "a list of fingerprints"),
]


@pytest.mark.parametrize("toml, problem, allowed", BAD_VALUES, ids=[c[0].strip() for c in BAD_VALUES])
def test_a_bad_value_names_key_value_and_what_is_allowed(tmp_path: Path, toml: str, problem: str, allowed: str) -> None:
    path = write(tmp_path, toml)
    message = error_of(tmp_path)
    assert str(path) in message
    assert problem in message
    assert allowed in message
    assert "\x00" not in message and "\nx" not in message  # control characters are shown escaped


def test_a_secret_pasted_into_the_allow_list_is_never_echoed(tmp_path: Path) -> None:
    write(tmp_path, f'[secrets]\nallow = ["{REAL_LOOKING_TOKEN}"]\n')
    message = error_of(tmp_path)
    assert "item 1 that is not a fingerprint" in message
    assert "it may be a secret" in message
    assert REAL_LOOKING_TOKEN not in message
    assert REAL_LOOKING_TOKEN[4:20] not in message


# --------------------------------------------------------------------------- broken files


BROKEN = [
    # toml, line, column, what tomllib says, the quoted line
    ('[secrets]\nmode = warn\n', 2, 8, 'Invalid value (text needs quotes: mode = "warn")', "(mode = warn)"),
    ('[secrets]\nmode = "warn\n', 2, 13, "Illegal character", '(mode = "warn)'),
    ("[secrets\nmode = 1\n", 1, 9, "Expected ']' at the end of a table declaration", "([secrets)"),
    ('[git]\ncommit = true\n[git]\nauthor = ""\n', 3, 5, "Cannot declare ('git',) twice", "([git])"),
    ('[git]\ncommit = true\ncommit = false\n', 3, 15, "Cannot overwrite a value", "(commit = false)"),
]


@pytest.mark.parametrize("toml, line, column, reason, quoted", BROKEN, ids=[c[3] for c in BROKEN])
def test_broken_toml_names_the_file_the_line_and_shows_it(
    tmp_path: Path, toml: str, line: int, column: int, reason: str, quoted: str
) -> None:
    path = write(tmp_path, toml)
    message = error_of(tmp_path)
    assert message.startswith(f"The settings file {path} is not valid TOML at line {line}, column {column} {quoted}: ")
    assert reason in message


def test_a_file_that_is_not_utf8_names_the_line(tmp_path: Path) -> None:
    write(tmp_path, b'[git]\nauthor = "Jos\xe9 <jose@example.com>"\n')
    message = error_of(tmp_path)
    assert "is not UTF-8 text (line 2)" in message


def test_a_huge_settings_file_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "# padding\n" * 120_000)
    assert "should hold a few lines" in error_of(tmp_path)


def test_a_folder_in_place_of_the_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / SETTINGS_FILE).mkdir()
    assert "is not a regular file" in error_of(tmp_path)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_in_place_of_the_file_does_not_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / SETTINGS_FILE)
    assert "is not a regular file" in error_of(tmp_path)


# --------------------------------------------------------------------------- symlinks


def test_a_symlink_to_a_file_outside_the_vault_is_refused(tmp_path: Path) -> None:
    vault, outside = tmp_path / "vault", tmp_path / "elsewhere"
    vault.mkdir()
    outside.mkdir()
    (outside / "settings.toml").write_text('[secrets]\nmode = "warn"\n')
    (vault / SETTINGS_FILE).symlink_to(outside / "settings.toml")
    message = error_of(vault)
    assert str(vault / SETTINGS_FILE) in message
    assert "symlink to a file outside the vault" in message


def test_a_symlink_through_a_relative_path_out_of_the_vault_is_refused(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (tmp_path / "settings.toml").write_text('[secrets]\nmode = "warn"\n')
    (vault / SETTINGS_FILE).symlink_to("../settings.toml")
    assert "outside the vault" in error_of(vault)


def test_a_symlink_to_a_file_inside_the_vault_is_followed(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    (vault / "config").mkdir(parents=True)
    (vault / "config" / "agent-memory.toml").write_text('[secrets]\nmode = "warn"\n')
    (vault / SETTINGS_FILE).symlink_to("config/agent-memory.toml")
    assert load_settings(vault).secrets_mode == "warn"


def test_a_vault_reached_through_a_symlink_reads_its_own_file(tmp_path: Path) -> None:
    real = tmp_path / "real-vault"
    real.mkdir()
    (real / "config.toml").write_text('[recall]\nprofile = "conversation"\n')
    (real / SETTINGS_FILE).symlink_to(real / "config.toml")  # absolute, through the real path
    link = tmp_path / "vault-link"
    link.symlink_to(real)
    assert load_settings(link).recall_profile == "conversation"


def test_a_broken_symlink_is_a_clear_error_not_silent_defaults(tmp_path: Path) -> None:
    (tmp_path / SETTINGS_FILE).symlink_to(tmp_path / "gone.toml")
    assert "is a broken symlink" in error_of(tmp_path)


def test_a_key_in_the_wrong_table_is_pointed_to_the_right_one(tmp_path: Path) -> None:
    (tmp_path / SETTINGS_FILE).write_text("[git]\nsemantic = true\n")
    with pytest.raises(SettingsError, match=r"Unknown key 'git\.semantic' — did you mean 'recall\.semantic'\?"):
        load_settings(tmp_path)
