"""What a question or a message says about the conversation itself (memoria.discourse), and the two signals and the
query part of `full` that read it: `standing`, `user_said` and `frame_strip`.

The questions are BEAM's own forms (event ordering, summaries, instruction following); the memories are short
chats of user and assistant messages under a bag-of-words embedder, so every score can be read off the words.
"""

import re

from hypothesis import given, settings, strategies as st

from memoria import BatchLoader, MemoryInterface, defaults
from memoria.discourse import asks_what_user_said, is_standing, without_frame
from tests.helpers import WordEmbedder

ORDERING = ("Can you walk me through the order in which I brought up different aspects of my app development and "
            "deployment across our conversations? Mention ONLY and ONLY five items.")
LISTING = ("Can you list in order how I brought up different aspects of my research and writing projects throughout "
           "our conversations? Mention ONLY and ONLY five items.")


def test_a_question_framed_by_the_conversation_is_searched_for_its_subject_alone():
    assert without_frame(ORDERING) == "my app development and deployment"
    assert without_frame(LISTING) == "my research and writing projects"
    assert without_frame("Can you summarize how my reading goals have developed throughout our chats?") == \
        "how my reading goals have developed"


def test_a_question_that_does_not_name_the_conversation_is_left_character_for_character():
    for question in ("Can you give me a summary of how I planned my family movie events?",  # a request, searched whole
                     "Could you show me how to implement a login feature?",
                     "What is the list  of steps, in order to deploy?",  # 'in order to', double space kept
                     "When does my first sprint end?"):
        assert without_frame(question) is question


def test_a_question_that_is_nothing_but_its_frame_is_left_whole():
    question = "Can you list the order in which I brought up things throughout our conversations?"
    assert without_frame("Throughout our conversations, in order?") == "Throughout our conversations, in order?"
    assert without_frame(question) == question  # "things" alone is one word: too little to search


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=120))
def test_no_text_loses_everything_and_none_without_a_conversation_named_changes(text):
    stripped = without_frame(text)
    named = re.search(r"\bour (?:recent |previous |past )?(?:conversations|chats|discussions|sessions)\b|"
                      r"\border in which I\b|\bmention only and only\b", text, re.IGNORECASE)
    if not named:
        assert stripped is text
    elif stripped is not text:
        assert len(re.findall(r"[A-Za-z0-9]\S*", stripped)) >= 2


def test_whose_words_a_question_asks_about():
    assert asks_what_user_said(ORDERING) and asks_what_user_said("What was the name I mentioned for the dog?")
    assert not asks_what_user_said("What did you suggest for the deployment?")
    assert not asks_what_user_said("Which libraries are used in this project?")


def test_standing_instructions_and_preferences():
    assert is_standing("Always include version numbers when I ask about software dependencies. ")
    assert is_standing("Never use semicolons in JavaScript examples.")
    assert is_standing("I'm keeping the app small, so I prefer minimal dependencies.")
    assert not is_standing("Can you help me set up the database schema for transactions?")
    assert not is_standing("I always forget where I put my keys")  # 'always' not opening a rule


CHAT = [  # (text, role): a standing rule early, a later request that shares none of its words
    ("Always include version numbers when I ask about software dependencies.", "user"),
    ("Understood, I will list versions from now on.", "assistant"),
    ("Always answer in short paragraphs.", "user"),
    ("Sure.", "assistant"),
    ("I set up the Flask project and the SQLite schema for expenses.", "user"),
    ("Here is a schema for expenses with an amount and a date column.", "assistant"),
    ("Which libraries should the project use for charts?", "assistant"),
    ("Later I deployed the app on Render with three workers.", "user"),
    ("Deploying on Render with three workers works; the order of steps matters.", "assistant"),
    ("Here are five items about deployment in order across many conversations.", "assistant"),
]


def _memory(**options):
    memory = MemoryInterface(embedder=WordEmbedder(), **options)
    rows = [(text, {"role": role, "session_index": 1 + n // 4}) for n, (text, role) in enumerate(CHAT)]
    BatchLoader(memory).insert_batch([t for t, _ in rows], [m for _, m in rows], parallel_extract=False)
    return memory


def _ranked(memory, query, weights=None):
    context = memory.ranking_context(query, limit=len(CHAT))
    ranked, _ = memory.rank(context, len(CHAT), weights)
    return [CHAT[i - min(memory.view().ids)][0] for i, _, _ in ranked], ranked


def test_the_standing_rule_nearest_the_request_is_the_one_raised():
    memory = _memory()
    request = "Which libraries does this project use? Dependencies matter."
    weights = {**defaults.DEFAULT_WEIGHTS, "standing": 0.5}
    order, ranked = _ranked(memory, request, weights)
    standing = {CHAT[i - min(memory.view().ids)][0]: d["signals"]["standing"] for i, _, d in ranked}
    assert standing[CHAT[0][0]] == 1.0 and standing[CHAT[2][0]] == 0.0  # one rule: the nearest
    assert all(v == 0.0 for text, v in standing.items() if text not in (CHAT[0][0], CHAT[2][0]))
    plain, _ = _ranked(memory, request)  # weight 0, the default: the rule is not raised
    assert order.index(CHAT[0][0]) < plain.index(CHAT[0][0]) and order.index(CHAT[0][0]) <= 1


def test_a_memory_without_roles_has_no_standing_rules():
    memory = MemoryInterface(embedder=WordEmbedder())
    BatchLoader(memory).insert_batch([t for t, _ in CHAT], [{"speaker": "Ann"} for _ in CHAT], parallel_extract=False)
    assert memory.view().standing == set()


def test_a_question_about_what_the_user_brought_up_weighs_the_users_messages():
    memory = _memory()
    weights = {**defaults.DEFAULT_WEIGHTS, "user_said": 0.4}
    _, ranked = _ranked(memory, ORDERING, weights)
    roles = {i: memory.view().role_of[i] for i, _, _ in ranked}
    said = {i: d["signals"]["user_said"] for i, _, d in ranked}
    assert said and all(said[i] == (1.0 if roles[i] == "user" else 0.0) for i in said)
    _, other = _ranked(memory, "What did you suggest for the deployment?", weights)
    assert all(d["signals"]["user_said"] == 0.0 for _, _, d in other)


def test_full_searches_a_framed_question_without_its_frame_and_the_switch_puts_it_back():
    memory = _memory()
    diagnostics = memory.recall(ORDERING, mode="full", limit=5)["diagnostics"]
    assert diagnostics["searched_query"] == "my app development and deployment"
    first = memory.recall(ORDERING, mode="full", limit=3)["results"][0]["text"]
    assert "items" not in first and "order" not in first  # the frame's words pull no message up
    off = _memory(frame_strip=False)
    diagnostics = off.recall(ORDERING, mode="full", limit=5)["diagnostics"]
    assert "searched_query" not in diagnostics
    assert "five items" in off.recall(ORDERING, mode="full", limit=3)["results"][0]["text"]
    assert "searched_query" not in memory.recall(ORDERING, mode="fusion", limit=5)["diagnostics"]  # ranked modes only


def test_no_development_question_of_locomo_or_realmem_is_reframed_so_their_rankings_stay(locomo_path, realmem_dir):
    """`frame_strip` is on for every benchmark, and the new signals weigh 0 outside BEAM's weights: LoCoMo's and
    RealMem's rankings are unchanged because none of their development questions names the conversation. A
    question that did would be searched without its frame there too; this says so the day one does."""
    from adapters.benchmarks import benchmark, default_profile

    files = [("locomo", locomo_path)] + [("realmem", path) for path in sorted(realmem_dir.glob("*.json"))]
    asked = 0
    for kind, path in files:
        for item in benchmark(kind).open(path, profile=default_profile(kind)).iter_items():
            for question in item["questions"]:
                asked += 1
                assert without_frame(question["question"]) is question["question"], (path.name, question["question"])
    assert asked > 1500


def test_what_the_ranking_reads_and_whose_messages_count_as_the_users():
    """The lexical signals read the question without its frame, `user_said` the question as asked; a memory whose
    messages name no role has no user's messages; of two rules equally near the question, the earlier is raised."""
    memory = _memory()
    context = memory.ranking_context(ORDERING, limit=len(CHAT))
    assert context.query == "my app development and deployment" and context.asked == ORDERING
    unnamed = MemoryInterface(embedder=WordEmbedder())
    BatchLoader(unnamed).insert_batch([t for t, _ in CHAT], [{"session_index": 1} for _ in CHAT],
                                      parallel_extract=False)
    _, ranked = _ranked(unnamed, ORDERING, {**defaults.DEFAULT_WEIGHTS, "user_said": 0.4})
    assert ranked and all(d["signals"]["user_said"] == 0.0 for _, _, d in ranked)
    twins = MemoryInterface(embedder=WordEmbedder())
    rules = ["Always answer in short paragraphs.", "Always answer in short paragraphs."]
    BatchLoader(twins).insert_batch(rules, [{"role": "user", "session_index": 1}] * 2, parallel_extract=False)
    context = twins.ranking_context("Answer in short paragraphs please", limit=2)
    ranked, _ = twins.rank(context, 2, {**defaults.DEFAULT_WEIGHTS, "standing": 0.5})
    raised = [i for i, _, d in ranked if d["signals"]["standing"] == 1.0]
    assert len(ranked) == 2  # both rules are candidates
    assert raised == [min(twins.view().ids)]
