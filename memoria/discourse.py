"""What a question or a message says about the conversation itself rather than about its subject.

A question about a long chat is often framed by the chat: "Can you walk me through the
order in which I brought up different aspects of my app's deployment throughout our
conversations? Mention ONLY and ONLY five items." Its subject is "my app's deployment"; the
frame names no message and, read as words, matches whichever messages happen to say
"order" or "items". And some messages are not about a subject at all but govern every later
answer: "Always include version numbers when I ask about libraries." Three readings, each a
pattern over the text (no model): the question without its frame, whether it asks what the
user said, and whether a user's message is a standing instruction or preference.
"""

from __future__ import annotations

import re

_I = r"I(?:['\u2019]ve| have)?"  # "I", "I've", "I’ve", "I have"
#: Where in the chat: "throughout our conversations", "across all of our recent chats".
_IN_OUR_CONVERSATIONS = (r"\b(?:throughout|across|during|over the course of|in) (?:all )?(?:of )?our "
                         r"(?:recent |previous |past )?(?:conversations|chats|discussions|sessions)\b")
#: How many items to name: "Mention ONLY and ONLY five items", "mention 5 items".
_MENTION_ITEMS = r"\bmention (?:only and only )?\w+(?: \w+)? items?\b"

#: Phrases that frame a question by the conversation: asking to be walked through or to list, the order in which
#: things were brought up, where in the chat ("throughout our conversations"), how many items to name, a summary of.
#: Each is taken out whole, and only outside quotes: a quoted title is the subject, whatever words it holds.
_FRAME = re.compile(
    r"\b(?:can|could|would|will) you (?:please )?(?:list|walk me through|give me|provide|summari[sz]e)\b"
    r"|\b(?:(?:in )?(?:the )?order in which|(?<=list in order )how) " + _I + r" (?:first )?"
    r"(?:brought up|mentioned|raised|talked about|discussed)\b"
    r"|\b(?:in )?(?:the )?order in which\b"
    r"|\bin (?:chronological )?order\b(?=\s*(?:[,;:?!.(]|how\b|$))"  # "..., in order?", "list in order how"; not "in order to"
    r"|\bdifferent (?:aspects|ways|ideas|topics|concepts) of\b"
    r"|" + _IN_OUR_CONVERSATIONS
    + r"|\(\s*mention \w+(?: \w+)? items?\b[^()]*\)"  # "(mention 5 items)", "(mention 7 items in order)"
    r"|" + _MENTION_ITEMS
    + r"|\ba (?:comprehensive |complete |clear |brief |short )?(?:summary|overview) of\b",
    re.IGNORECASE)
#: ... and a question is only taken to be framed by the conversation where it names it: "throughout our conversations",
#: "the order in which I brought up", the items to mention ("(mention 5 items)"). A request that merely opens "can you give
#: me" is a request about its subject, and is searched as asked.
_NAMES_THE_CONVERSATION = re.compile(_IN_OUR_CONVERSATIONS + r"|\border in which " + _I + r"\b|" + _MENTION_ITEMS,
                                     re.IGNORECASE)
_QUOTED = re.compile(r"\"[^\"]*\"|\u201c[^\u201d]*\u201d")
_WORD = re.compile(r"\w")
_SPACE_BEFORE_MARK = re.compile(r"\s+(?=[,;:.?!)])")
_MARKS_LEFT = re.compile(r"(?:[,;:]\s*)+(?=[.?!)]|$)|\(\s*\)")

#: A question that asks what the user (the one asking) said, brought up or told, in any tense ("did I say", "I've
#: mentioned", "what I told you"): its evidence is the user's messages.
_ASKS_WHAT_USER_SAID = re.compile(
    r"\bI(?:['\u2019]ve| have)?(?:\s+\w+)?\s+(?:brought up|bring up|mention(?:ed)?|sa(?:id|y)|t(?:old|ell) you|"
    r"ask(?:ed)?(?: you)?|talked about|talk about|discuss(?:ed)?|shared?|raised?)\b",
    re.IGNORECASE)

#: A message that sets a rule for later answers: it opens with always / from now on / never (not "never mind") /
#: whenever or every time I ask / make sure to / remember to / don't or do not and a verb of answering, or it states
#: a preference (I prefer, I'd prefer, I like it when), not in a question ("should I prefer ...?").
_APOSTROPHE = "['\u2019]"
_STANDING = re.compile(
    r"^\s*(?:please\s+)?(?:always|from now on)\b"
    r"|^\s*(?:please\s+)?never\b(?!\s+mind\b)"
    r"|^\s*(?:please\s+)?(?:whenever|every time) I (?:ask|request|want|need|mention|bring up|talk about)\b"
    r"|^\s*(?:please\s+)?(?:make sure (?:to|you)|remember to)\b"
    r"|^\s*(?:please\s+)?(?:don" + _APOSTROPHE + r"t|do not) (?:use|include|add|give|show|mention|suggest|recommend|"
    r"format|write|answer|respond|reply|explain|list|put)\b"
    r"|(?<!should )(?<!do )(?<!would )(?<!can )(?<!could )(?<!will )\bi(?:" + _APOSTROPHE + r"d| would)? prefer\b"
    r"|\bi like (?:it )?when\b|\bplease always\b|\bfrom now on\b",
    re.IGNORECASE)


def without_frame(query: str) -> str:
    """The question without the phrases that frame it by the conversation (outside quotes); the question itself
    where nothing is left but the frame (fewer than two words) and, character for character, where it does not name
    the conversation."""
    if not _NAMES_THE_CONVERSATION.search(query):
        return query
    quoted = [m.span() for m in _QUOTED.finditer(query)]

    def drop(match):
        inside = any(start <= match.start() and match.end() <= end for start, end in quoted)
        return match.group(0) if inside else " "

    stripped = _SPACE_BEFORE_MARK.sub("", " ".join(_FRAME.sub(drop, query).split()))
    stripped = _MARKS_LEFT.sub("", stripped).lstrip(" ,;:").rstrip(" ,;:.?!(")
    words = [w for w in stripped.split() if _WORD.search(w)]
    return stripped if len(words) >= 2 else query


def asks_what_user_said(query: str) -> bool:
    """Whether the question asks what the user said, brought up or told (the question as asked, frame and all)."""
    return bool(_ASKS_WHAT_USER_SAID.search(query))


def is_standing(text: str) -> bool:
    """Whether a message states a standing instruction or preference (read only on the user's messages)."""
    return bool(_STANDING.search(text))
