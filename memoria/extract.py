"""Derived indexes extracted at insert time: entities, relationships, attributes, importance.

Plain regular-expression heuristics, deterministic and fast; the raw text
stays canonical and these rows can always be rebuilt from it.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

MONTHS = ("january february march april may june july august september october november december").split()
WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
_MONTH_ABBR = {m[:3]: m for m in MONTHS}
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_CAPITALISED = re.compile(r"\b([A-Z][a-z]+(?:[-'][A-Za-z]+)?(?:\s+(?:of\s+|de\s+)?[A-Z][a-z]+(?:[-'][A-Za-z]+)?)*)\b")
_ACRONYM = re.compile(r"\b([A-Z]{2,}[0-9]*)\b")
_NUMBER = re.compile(r"\b(\d+(?:[.,]\d+)?)\b")
_YEAR = re.compile(r"\b(19\d{2}|20\d{2})\b")
_ISO_DATE = re.compile(r"\b(\d{4})[/-](\d{1,2})[/-](\d{1,2})\b")
_MONTH_DAY = re.compile(r"\b(\d{1,2})\s+(" + "|".join(MONTHS) + r")\b|\b(" + "|".join(MONTHS) + r")\s+(\d{1,2})\b", re.I)
# Capitalised only: "may" the verb is no month, "sun" no weekday.
_MONTH_WORD = re.compile(r"\b(" + "|".join(m.capitalize() for m in MONTHS + list(_MONTH_ABBR)) + r")\b\.?")
_WEEKDAY = re.compile(r"\b(" + "|".join(d.capitalize() for d in WEEKDAYS) + r")s?\b")
_TIME = re.compile(r"\b(\d{1,2}(?::\d{2})?\s*(?:am|pm))\b|\b(\d{1,2}:\d{2})\b", re.I)
_QUANTITY = re.compile(r"\b(\d+(?:[.,]\d+)?)\s*(km|kilometres|kilometers|miles|kg|kilos|pounds|lbs|hours|minutes|days|"
                       r"weeks|months|years|dollars|euros|books|pots|times|people|kids|children|cats|dogs)\b", re.I)
_RELATION = re.compile(r"\b(is|was|are|were|has|had|loves?|likes?|hates?|bought|visited|went|moved|works?|"
                       r"worked|joined|adopted|named|called|married|met|started|finished|plays?|played|lives?|lived)\b",
                       re.I)
_IMPORTANCE_CUES = re.compile(r"\b(important|remember|never|always|favou?rite|love|hate|allergic|birthday|"
                              r"anniversary|promise|deadline|must|goal|dream|decided|finally|big news|update)\b", re.I)
_NOT_NAMES = frozenset("I The A An And But So Yes No Oh Hey Hi Hello Thanks Thank It This That What When Where Why How "
                       "Who We You He She They My Your Our Their Its Also Just Well Wow Sure Okay Ok Great Here There "
                       "Then Now If Or Not Do Does Did Can Could Would Should Will Let Maybe Please Sounds".split())


def _name(span: str) -> str:
    """A capitalised span as an entity: sentence words dropped, possessive cut, lower case."""
    words = [w for w in span.split() if w not in _NOT_NAMES]
    return re.sub(r"'s$", "", " ".join(words).lower())


def _entities(text: str) -> list[str]:
    found = []
    for match in _CAPITALISED.finditer(text):
        name = _name(match.group(1))
        if name:
            found.append(name)
    found += [m.lower() for m in _ACRONYM.findall(text)]
    found += [n for n in _NUMBER.findall(text)]
    found += [d.lower() for d in _dates(text)]
    return list(dict.fromkeys(e for e in found if len(e) > 1 or e.isdigit()))


def _dates(text: str) -> list[str]:
    out = [f"{y}-{int(m):02d}-{int(d):02d}" for y, m, d in _ISO_DATE.findall(text)]
    out += [_MONTH_ABBR.get(m.lower()[:3], m.lower()) for m in _MONTH_WORD.findall(text)]
    out += [w.lower() for w in _WEEKDAY.findall(text)]
    out += _YEAR.findall(text)
    return list(dict.fromkeys(out))


def _relationships(text: str) -> list[tuple[str, str, str]]:
    triples = []
    for sentence in _SENTENCE.split(text):
        ents = [(m.start(), m.group(1)) for m in _CAPITALISED.finditer(sentence)
                if any(w not in _NOT_NAMES for w in m.group(1).split())]
        for (start_a, a), (start_b, b) in zip(ents, ents[1:]):
            between = sentence[start_a + len(a):start_b]
            verb = _RELATION.search(between)
            triples.append((_name(a), verb.group(1).lower() if verb else "related_to", _name(b)))
    return list(dict.fromkeys(triples))


def _attributes(text: str, metadata: dict) -> list[tuple[str, str]]:
    attrs = [("date", d) for d in _dates(text)]
    attrs += [("time", (a or b).lower().replace(" ", "")) for a, b in _TIME.findall(text)]
    attrs += [("quantity", f"{n} {unit.lower()}") for n, unit in _QUANTITY.findall(text)]
    attrs += [("number", n) for n in _NUMBER.findall(text)]
    for key in ("speaker", "role"):
        if metadata.get(key):
            attrs.append((key, str(metadata[key]).lower()))
    for date in _dates(str(metadata.get("date", ""))):
        attrs.append(("session_date", date))
    return list(dict.fromkeys(attrs))


def importance(text: str) -> float:
    """A 0..1 heuristic: cue words, first-person facts, numbers and dates raise it."""
    score = 0.1
    score += 0.15 * min(3, len(_IMPORTANCE_CUES.findall(text)))
    if re.search(r"\b(I|we)\s+(am|was|have|had|got|just|finally|will|went|bought|adopted|started)\b", text):
        score += 0.15
    if _NUMBER.search(text) or _dates(text):
        score += 0.1
    if "!" in text:
        score += 0.05
    return round(min(1.0, score), 4)


def extract(text: str, metadata: dict) -> dict:
    """Everything derived from one memory."""
    return {"entities": _entities(text), "relationships": _relationships(text),
            "attributes": _attributes(text, metadata), "importance": importance(text)}


def extract_many(texts: list[str], metadatas: list[dict], parallel: bool, max_workers: int) -> list[dict]:
    if parallel and max_workers > 1 and len(texts) > 64:
        with ThreadPoolExecutor(max_workers=max_workers) as pool:
            return list(pool.map(extract, texts, metadatas, chunksize=64))
    return [extract(t, m) for t, m in zip(texts, metadatas)]


def query_entities(query: str) -> list[str]:
    """Entities of a question, without the capitalised question word."""
    return _entities(query)


def query_attributes(query: str) -> list[tuple[str, str]]:
    return [(k, v) for k, v in _attributes(query, {}) if k != "number" or len(v) > 1]
