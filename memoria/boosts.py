"""Boosts for what a question names: people, quoted phrases, dates; and a prior for questions about time.

Each boost maps a candidate to a value in [0, 1] and is 0 for every candidate
when the question names nothing of its kind, so it can only reorder candidates
among which the question itself makes a difference.
"""

from __future__ import annotations

import re

from memoria.extract import _CAPITALISED, MONTHS, WEEKDAYS, _name

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_DOUBLE_QUOTED = re.compile(r"[\"\u201c\u201d]([^\"\u201c\u201d]+)[\"\u201c\u201d]")
_SINGLE_QUOTED = re.compile(r"(?<![A-Za-z0-9])['\u2018]([^'\u2018\u2019]+)['\u2019](?![A-Za-z0-9])")
_MONTH = {m[:3]: m for m in MONTHS}
_MONTH_WORD = "|".join(m.capitalize() for m in MONTHS) + "|" + "|".join(m[:3].capitalize() for m in MONTHS)
_DAY_MONTH = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?(" + _MONTH_WORD + r")\b\.?")
_MONTH_DAY = re.compile(r"\b(" + _MONTH_WORD + r")\.?\s+(\d{1,2})(?:st|nd|rd|th)?\b")
_MONTH_ONLY = re.compile(r"\b(" + _MONTH_WORD + r")\b")
_ISO = re.compile(r"\b(\d{4})[/-](\d{1,2})[/-](\d{1,2})\b")
_YEAR = re.compile(r"\b(19\d{2}|20\d{2})\b")
_WEEKDAY = re.compile(r"\b(" + "|".join(d.capitalize() for d in WEEKDAYS) + r")s?\b")
#: Question words and the like that open a question capitalised but name nobody.
_NOT_NAMES = frozenset("which whom whose would could should is are was were has have had did does do in on at for "
                       "according besides apart after before during since from between given considering".split())

#: Questions that ask when something happened or how long ago / how long between.
_TEMPORAL_QUESTION = re.compile(
    r"^\s*(?:when|since when)\b|\bwhat (?:date|day|time|year|month|week|weekend)\b|\bwhich (?:date|day|year|month|week)\b"
    r"|\bhow long (?:ago|before|after|since|had|has|have|did|was|were)\b|\bhow many (?:days|weeks|months|years)\b"
    r"|\bin what (?:year|month)\b|\bhow recently\b", re.I)
#: Words and forms by which a turn places something in time.
_TEMPORAL_MENTION = re.compile(
    r"(?i:\b(?:yesterday|today|tonight|tomorrow|ago|recently|lately|earlier|last|next|this (?:morning|afternoon|evening|"
    r"week|weekend|month|year|summer|winter|spring|fall|autumn)|weekend|(?:a|one|two|three|few|couple of) "
    r"(?:days?|weeks?|months?|years?)|since|anniversary|birthday|christmas|holiday|summer|winter|spring|autumn|"
    r"the other day|just (?:got|finished|started|came|went|had|did))\b)"
    r"|\b(?:" + _MONTH_WORD + r")\b|\b(?:19|20)\d{2}\b|\b\d{4}-\d{2}-\d{2}\b"
    r"|\b(?:" + "|".join(d.capitalize() for d in WEEKDAYS) + r")s?\b")


def _normal(text: str) -> str:
    return " " + " ".join(_WORD.findall(text.lower())) + " "


def question_names(query: str, known: set[str]) -> list[str]:
    """Names the question mentions that the memory knows (as an entity or a speaker), lower case."""
    names = []
    for match in _CAPITALISED.finditer(query):
        words = [w for w in match.group(1).split() if w.lower() not in _NOT_NAMES]
        name = _name(" ".join(words)) if words else ""
        if name and name in known:
            names.append(name)
        elif name:  # "Caroline Smith" unknown as a whole: its known parts still name someone
            names += [part for part in name.split() if part in known]
    return list(dict.fromkeys(names))


def without_names(query: str, names) -> str:
    """The question with the given names (and their possessive 's) taken out, for its dense vector.

    Every turn of a conversation opens with its speaker's name, so a speaker's name in
    the question pulls its vector toward that speaker's shortest turns ("Joanna: Later,
    take care!") rather than toward what is asked. The lexical sources and the name boost
    still read the whole question. Names shorter than two letters are kept (a speaker
    called "A" is no reason to drop every article); a question that is nothing but
    names is returned whole.
    """
    kept = sorted({n for n in names if len(n) >= 2}, key=lambda n: (-len(n), n))
    if not kept:
        return query
    pattern = r"(?<!\w)(?:" + "|".join(re.escape(n) for n in kept) + r")(?:['\u2019]s)?(?!\w)"
    stripped = " ".join(re.sub(pattern, " ", query, flags=re.IGNORECASE).split())
    return stripped if _WORD.search(stripped.lower()) else query


def name_boost(names: list[str], speaker: str, entities: set[str], idf) -> float:
    """Share of the question's names (weighted by rarity) that the memory speaks or mentions."""
    if not names:
        return 0.0
    total = sum(idf(n) for n in names)
    hit = sum(idf(n) for n in names if n == speaker or n in entities)
    return hit / total if total > 0 else 0.0


def quoted_phrases(query: str) -> list[str]:
    """Phrases the question puts in quotes, normalised (lower case, words only)."""
    found = _DOUBLE_QUOTED.findall(query) + _SINGLE_QUOTED.findall(query)
    return list(dict.fromkeys(p for p in (_normal(f) for f in found) if p.strip()))


def phrase_boost(phrases: list[str], normal_text: str) -> float:
    """Share of the quoted phrases the memory holds word for word (`normal_text` as `_normal` makes it)."""
    if not phrases:
        return 0.0
    return sum(1 for p in phrases if p in normal_text) / len(phrases)


def date_keys(text: str) -> set[str]:
    """Dates in a text as comparable keys: years, months, month-day pairs and weekdays."""
    keys = set()
    for year, month, day in _ISO.findall(text):
        if 1 <= int(month) <= 12:
            name = MONTHS[int(month) - 1]
            keys |= {year, name, f"{name} {int(day)}"}
    for day, month in _DAY_MONTH.findall(text):
        name = _MONTH[month.lower()[:3]]
        keys |= {name, f"{name} {int(day)}"}
    for month, day in _MONTH_DAY.findall(text):
        name = _MONTH[month.lower()[:3]]
        keys |= {name, f"{name} {int(day)}"}
    keys |= {_MONTH[m.lower()[:3]] for m in _MONTH_ONLY.findall(text)}
    keys |= set(_YEAR.findall(text))
    keys |= {d.lower() for d in _WEEKDAY.findall(text)}
    return keys


def date_boost(wanted: set[str], memory_keys: set[str]) -> float:
    """Share of the question's date keys found in the memory's text or its session date."""
    if not wanted:
        return 0.0
    return len(wanted & memory_keys) / len(wanted)


def is_temporal_question(query: str) -> bool:
    """Whether the question asks when something happened, or how long ago or between."""
    return bool(_TEMPORAL_QUESTION.search(query))


def mentions_time(text: str) -> bool:
    """Whether a memory places something in time (a date, a weekday, 'yesterday', 'last week', ...)."""
    return bool(_TEMPORAL_MENTION.search(text))
