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
character message costs about as much as a 500 character one.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

__all__ = ["MAX_CHARS", "clip", "normalize"]

#: Longer texts are clipped to their first HEAD and last TAIL characters.
MAX_CHARS: Final = 480
_HEAD: Final = 320
_TAIL: Final = 160

_NON_WORD: Final = re.compile(r"[^a-z0-9]+")
# With ``keep_punct``: clause punctuation becomes a "," token, everything else a space.
_CLAUSE: Final = re.compile(r"\s*[,.;:!?\u2026]+\s*")
_NON_WORD_KEEP: Final = re.compile(r"[^a-z0-9,]+")
# Laughter and keyboard noise carry no signal for any detector: kkkk, hahaha, rsrs, huehue.
_LAUGHTER: Final = re.compile(
    r"\b(?:k{2,}[a-z]?|a?(?:ha|he|hi|hu){2,}h?|(?:hua|hue){2,}h?|(?:rs){2,}r?)\b"
)
# Letters stretched for emphasis: any vowel run (naaao, nãããão) becomes one vowel,
# consonant runs of 3+ become one (affff), except rr/ss which Portuguese spells doubled.
_RUNS: Final = re.compile(r"([aeiou])\1+|([rs])\2{2,}|([b-df-hj-npqt-z])\3{2,}")

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
_SPELLING_RE: Final = re.compile(r"\b(?:" + "|".join(sorted(_SPELLING, key=len)[::-1]) + r")\b")


def _spell(match: re.Match[str]) -> str:
    return _SPELLING[match.group()]


def _collapse(match: re.Match[str]) -> str:
    vowel, rs, other = match.groups()
    if vowel is not None:
        return vowel
    if rs is not None:
        return rs + rs
    return other or ""


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
    else:
        out = _NON_WORD.sub(" ", out)
    out = _LAUGHTER.sub(" ", out)
    out = _RUNS.sub(_collapse, out)
    out = _SPELLING_RE.sub(_spell, out)
    return " ".join(out.split())
