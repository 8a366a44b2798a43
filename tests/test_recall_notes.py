"""The ``notes`` profile on small vaults of hand-written notes: what a person asking
a question of their own notes sees first."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from agent_memory.index.rows import headings_of
from agent_memory.recall.choice import FACT, NOTE, TURN, Holdings, choose, shape_of
from agent_memory.recall.language import SAMPLE, language_of, same_language, text_length
from agent_memory.recall.rank import NOTES, RecallConfig, hub_share
from agent_memory.vault.doctor import diagnose
from agent_memory.vault.vault import Vault

FILLER = "Get the shortcut you need and get going; every shortcut helps you get more done in a note. "


def notes_vault(folder: Path, notes: dict[str, str]) -> Vault:
    for name, text in notes.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return Vault(folder)


def paths(vault: Vault, question: str, **kwargs: object) -> list[str]:
    return [hit["path"] for hit in vault.search(question, **kwargs)["hits"]]  # type: ignore[arg-type]


def test_a_short_note_that_answers_ranks_above_a_long_note_holding_every_filler_word(tmp_path: Path) -> None:
    notes = {f"Topic {i}.md": f"# Topic {i}\n{FILLER}Topic {i} is about something else entirely.\n" for i in range(12)}
    notes["Rename notes.md"] = "# Rename notes\nTo rename a note, select it and press F2.\n"
    notes["Everything.md"] = "# Everything\n" + FILLER * 6 + "You can also rename things, if you get a shortcut.\n"
    vault = notes_vault(tmp_path, notes)
    question = "how do I get a shortcut to rename a note"
    result = vault.search(question, profile="notes")
    assert result["hits"][0]["path"] == "Rename notes.md"
    complete = {hit["path"]: hit["complete"] for hit in result["hits"]}
    # complete stays truthful: the first hit lacks "get" and "shortcut", the long note holds them all
    assert complete["Rename notes.md"] is False and complete["Everything.md"] is True
    assert result["match_mode"] == "any"
    # the facts profile puts the note holding every word first
    assert paths(vault, question, profile="facts")[0] == "Everything.md"


def test_specific_words_keep_the_note_holding_all_of_them_first(tmp_path: Path) -> None:
    notes = {f"Filler {i}.md": f"Some text about gardening number {i}.\n" for i in range(60)}
    notes["Flatpak.md"] = "# Flatpak\nFlatpak installs desktop apps. Flatpak Flatpak Flatpak.\n"
    notes["Install on Linux.md"] = "# Install on Linux\nInstall Obsidian with Flatpak on Linux: flatpak install.\n"
    vault = notes_vault(tmp_path, notes)
    result = vault.search("obsidian flatpak linux", profile="notes")
    assert result["hits"][0]["path"] == "Install on Linux.md" and result["hits"][0]["complete"] is True


def test_an_alias_weighs_below_the_name_a_note_is_filed_under(tmp_path: Path) -> None:
    body = "Everything about renaming things in this app, and the vault list.\n"
    vault = notes_vault(tmp_path, {
        "Rename a vault.md": body,
        "Vault admin.md": "---\naliases: [Rename a vault quickly]\n---\n" + body,
        **{f"Other {i}.md": f"Unrelated page {i} about plugins.\n" for i in range(5)},
    })
    result = vault.search("rename vault steps", profile="notes", explain=True)
    scores = {hit["path"]: hit["score"] for hit in result["hits"]}
    assert result["hits"][0]["path"] == "Rename a vault.md"
    assert scores["Rename a vault.md"] > scores["Vault admin.md"]


def test_words_found_together_rank_above_the_same_words_apart(tmp_path: Path) -> None:
    vault = notes_vault(tmp_path, {
        "Outline.md": "The outline shows the table of contents of the active note.\n",
        "Tables.md": "A table has rows and columns. Cells hold contents: text and links and images and more. "
                     "The contents of a cell wrap inside its table, and a wide table scrolls.\n",
        **{f"Other {i}.md": f"Unrelated page {i} about plugins.\n" for i in range(5)},
    })
    assert paths(vault, "table of contents", profile="notes")[0] == "Outline.md"


OTHERS = {f"Other {i}.md": f"Unrelated page {i} about gardening and {w}.\n"
          for i, w in enumerate("roses tulips soil water light seeds".split())}
PLUGINS = "\n".join(f"- [[{name}]]\n\t- {what}" for name, what in [
    ("Backlinks", "See the links to the active note."), ("Outline", "Show the table of contents for the active note."),
    ("Search", "Find text in any note."), ("Templates", "Insert a template into the active note."),
    ("Word count", "Count the words of the active note."), ("Tags view", "List the tags of every note.")])


def test_a_page_listing_many_notes_ranks_below_the_note_that_answers(tmp_path: Path) -> None:
    vault = notes_vault(tmp_path, {
        **OTHERS,
        "Core plugins.md": "# Core plugins\n" + PLUGINS + "\n",
        "Statistics.md": "# Statistics\nThe status bar counts the words and characters of the active note.\n",
        "Backlinks.md": "# Backlinks\nBacklinks lists the notes linking to the active note.\n",
    })
    question = "count the words of the active note"
    assert paths(vault, question, profile="notes")[:2] == ["Statistics.md", "Core plugins.md"]
    # the listing holds the question word for word: only the hub rule puts it second
    assert paths(vault, question, config=dataclasses.replace(NOTES, hub_links=0.0))[0] == "Core plugins.md"


def test_a_hub_is_a_note_dense_with_links_whatever_its_size() -> None:
    assert hub_share(3, 2000, NOTES) == 1.0  # an ordinary page with a few links
    assert hub_share(0, 0, NOTES) == 1.0
    assert hub_share(30, 3000, NOTES) < hub_share(18, 3000, NOTES) < 1.0  # 10 and 6 links per 1,000 characters
    assert hub_share(30, 3000, NOTES) == hub_share(300, 30000, NOTES)
    assert hub_share(30, 3000, dataclasses.replace(NOTES, hub_links=0.0)) == 1.0


# One help page and its Chinese translation, with the same five links: 1,238 and 450
# characters. Per character the translation would be a hub (11 links per 1,000); it says
# what the English says, so it is no denser with links.
FOLD_EN = """# Fold headings and lists

Folding hides the parts of a long note you do not need right now, so you can see its structure at a glance \
and move around it quickly.

## Fold a heading

Hover over a [[Headings|heading]] and click the arrow that appears to its left. Everything below the heading, \
down to the next heading of the same level or higher, is hidden. Click the arrow again to show it. A folded \
heading keeps its place when you switch to reading view and back.

## Fold a list

A [[Lists|list item]] with items indented below it can be folded the same way: hover over the item and click \
the arrow beside its bullet. Indent and outdent items with Tab and Shift+Tab; folded items move together with \
their parent.

## Fold or unfold everything

To fold every heading and list in the note at once, open the [[Command palette]] and run "Fold all headings \
and lists". To show everything again, run "Unfold all headings and lists". You can give both commands a \
[[Hotkeys|hotkey]].

## Turn folding off

Folding is on by default. To turn it off, open Settings, go to Editor, and turn off "Fold heading" or "Fold \
indent". Which sections are folded is remembered per note in your [[Workspaces|workspace]], so a note opens \
the way you left it.
"""
FOLD_ZH = """# 折叠标题和列表

折叠可以隐藏长笔记中暂时不需要的部分，让你一眼看清笔记的结构，并在其中快速移动。

## 折叠标题

将鼠标悬停在[[标题]]上，点击其左侧出现的箭头。该标题下方直到下一个同级或更高级标题之间的所有内容都会被隐藏。\
再次点击箭头即可显示。切换到阅读视图再切换回来时，折叠的标题会保持原样。

## 折叠列表

下方有缩进子项的[[列表]]项也可以用同样的方式折叠：将鼠标悬停在该项上，点击项目符号旁的箭头。\
使用 Tab 和 Shift+Tab 缩进或取消缩进；折叠的子项会随父项一起移动。

## 全部折叠或展开

要一次折叠笔记中的所有标题和列表，请打开[[命令面板]]并运行“折叠所有标题和列表”。\
要重新显示全部内容，请运行“展开所有标题和列表”。你可以为这两个命令设置[[快捷键]]。

## 关闭折叠

折叠功能默认开启。要关闭它，请打开设置，进入编辑器，关闭“折叠标题”或“折叠缩进”。\
哪些部分被折叠会按笔记记录在你的[[工作区]]中，因此笔记会以你离开时的样子打开。
"""


def measured(text: str) -> float:
    return text_length(text[:SAMPLE].encode(), len(text))


def test_a_translation_is_as_dense_with_links_as_its_original() -> None:
    english, chinese = measured(FOLD_EN), measured(FOLD_ZH)
    assert english == len(FOLD_EN) and len(FOLD_ZH) < 0.4 * len(FOLD_EN)
    assert 0.8 < chinese / english < 1.25  # an ideograph counts 3 Latin letters, a kana 1.5
    assert hub_share(5, english, NOTES) == hub_share(5, chinese, NOTES) == 1.0
    assert hub_share(5, len(FOLD_ZH), NOTES) < 0.7  # counted per character, the translation was a hub
    assert measured("東京オフィス") == 2 * 3 + 4 * 1.5
    assert measured("서울 사무실") == 5 * 2.5 + 1
    assert measured("Привет, мир") == 11 and measured("Crème brûlée — café") == 19 and measured("") == 0
    # the start of a long note tells its mix of scripts: the whole note is scaled by it
    assert measured("東京" * 5000) == 30000 and measured("東京" + "x" * 9998) == 10000 + 2 * 2 * 10000 / SAMPLE


def test_a_page_in_chinese_is_no_hub_for_being_written_in_fewer_characters(tmp_path: Path) -> None:
    others = {f"其他{i}.md": f"# 其他{i}\n\n这是一篇关于{w}的笔记，与编辑无关。\n"
              for i, w in enumerate(["同步", "发布", "插件", "主题", "画布", "图谱"])}
    editor = ("# 编辑器\n\n编辑器会在你输入时显示笔记的内容。你可以在设置中打开行号、显示缩进参考线，"
              "或者折叠标题以隐藏暂时不看的段落。\n\n编辑器有两种模式：实时预览和源码模式。"
              "实时预览会在你输入时直接显示格式，源码模式则显示所有的标记符号。\n")
    vault = notes_vault(tmp_path / "zh", {**others, "折叠.md": FOLD_ZH, "编辑器.md": editor})
    # the page on folding answers; the editor page mentions folding headings in passing
    assert paths(vault, "折叠标题", profile="notes")[:2] == ["折叠.md", "编辑器.md"]
    assert paths(vault, "折叠标题", config=dataclasses.replace(NOTES, hub_links=0.0))[0] == "折叠.md"
    # its English original, with the same links, was never a hub
    english = notes_vault(tmp_path / "en", {
        **OTHERS, "Fold headings.md": FOLD_EN,
        "Editor.md": "# Editor\n\nThe editor shows your note as you type. In the settings you can turn on line "
                     "numbers, show indentation guides, or fold headings to hide the sections you are not "
                     "reading.\n\nThe editor has two modes: live preview and source mode.\n"})
    assert paths(english, "fold headings", profile="notes")[0] == "Fold headings.md"


def test_a_word_in_a_notes_name_counts_apart_from_its_body(tmp_path: Path) -> None:
    vault = notes_vault(tmp_path, {
        **OTHERS,
        "Rename notes.md": "To change the name of a file, select it and press F2. Its links are updated.\n",
        "Tips.md": "Tips: to rename a note or a folder, use its menu.\n",
    })

    def ratio(config: RecallConfig) -> float:
        hits = vault.search("rename a note or a folder", config=config)["hits"]
        score = {hit["path"]: hit["score"] for hit in hits}
        return score["Rename notes.md"] / score["Tips.md"]

    # BM25 saturates a word over all columns together: the name's own BM25 on top lifts the note named so
    assert ratio(NOTES) > 1.1 * ratio(dataclasses.replace(NOTES, names_apart=0.0))


EDITOR = ("# Editor\nThe editor shows your note as you type.\n\n## Fold a section\n"
          "Click the arrow beside a heading to hide what follows it.\n\n## Line numbers\nTurn them on in the settings.\n")


def test_words_in_a_heading_count_apart_from_the_body(tmp_path: Path) -> None:
    vault = notes_vault(tmp_path, {
        **OTHERS,
        "Editor.md": EDITOR,
        "Tips.md": "Tips: fold a list or a section of a note from the menu; a folded section stays folded.\n",
    })

    def ratio(config: RecallConfig) -> float:
        score = {hit["path"]: hit["score"] for hit in vault.search("fold a section", config=config)["hits"]}
        return score["Editor.md"] / score["Tips.md"]

    assert ratio(NOTES) > 1.05 * ratio(dataclasses.replace(NOTES, headings_apart=0.0))


def test_an_edited_heading_is_searched_as_it_now_reads(tmp_path: Path) -> None:
    vault = notes_vault(tmp_path, {**OTHERS, "Editor.md": EDITOR})
    (tmp_path / "Editor.md").write_text(EDITOR.replace("## Fold a section", "## Collapse a section"), encoding="utf-8")
    vault.reindex()
    # weighing the headings column alone: the new heading scores, the old one is gone
    heads_only = dataclasses.replace(NOTES, field_weights=(0.0,) * 7 + (1.0,), names_apart=0.0)
    hits = vault.search("collapse", config=heads_only)["hits"]
    assert [hit["path"] for hit in hits] == ["Editor.md"] and hits[0]["score"] > 0
    assert vault.search("line numbers", config=heads_only)["hits"][0]["score"] > 0
    assert vault.search("fold", config=heads_only)["hits"] == []
    assert headings_of(EDITOR) == "Editor\nFold a section\nLine numbers"
    assert headings_of("```\n# a comment in code\n```\n#tag is no heading\n  ## Indented ##\n") == "Indented"


def test_a_note_in_the_questions_language_ranks_above_its_translation(tmp_path: Path) -> None:
    notes = {f"en/Page {i}.md": f"This page is about the {w} of the app and how it works.\n"
             for i, w in enumerate(["editor", "sync", "graph", "canvas", "plugins"])}
    notes["en/Strikethrough.md"] = "To strike text through, wrap it in two tildes. It is one of the formats.\n"
    notes["de/Durchstreichen.md"] = "# Strikethrough\nText durchstreichen: Strikethrough mit zwei Tilden um den Text.\n"
    vault = notes_vault(tmp_path, notes)
    question = "strikethrough text"
    assert paths(vault, question, profile="notes")[0] == "en/Strikethrough.md"
    assert paths(vault, "Text durchstreichen mit Tilden", profile="notes")[0] == "de/Durchstreichen.md"
    # without the preference the translation, which says it more often, wins
    blind = dataclasses.replace(NOTES, other_language=1.0)
    assert paths(vault, question, config=blind)[0] == "de/Durchstreichen.md"


def test_a_typo_is_corrected_to_a_word_of_the_vaults_language(tmp_path: Path) -> None:
    notes = {f"en/Page {i}.md": f"This page is about the {w} theme and how the app works.\n"
             for i, w in enumerate(["dark", "blue", "green", "red", "grey"])}
    notes["en/Themes.md"] = "Switch to the light theme when the room is bright.\n"
    notes.update({f"de/Seite {i}.md": f"Das ist nicht das Thema {i}, und die Seite ist nicht leer.\n" for i in range(3)})
    vault = notes_vault(tmp_path, notes)
    assert vault.search("night", profile="facts").get("corrected") == {"night": "nicht"}
    result = vault.search("night", profile="notes")
    assert result.get("corrected") != {"night": "nicht"}


def test_the_language_of_a_note_is_told_by_its_script_and_its_function_words() -> None:
    assert language_of("How do I rename a vault on my phone?") == "en"
    assert language_of("Wie ändere ich den Namen meines Vaults?") == "de"
    assert language_of("Obsidian 是一个基于 Markdown 的笔记应用，它的文件存放在本地。") == "zh"
    assert language_of("Obsidian は Markdown ファイルで動くノートアプリです。") == "ja"
    assert language_of("Как переименовать хранилище?") == "cyrillic"
    assert language_of("strikethrough text") == "latin" and language_of("1234 5678") == ""
    assert same_language("latin", "en") and same_language("en", "") and not same_language("en", "de")
    assert not same_language("latin", "zh")


def test_the_notes_profile_is_offered_by_name(tmp_path: Path) -> None:
    vault = notes_vault(tmp_path, {"A.md": "alpha beta\n"})
    assert vault.search("alpha", profile="notes", explain=True)["explain"]["profile"] == "notes"


# --------------------------------------------------------------------------- the profile chosen from the vault


def test_a_vault_of_hand_written_notes_gets_the_notes_profile_and_says_why(tmp_path: Path) -> None:
    vault = notes_vault(tmp_path, {f"Page {i}.md": f"Page {i} about the editor.\n" for i in range(4)})
    explained = vault.search("editor", explain=True)["explain"]
    assert explained["profile"] == "notes"
    chosen = vault.stats()["recall_profile"]
    assert chosen["name"] == "notes" and chosen["set_by"] == "vault" and "4 of 4" in chosen["reason"]
    (tmp_path / ".agent-memory.toml").write_text('[recall]\nprofile = "facts"\n')
    assert vault.search("editor", explain=True)["explain"]["profile"] == "facts"
    assert vault.stats()["recall_profile"]["set_by"] == "setting"


def test_the_chosen_profile_holds_as_a_vault_grows_past_the_line(tmp_path: Path) -> None:
    vault = notes_vault(tmp_path, {f"Page {i}.md": f"Page {i} about the editor.\n" for i in range(6)})
    assert vault.stats()["recall_profile"]["name"] == "notes"
    for i in range(7):  # tool memories: notes fall to 6 of 13 (46%), above the 40% that leaves
        vault.remember(f"The deploy of service {i} runs on Fridays.")
    assert vault.stats()["recall_profile"]["name"] == "notes"
    vault.close()
    reopened = Vault(tmp_path)  # the choice was recorded in the index: a new process keeps it
    assert reopened.stats()["recall_profile"]["name"] == "notes"
    for i in range(7, 12):  # 6 of 18 (33%): below the line, the vault is a store of facts now
        reopened.remember(f"The deploy of service {i} runs on Fridays.")
    assert reopened.stats()["recall_profile"]["name"] == "facts"
    # the same holdings chosen afresh: facts at once; with notes chosen before, notes
    assert choose(Holdings(facts=7, notes=6)).profile == "facts"
    assert choose(Holdings(facts=7, notes=6), previous="notes").profile == "notes"


def test_the_rule_tells_notes_dialog_turns_and_facts_apart() -> None:
    assert shape_of("Getting started/Install.md", "Download the app.") == NOTE
    assert shape_of("2026/07/23/caroline-hi.md", "Caroline: I'm thrilled to make a family.") == TURN
    assert shape_of("2026/07/23/caroline-hi.md", "[8 May 2023] Caroline: hi") == TURN
    assert shape_of("2026/07/23/deploys.md", "Deploys run on Fridays at 10:00.") == FACT
    assert choose(Holdings(facts=10, turns=30)).profile == "conversation"
    assert choose(Holdings(facts=30, turns=10)).profile == "facts"
    assert choose(Holdings()).profile == "facts"
    # hysteresis: a conversation vault keeps its profile at 45% turns, a facts vault needs 60%
    assert choose(Holdings(facts=55, turns=45), previous="conversation").profile == "conversation"
    assert choose(Holdings(facts=45, turns=55), previous="facts").profile == "facts"
    assert choose(Holdings(facts=35, turns=65), previous="facts").profile == "conversation"


def test_doctor_shows_the_profile_and_its_reason(tmp_path: Path) -> None:
    vault = notes_vault(tmp_path, {f"Page {i}.md": f"Page {i} about the editor.\n" for i in range(3)})
    vault.search("editor")
    vault.close()
    [check] = [c for c in diagnose(tmp_path) if c.name == "recall profile"]
    assert check.ok and check.detail.startswith("notes (3 of 3 memories are notes a person named")
