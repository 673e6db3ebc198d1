"""Text normalisation shared by the three detectors.

One pass turns a WhatsApp message into a canonical form the detectors match against:
lower-case ASCII words separated by single spaces, no punctuation, no laughter, letters
that were stretched for emphasis collapsed, and common WhatsApp spellings mapped to one
word (``vc`` → ``voce``, ``pq`` → ``porque``, ``n`` → ``nao``, ``tá`` → ``ta`` ...).

    >>> normalize("Vc NÃÃÃO entende, affff!!! kkkk 😡")
    'voce nao entende aff'

The detectors' word lists are written in this canonical form (no accents, no doubled
vowels); ``tests/unit/test_guard.py`` checks that the lists are fixed points of it.

Absurdly long texts are clipped (head and tail kept) before anything else, so a 10 000
character message costs about as much as a 320 character one.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

__all__ = ["MAX_CHARS", "clip", "normalize"]

#: Longer texts are clipped to their first HEAD and last TAIL characters.
MAX_CHARS: Final = 320
_HEAD: Final = 200
_TAIL: Final = 120

_WORD: Final = re.compile(r"[a-z0-9]+")
# With ``keep_punct``: clause punctuation becomes a "," token, everything else a space.
_CLAUSE: Final = re.compile(r"\s*[,.;:!?\u2026]+\s*")
_NON_WORD_KEEP: Final = re.compile(r"[^a-z0-9,]+")
# Laughter and keyboard noise carry no signal for any detector: kkkk, hahaha, rsrs, huehue.
# Matched word by word, only on words that start like laughter (a regex scan of the whole
# text costs ~2 µs).
_LAUGHTER: Final = re.compile(r"k{2,}[a-z]?|a?(?:ha|he|hi|hu){2,}h?|(?:hua|hue){2,}h?|(?:rs){2,}r?")
_LAUGH_STARTS: Final = frozenset(("kk", "ha", "he", "hi", "hu", "ah", "rs"))
# Letters stretched for emphasis: any vowel run (naaao, nãããão) becomes one vowel,
# consonant runs of 3+ become one (affff), except rr/ss which Portuguese spells doubled.
_RS_RUNS: Final = re.compile(r"([rs])\1{2,}")
_CONSONANT_RUNS: Final = re.compile(r"([b-df-hj-npqt-z])\1{2,}")
# Cheap tests, so that most messages skip the substitutions above (substring tests are
# much faster than a regex alternation of the same literals, or a back-reference scan).
_TRIPLE: Final = re.compile(r"([b-df-hj-np-z])\1\1")
_LAUGH_MARKS: Final = ("kk", "hah", "heh", "hih", "huh", "hua", "hue", "rsrs")
_VOWEL_PAIRS: Final = ("aa", "ee", "ii", "oo", "uu")


def _has_any(text: str, parts: tuple[str, ...]) -> bool:
    for part in parts:  # noqa: SIM110 - a plain loop beats any() with a generator here
        if part in text:
            return True
    return False


# WhatsApp spellings → canonical words (keys already in collapsed form).
_SPELLING: Final[dict[str, str]] = {
    "vc": "voce",
    "vcs": "voces",
    "vo6": "voces",
    "ce": "voce",
    "oce": "voce",
    "pq": "porque",
    "pk": "porque",
    "porq": "porque",
    "q": "que",
    "tb": "tambem",
    "tbm": "tambem",
    "tmb": "tambem",
    "n": "nao",
    "nn": "nao",
    "naum": "nao",
    "tou": "to",
    "estou": "to",
    "tah": "ta",
    "eh": "e",
    "neh": "ne",
    "mt": "muito",
    "mto": "muito",
    "mtu": "muito",
    "mta": "muita",
    "msm": "mesmo",
    "oq": "o que",
    "hj": "hoje",
    "td": "tudo",
    "tds": "todos",
    "nd": "nada",
    "ngm": "ninguem",
    "alg": "alguem",
    "algm": "alguem",
    "alguen": "alguem",
    "qm": "quem",
    "qnd": "quando",
    "qdo": "quando",
    "qndo": "quando",
    "qto": "quanto",
    "qnto": "quanto",
    "qtos": "quantos",
    "cmg": "comigo",
    "ctg": "contigo",
    "vlw": "valeu",
    "obg": "obrigado",
    "obgd": "obrigado",
    "obgda": "obrigada",
    "blz": "beleza",
    "pf": "pfv",
    "pfvr": "pfv",
    "pls": "pfv",
    "plz": "pfv",
    "porfa": "pfv",
    "sla": "sei la",
    "d": "de",
    "c": "com",
    "cm": "com",
    "p": "pra",
    "qro": "quero",
    "qero": "quero",
    "kero": "quero",
    "qria": "queria",
    "keria": "queria",
    "kd": "cade",
    "ae": "ai",
    "aii": "ai",
    "entt": "entao",
    "ent": "entao",
    "agr": "agora",
    "dps": "depois",
    "vdd": "verdade",
    "msg": "mensagem",
    "wpp": "whatsapp",
    "whats": "whatsapp",
    "zap": "whatsapp",
    "zapzap": "whatsapp",
    "robot": "robo",
    "robozinho": "robo",
    "robozao": "robo",
    "botzinho": "bot",
    "aplicativo": "app",
    "krl": "caralho",
    "krlh": "caralho",
    "crl": "caralho",
    "crlh": "caralho",
    "caraio": "caralho",
    "carai": "caralho",
    "karalho": "caralho",
    "kct": "cacete",
    "vtmnc": "vtnc",
    "poha": "porra",
    "pora": "porra",
    "porr": "porra",
    "prr": "porra",
    "pqpp": "pqp",
    "ptqp": "pqp",
    "af": "aff",
    "afe": "aff",
    "afs": "aff",
    "arg": "argh",
    "tnc": "vtnc",
    "fodase": "foda se",
    "fdse": "foda se",
    "merd": "merda",
    "bost": "bosta",
    "plmds": "pelo amor de deus",
    "pelamor": "pelo amor",
    "mds": "meu deus",
    "meudeus": "meu deus",
    "humanu": "humano",
}
_SPELLING_KEYS: Final = frozenset(_SPELLING)


def _drop_laughter(words: list[str]) -> list[str]:
    return [w for w in words if w[:2] not in _LAUGH_STARTS or not _LAUGHTER.fullmatch(w)]


def clip(text: str) -> str:
    """The text itself, or its head and tail when it is absurdly long."""
    if len(text) <= MAX_CHARS:
        return text
    return f"{text[:_HEAD]} {text[-_TAIL:]}"


def normalize(text: str, *, keep_punct: bool = False) -> str:
    """The canonical matching form of ``text`` (see the module docstring).

    With ``keep_punct`` clause punctuation survives as a "," token ("que saco , acabou
    o gas"), for the few checks that need to know where a clause ends.
    """
    out = clip(text).lower()
    if not out.isascii():
        out = unicodedata.normalize("NFKD", out).encode("ascii", "ignore").decode("ascii")
    if keep_punct:
        out = _NON_WORD_KEEP.sub(" ", _CLAUSE.sub(" , ", out))
        words = out.split()
    else:
        words = _WORD.findall(out)
    if _has_any(out, _LAUGH_MARKS):
        words = _drop_laughter(words)
        out = " ".join(words)
    vowels = _has_any(out, _VOWEL_PAIRS)
    triple = _TRIPLE.search(out) is not None
    if vowels or triple:
        out = " ".join(words)
        if triple:
            out = _CONSONANT_RUNS.sub(r"\1", _RS_RUNS.sub(r"\1\1", out))
        if vowels:
            for pair in _VOWEL_PAIRS:  # str.replace beats a back-reference regex
                while pair in out:
                    out = out.replace(pair, pair[0])
        words = out.split()
        if _has_any(out, _LAUGH_MARKS):  # "haahaa" is laughter once collapsed
            words = _drop_laughter(words)
    if not _SPELLING_KEYS.isdisjoint(words):
        words = [_SPELLING.get(word, word) for word in words]
    return " ".join(words)
