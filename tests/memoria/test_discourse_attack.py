"""Inputs that broke the first cut of memoria.discourse and the signals that read it, each now a test of the
behaviour it broke: BEAM's second item-count form, a frame's words inside a quoted title or an idiom, punctuation
of the subject, other scripts, "in order to", "I've", "did I say", asides taken for rules, curly apostrophes, the
model's text in the diagnostics, and two BEAM chats of one number in the ranking lab. Questions marked "BEAM dev"
are copied word for word from the development chats (data/beam_dev/chats/100K)."""

import json

import pytest

from memoria import BatchLoader, MemoryInterface, defaults
from memoria.discourse import asks_what_user_said, is_standing, without_frame
from tests.helpers import WordEmbedder


# ---- without_frame ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("question, subject", [
    # BEAM dev, 100K: 31 of the 74 event-ordering questions end "(mention N items)", not "Mention ONLY and ONLY ..."
    ("Can you list the order in which I brought up different aspects of my scheduling and automation projects "
     "throughout our conversations in order (mention 5 items)?", "my scheduling and automation projects"),
    ("Can you walk me through the order in which I brought up different aspects of conic sections and their "
     "properties throughout our conversations (mention 7 items)?", "conic sections and their properties"),
])
def test_beams_other_item_count_form_is_taken_out_too(question, subject):
    """BEAM writes the item count two ways: "Mention ONLY and ONLY five items" and "(mention 5 items)" (31 of the
    74 128K development event-ordering questions); both are frame, and "items" is a word that pulls up no message."""
    assert without_frame(question) == subject


@pytest.mark.parametrize("question, kept", [
    ('Throughout our conversations, what did I say about the book "A Short Overview of Python"?',
     '"A Short Overview of Python"'),
    ('Throughout our conversations, where did I mention "different stages of grief"?', '"different stages of grief"'),
    ("How did I get my finances in order throughout our conversations?", "my finances in order"),
])
def test_a_frame_phrase_inside_a_quote_or_an_idiom_of_the_subject_is_kept(question, kept):
    """A quoted title is the subject whatever words it holds ("A Short Overview of Python"), and "in order" is frame
    only where it closes a clause: "get my finances in order" keeps it."""
    assert kept in without_frame(question)


def test_only_the_punctuation_the_frame_left_is_stripped():
    """The remainder loses the commas and the question mark the frame left, not the dot of ".NET"."""
    assert without_frame("Throughout our conversations: .NET versions I mentioned") == ".NET versions I mentioned"


def test_a_subject_in_another_script_counts_its_words():
    """A word is any run holding a letter or digit of any script: four Cyrillic words are a subject to search."""
    assert without_frame("Расскажи о Москве и Петербурге throughout our conversations") == \
        "Расскажи о Москве и Петербурге"


def test_in_order_to_is_kept_however_it_is_spaced():
    """"in order to" is a purpose clause of the subject, with one space or two."""
    assert without_frame("What steps, in order  to deploy, did I take throughout our conversations?") == \
        "What steps, in order to deploy, did I take"


def test_a_contracted_i_have_is_part_of_the_frame():
    """"the order in which I’ve brought up" is frame as much as "I brought up" (BEAM writes curly apostrophes)."""
    question = ("Can you walk me through the order in which I’ve brought up different aspects of my app "
                "throughout our conversations?")
    assert without_frame(question) == "my app"


# ---- asks_what_user_said -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("question", [  # BEAM dev: 41 questions ask "did I say / mention ...", none is recognised
    "Where did I say I met Laura?",
    "How long did I say the entire project is expected to take?",
    "How many times did I mention submitting or revising my cover letter before my interview preparation?",
    "What profession did I mention I work in?",
    "What did I tell you about my sister's wedding?",
    "What did I ask you about the deployment?",
])
def test_did_i_say_asks_what_the_user_said(question):
    """"did I say / mention / tell you / ask": the commonest way to ask what the user said (41 BEAM development
    questions), whose evidence is the user's own messages."""
    assert asks_what_user_said(question)


@pytest.mark.parametrize("question", [
    "Which topics I've brought up about my garden have you answered?",
    "Which topics I’ve brought up about my garden have you answered?",
    "list in order the things i mentioned about my garden",
])
def test_contractions_and_a_lower_case_i_ask_what_the_user_said(question):
    """"I've brought up", "I’ve", and a lower-case "i mentioned" as chat text writes it."""
    assert asks_what_user_said(question)


# ---- is_standing ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("message", [
    "Whenever I run pytest it crashes with an ImportError, why?",
    "Every time I deploy, the build fails.",
    "Never mind, what is the weather like in Oslo?",
    "Don't worry about it, I fixed the bug myself.",
    "Should I prefer Postgres or MySQL for this?",
])
def test_bug_reports_and_asides_are_no_standing_instructions(message):
    """A bug report ("Whenever I run pytest it crashes"), an aside ("Never mind", "Don't worry") or a question
    ("Should I prefer ...?") sets no rule for later answers, and must not compete for the one `standing` candidate."""
    assert not is_standing(message)


@pytest.mark.parametrize("message", ["I’d prefer shorter answers from now.", "Don’t use emojis in your answers."])
def test_a_rule_typed_with_a_curly_apostrophe_is_one(message):
    """The same rule typed with a curly apostrophe is a rule."""
    assert is_standing(message)


def test_the_rule_that_applies_keeps_the_standing_signal_from_a_complaint():
    """End to end: a later complaint near the request by its words ("Whenever I install the project dependencies
    the build fails") does not take the `standing` signal from the rule that governs the answer."""
    chat = [("Always include version numbers when I ask about software dependencies.", "user"),
            ("Understood, I will list versions from now on.", "assistant"),
            ("Whenever I install the project dependencies the build fails with an error.", "user"),
            ("That error comes from a missing compiler; install build tools.", "assistant"),
            ("I set up the Flask project and the SQLite schema for expenses.", "user"),
            ("Here is a schema for expenses with an amount and a date column.", "assistant")]
    memory = MemoryInterface(embedder=WordEmbedder())
    BatchLoader(memory).insert_batch([t for t, _ in chat], [{"role": r, "session_index": 1} for _, r in chat],
                                     parallel_extract=False)
    context = memory.ranking_context("Which software dependencies does the project use?", limit=len(chat))
    ranked, _ = memory.rank(context, len(chat), {**defaults.DEFAULT_WEIGHTS, "standing": 0.2})
    first = min(memory.view().ids)
    standing = {chat[i - first][0]: d["signals"]["standing"] for i, _, d in ranked}
    assert standing[chat[0][0]] == 1.0, standing


# ---- the engine's diagnostics ----------------------------------------------------------------------------------------

class _Calls:
    def __init__(self):
        self.inner, self.calls = WordEmbedder(), []
        self.dimension, self.signature = self.inner.dimension, self.inner.signature

    def encode(self, texts, batch_size=32, **_):
        self.calls.append(list(texts))
        return self.inner.encode(texts, batch_size=batch_size)


def test_dense_query_names_what_the_model_read_when_only_the_frame_went():
    """`dense_query` is there whenever the model read something other than the question asked, so a record's
    encoded text is `diagnostics.get("dense_query", question)` (as tests/coordinator/benches/test_floor.py reads it),
    framed questions included."""
    question = ("Can you walk me through the order in which I brought up different aspects of my Flask app "
                "throughout our conversations? Mention ONLY and ONLY five items.")
    memory = MemoryInterface(embedder=_Calls(), window_size=0)
    BatchLoader(memory).insert_batch(["I set up the Flask app.", "Deployed the Flask app on Render."],
                                     [{"role": "user", "session_index": 1}] * 2, parallel_extract=False)
    memory.embedder.calls.clear()
    diagnostics = memory.recall(question, mode="full", limit=2)["diagnostics"]
    encoded = memory.embedder.calls[0]
    assert encoded == ["my Flask app"]  # what the model read
    assert diagnostics.get("dense_query", question) == "my Flask app"


# ---- the ranking lab -------------------------------------------------------------------------------------------------

def test_the_lab_keeps_two_beam_chats_with_the_same_folder_name(tmp_path, embedder):
    """BEAM's chat folders are numbers every size has (chats/100K/1, chats/500K/1): the lab labels a chat by its
    size folder too, so neither overwrites the other in the report."""
    from click.testing import CliRunner

    from devtools.__main__ import devtools
    from tests.adapters.benchmarks.beam.test_reader import write_chat

    write_chat(tmp_path / "chats" / "100K" / "1")
    write_chat(tmp_path / "chats" / "500K" / "1")
    output = tmp_path / "lab.json"
    result = CliRunner().invoke(devtools, ["lab", "--beam", str(tmp_path / "chats" / "100K" / "1"),
                                           "--beam", str(tmp_path / "chats" / "500K" / "1"),
                                           "--workdir", str(tmp_path / "work"), "--output", str(output)])
    assert result.exit_code == 0, result.output
    assert len(json.loads(output.read_text())["datasets"]) == 2
