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

#: Phrases that frame a question by the conversation: asking to be walked through or to list, the order in which
#: things were brought up, where in the chat ("throughout our conversations"), how many items to name, a summary of.
#: Each is taken out of the question whole; a word of the subject is never one of them.
_FRAME = re.compile(
    r"\b(?:can|could|would|will) you (?:please )?(?:list|walk me through|give me|provide|summari[sz]e)\b"
    r"|\b(?:(?:in )?(?:the )?order in which|(?<=list in order )how) I (?:first )?"
    r"(?:brought up|mentioned|raised|talked about|discussed)\b"
    r"|\b(?:in )?(?:the )?order in which\b|\bin (?:chronological )?order\b(?! to\b)"
    r"|\bdifferent (?:aspects|ways|ideas|topics|concepts|stages|parts) of\b"
    r"|\b(?:throughout|across|during|over the course of|in) (?:all )?(?:of )?our (?:recent |previous |past )?"
    r"(?:conversations|chats|discussions|sessions)\b"
    r"|\bmention only and only \w+ items?\b"
    r"|\ba (?:comprehensive |complete |clear |brief |short )?(?:summary|overview) of\b",
    re.IGNORECASE)
#: ... and a question is only taken to be framed by the conversation where it names it: "throughout our conversations",
#: "the order in which I brought up", "mention only and only five items". A request that merely opens "can you give
#: me" is a request about its subject, and is searched as asked.
_NAMES_THE_CONVERSATION = re.compile(
    r"\b(?:throughout|across|during|over the course of|in) (?:all )?(?:of )?our (?:recent |previous |past )?"
    r"(?:conversations|chats|discussions|sessions)\b|\border in which I\b|\bmention only and only\b",
    re.IGNORECASE)
_WORDS = re.compile(r"[A-Za-z0-9]")

#: A question that asks what the user (the one asking) said, brought up or told: its evidence is the user's messages.
_ASKS_WHAT_USER_SAID = re.compile(
    r"\bI(?:\s+\w+)?\s+(?:brought up|mentioned|said|told you|asked(?: you)?|talked about|discussed|shared|raised)\b")

#: A message that sets a rule for later answers: it opens with always / never / from now on / whenever / make sure /
#: do not, or states a preference (I prefer, I'd prefer, I like it when).
_STANDING = re.compile(
    r"^\s*(?:please\s+)?(?:always|never|from now on|whenever|every time|make sure|remember to|don't|do not)\b"
    r"|\b(?:i prefer|i'd prefer|i would prefer|i like (?:it )?when|please always|from now on)\b",
    re.IGNORECASE)


def without_frame(query: str) -> str:
    """The question without the phrases that frame it by the conversation; the question itself where nothing is
    left but the frame (fewer than two words) and the question itself, character for character, where it does not
    name the conversation."""
    if not _NAMES_THE_CONVERSATION.search(query):
        return query
    stripped = " ".join(_FRAME.sub(" ", query).split()).strip(" ,;:.?!")
    words = [w for w in stripped.split() if _WORDS.search(w)]
    return stripped if len(words) >= 2 else query


def asks_what_user_said(query: str) -> bool:
    """Whether the question asks what the user said, brought up or told (the question as asked, frame and all)."""
    return bool(_ASKS_WHAT_USER_SAID.search(query))


def is_standing(text: str) -> bool:
    """Whether a message states a standing instruction or preference (read only on the user's messages)."""
    return bool(_STANDING.search(text))
