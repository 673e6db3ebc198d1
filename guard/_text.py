"""Text normalisation shared by the three detectors.

One pass turns a WhatsApp message into a canonical form the detectors match against:
lower-case ASCII words separated by single spaces, no punctuation, no laughter, letters
that were stretched for emphasis collapsed, and common WhatsApp spellings mapped to one
word (``vc`` → ``voce``, ``pq`` → ``porque``, ``n`` → ``nao``, ``tá`` → ``ta`` ...).

    >>> normalize("Vc NÃÃÃO entende, affff!!! kkkk 😡")
    'voce nao entende aff'

The detectors' word lists are written in this canonical form (no accents, no doubled
vowels); ``tests/unit/test_guard.py`` checks that the lists are fixed points of it.

Censored swear words are restored ("p*rra" → "porra", "c*" → "cu", "m3rda" → "merda",
"p.q.p" → "pqp"; the candidates are lexicon.toml's [censored] targets).

Absurdly long texts are clipped (head and tail kept) before anything else, so a 10 000
character message costs about as much as a 600 character one.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Final

from guard._data import LexiconError, string, strings, table

__all__ = [
    "MAX_CHARS",
    "clip",
    "emoji_set",
    "has_emoji",
    "laughs",
    "normalize",
    "normalized_words",
]

#: Longer texts are clipped to their first HEAD and last TAIL characters.
MAX_CHARS: Final = 600
_HEAD: Final = 400
_TAIL: Final = 200

# ASCII text → its words: every character but a-z and 0-9 becomes a space (a bytes
# translate and a split cost a third of a str translate, which looks every character up in
# a dict, or of a regex findall).
_WORD_BYTES: Final = bytes(
    c if chr(c) in "abcdefghijklmnopqrstuvwxyz0123456789" else 32 for c in range(256)
)
# Laughter and keyboard noise carry no signal for any detector: kkkk, hahaha, rsrs, huehue.
# Matched word by word, only on words that start like laughter (a regex scan of the whole
# text costs ~2 µs).
_LAUGHTER: Final = re.compile(r"k{2,}[a-z]?|a?(?:ha|he|hi|hu){2,}h?|(?:hua|hue){2,}h?|(?:rs){2,}r?")
_LAUGH_STARTS: Final = frozenset(("kk", "ha", "he", "hi", "hu", "ah", "rs"))
# Letters stretched for emphasis: any vowel run (naaao, nãããão) becomes one vowel,
# consonant runs of 3+ become one (affff), except rr/ss which Portuguese spells doubled.
_RS_RUNS: Final = re.compile(r"([rs])\1{2,}")
# ... and at the end of a word, where Portuguese never doubles them ("operadorrr").
_RS_END: Final = re.compile(r"([rs])\1\b")
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


# WhatsApp spellings → canonical words (lexicon.toml [spelling]; keys in collapsed form).
_SPELLING: Final[dict[str, str]] = {
    key: string(f"spelling.{key}", value) for key, value in table("spelling").items()
}
_SPELLING_KEYS: Final = frozenset(_SPELLING)
_SPLIT_SPELLINGS: Final = frozenset(key for key, value in _SPELLING.items() if " " in value)
# Emoji that stand for a word (lexicon.toml [emoji_words]).
_EMOJI_WORDS: Final = tuple(
    (emoji, string(f"emoji_words.{emoji}", word)) for emoji, word in table("emoji_words").items()
)


# Censored swear words: a word with * # or @ among its letters, or a digit standing for a
# letter ("p*rra", "c*", "m3rda", "c@ralho"), and single letters between dots ("p.q.p").
_CENSOR_TARGETS: Final = tuple(strings("censored.targets"))
# Cheap pre-checks (a regex scan of the whole text costs 1-3 µs; these cost ~0.2).
_HIDDEN_MARKS: Final = ("*", "#", "@")
_DOTTED_HINT: Final = re.compile(r"\.[a-z]\.")
_CANDIDATE: Final = re.compile(r"[a-z0-9*#@]*[a-z*#@][a-z0-9*#@]*")
_DOTTED: Final = re.compile(r"\b[a-z](?:\.[a-z]){2,}\b")
_LEET: Final = {"0": "o", "1": "i", "3": "e", "4": "a", "7": "t", "@": "a"}
_HIDDEN: Final = "*#"


def _mask(word: str, *, loose: bool) -> re.Pattern[str]:
    """``word`` as a pattern: a hidden letter is one letter, or with ``loose`` a run of
    hidden letters is any number of letters."""
    parts: list[str] = []
    for char in word:
        if char not in _HIDDEN:
            parts.append(re.escape(_LEET.get(char, char)))
        elif not loose:
            parts.append("[a-z]")
        elif not parts or parts[-1] != "[a-z]*":
            parts.append("[a-z]*")
    return re.compile("".join(parts))


@functools.lru_cache(maxsize=1024)
def _restore(word: str) -> str:
    """The swear word ``word`` stands for, or ``word`` itself."""
    if not any("a" <= char <= "z" for char in word):
        return word
    for pattern in (_mask(word, loose=False), _mask(word, loose=True)):
        for target in _CENSOR_TARGETS:
            if pattern.fullmatch(target):
                return target
    return word


def _uncensor(text: str) -> str:
    """``text`` with letters hidden by * # @, and dotted letters, restored."""
    if "." in text and _DOTTED_HINT.search(text) is not None:
        text = _DOTTED.sub(lambda m: m.group().replace(".", ""), text)
    if _has_any(text, _HIDDEN_MARKS):
        text = _CANDIDATE.sub(lambda m: _restore(m.group()), text)
    return text


def _unleet(words: list[str]) -> list[str]:
    """Words with a digit standing for a letter restored ("m3rda" → "merda")."""
    return [_restore(w) if not w.isalpha() and not w.isdigit() else w for w in words]


def _number_words() -> dict[str, tuple[int, int]]:
    """Number word → (value, place): 3 hundreds, 2 tens, 1 units; a teen fills tens and
    units, so its place is 2 and nothing smaller than 10 may follow it."""
    out: dict[str, tuple[int, int]] = {}
    for section, place in (("units", 1), ("teens", 2), ("tens", 2), ("hundreds", 3)):
        for word, value in table(f"numbers.{section}").items():
            if not isinstance(value, int):
                raise LexiconError(f"lexicon.toml: 'numbers.{section}.{word}' must be a number")
            key = unicodedata.normalize("NFKD", word).encode("ascii", "ignore").decode("ascii")
            out[key] = (value, place)
    return out


_NUMBERS: Final = _number_words()
_THOUSAND: Final = string("numbers.thousand")
_NUMBER_KEYS: Final = frozenset(_NUMBERS) | {_THOUSAND}
# "um" and "uma" alone are articles: only another number word starts a number.
_NUMBER_STARTS: Final = _NUMBER_KEYS - {"um", "uma"}
# Articles before they are numbers; "zero" is a number on its own.
_NOT_A_START: Final = frozenset(("um", "uma"))


def _fits(word: str, filled: int) -> bool:
    """Whether ``word`` can be the next part of a number whose smallest filled place is
    ``filled`` ("cento" then "vinte" then "cinco"; not "nove" then "noventa")."""
    entry = _NUMBERS.get(word)
    return entry is not None and word != "zero" and entry[1] < filled


def _spoken_numbers(words: list[str]) -> list[str]:
    """Numbers said in words as digits: "quatrocentos e cinquenta" → "450"."""
    out: list[str] = []
    i, count = 0, len(words)
    while i < count:
        word = words[i]
        if word not in _NUMBER_KEYS:  # the common case
            out.append(word)
            i += 1
            continue
        if word == "zero":
            out.append("0")
            i += 1
            continue
        total, current, filled = 0, 0, 4
        after_thousand = False
        if word == _THOUSAND:  # "mil e duzentos", "10 mil"
            total = (int(out.pop()) if out and out[-1].isdigit() else 1) * 1000
            after_thousand = True
            i += 1
        elif word not in _NUMBERS or word in _NOT_A_START:
            out.append(word)
            i += 1
            continue
        while i < count:
            word = words[i]
            if word == _THOUSAND and not after_thousand:
                total += (current or 1) * 1000
                current, filled, after_thousand = 0, 4, True
                i += 1
            elif (
                (current or after_thousand)
                and word == "e"
                and i + 1 < count
                and (_fits(words[i + 1], filled))
            ):
                i += 1
            elif (current == 0 and not after_thousand and _fits(word, filled)) or (
                (after_thousand or words[i - 1] == "e") and _fits(word, filled)
            ):
                value, place = _NUMBERS[word]
                current += value
                filled = 1 if 10 < value < 20 or value == 10 else place
                i += 1
            else:
                break
        out.append(str(total + current))
    return out


def _laughs(text: str) -> bool:
    """Whether ``text`` holds one of ``_LAUGH_MARKS``."""
    return (
        "kk" in text
        or "hah" in text
        or "heh" in text
        or "hih" in text
        or "huh" in text
        or "hua" in text
        or "hue" in text
        or "rsrs" in text
    )


def laughs(text: str) -> bool:
    """Whether the raw ``text`` holds a word of laughter ("kkkk", "hahaha", "rsrs"), which
    normalisation drops."""
    low = text.lower()
    if not _laughs(low):
        return False
    words = low.encode("ascii", "replace").translate(_WORD_BYTES).decode().split()
    return _drop_laughter(words) != words


def _drop_laughter(words: list[str]) -> list[str]:
    return [w for w in words if w[:2] not in _LAUGH_STARTS or not _LAUGHTER.fullmatch(w)]


def _mixed(words: list[str]) -> bool:
    """Whether a word has both letters and digits ("m3rda"): a letter next to a digit in
    the text (a regex scan for one costs 1-2 µs)."""
    for word in words:  # noqa: SIM110 - a plain loop beats any() with a generator here
        if not word.isalpha() and not word.isdigit():
            return True
    return False


# Every step of ``normalized_words`` after the split but the collapse of consonant runs
# and said numbers looks at one word at a time, and each test that sets one off looks at
# letters and digits only, so it fires on the text exactly when it fires on one of its
# words: a word's result is cached (``_form``), and a message made only of words that no
# step changes (``_PLAIN``) is done after the split, one set operation instead of some
# twenty substring tests and regex scans. Bounded: emptied when full.
_FORMS: Final[dict[str, tuple[tuple[str, ...], bool]]] = {}
_PLAIN: Final[set[str]] = set()
_FORMS_LIMIT: Final = 50_000


def _by_word(words: list[str], out: str) -> list[str]:
    """``words`` (of the text ``out``) after the steps that look at words: digits for
    letters, laughter, stretched letters and WhatsApp spellings (not said numbers)."""
    if ("0" in out or "1" in out or "3" in out or "4" in out or "7" in out) and _mixed(words):
        words = _unleet(words)
    if (
        "kk" in out
        or "hah" in out
        or "heh" in out
        or "hih" in out
        or "huh" in out
        or "hua" in out
        or "hue" in out
        or "rsrs" in out
    ):  # _laughs, written out
        words = _drop_laughter(words)
        out = " ".join(words)
    vowels = "aa" in out or "ee" in out or "ii" in out or "oo" in out or "uu" in out
    triple = _TRIPLE.search(out) is not None
    if vowels or triple:
        out = " ".join(words)
        if triple:
            out = _CONSONANT_RUNS.sub(r"\1", _RS_END.sub(r"\1", _RS_RUNS.sub(r"\1\1", out)))
        if vowels:
            for pair in _VOWEL_PAIRS:  # str.replace beats a back-reference regex
                while pair in out:
                    out = out.replace(pair, pair[0])
        words = out.split()
        if _laughs(out):  # "haahaa" is laughter once collapsed
            words = _drop_laughter(words)
    if not _SPELLING_KEYS.isdisjoint(words):
        if _SPLIT_SPELLINGS.isdisjoint(words):
            words = [_SPELLING.get(word, word) for word in words]
        else:  # a spelling that stands for two words ("oq" → "o que")
            words = " ".join([_SPELLING.get(word, word) for word in words]).split()
    return words


def _form(word: str) -> tuple[tuple[str, ...], bool]:
    """What ``_by_word`` makes of ``word`` alone, and whether it holds a consonant run that
    the whole text's collapse looks at (it also takes a final "rr"/"ss" off the other
    words): cached, and the word filed as plain when nothing changes it."""
    if len(_FORMS) >= _FORMS_LIMIT:
        _FORMS.clear()
        _PLAIN.clear()
    form = tuple(_by_word([word], word))
    # (laughter goes before the runs are looked at: "kkk" holds none)
    run = _TRIPLE.search(word) is not None and bool(_drop_laughter(_unleet([word])))
    if not run and form == (word,) and word not in _NUMBER_STARTS:
        _PLAIN.add(word)
    found = _FORMS[word] = (form, run)
    return found


def emoji_set(path: str) -> frozenset[str]:
    """The characters of the string at ``path`` in lexicon.toml: emoji, each one beyond
    Latin-1 (``has_emoji`` relies on it)."""
    chars = frozenset(string(path))
    latin = sorted(char for char in chars if ord(char) < 0x100)
    if latin:
        raise LexiconError(f"lexicon.toml: '{path}' holds {latin}, which are not emoji")
    return chars


def has_emoji(text: str, emoji: frozenset[str]) -> bool:
    """Whether ``text`` holds one of ``emoji`` (an ``emoji_set``). A text with no character
    beyond Latin-1 (ASCII, Portuguese accents) cannot, and that takes one pass in C, where
    testing the set against the text hashes every character."""
    return (
        not text.isascii()
        and len(text.encode("latin-1", "ignore")) != len(text)
        and not emoji.isdisjoint(text)
    )


def clip(text: str) -> str:
    """The text itself, or its head and tail when it is absurdly long."""
    if len(text) <= MAX_CHARS:
        return text
    return f"{text[:_HEAD]} {text[-_TAIL:]}"


def _latin_tables() -> tuple[bytes, bytes]:
    """A byte table that maps Latin-1 to what NFKD and dropping what is not ASCII make of
    each character ("ã" → "a", "ª" → "a"), and the characters that come out empty ("°",
    "§"). The three that come out as two digits ("¼", "½", "¾") are left as they are."""
    table = bytearray(range(256))
    dropped = bytearray()
    for byte in range(0x80, 0x100):
        form = unicodedata.normalize("NFKD", chr(byte)).encode("ascii", "ignore")
        if not form:
            dropped.append(byte)
        elif len(form) == 1:
            table[byte] = form[0]
    return bytes(table), bytes(dropped)


_LATIN_TO_ASCII, _LATIN_DROPPED = _latin_tables()


def normalize(text: str) -> str:
    """The canonical matching form of ``text`` (see the module docstring)."""
    return " ".join(normalized_words(text))


def normalized_words(text: str) -> list[str]:
    """The words of ``normalize(text)``."""
    out = (text if len(text) <= MAX_CHARS else clip(text)).lower()
    if out.isascii():
        data = out.encode("ascii")
    else:
        try:  # Portuguese accents and no emoji: one byte table does what NFKD would
            data = out.encode("latin-1").translate(_LATIN_TO_ASCII, _LATIN_DROPPED)
        except UnicodeEncodeError:
            data = b"\x80"
        if not data.isascii():  # emoji, other scripts, or a fraction ("½" is "12")
            for emoji, word in _EMOJI_WORDS:
                if emoji in out:
                    out = out.replace(emoji, f" {word} ")
            data = unicodedata.normalize("NFKD", out).encode("ascii", "ignore")
        out = data.decode("ascii")
    # (the substring tests are written out: an `or` chain of `in` beats any loop or regex)
    if "." in out or "*" in out or "#" in out or "@" in out:
        uncensored = _uncensor(out)
        if uncensored != out:
            out = uncensored
            data = out.encode("ascii")
    words = data.translate(_WORD_BYTES).decode("ascii").split()
    if _PLAIN.issuperset(words):  # the common case: no step below changes a word
        return words
    # each word as the steps that look at one word at a time make it (cached), unless a
    # word holds a consonant run, whose collapse looks at the whole text
    formed: list[str] = []
    forms = _FORMS
    for word in words:
        found = forms.get(word)
        if found is None:
            found = _form(word)
        if found[1]:
            words = _by_word(words, out)
            break
        formed += found[0]
    else:
        words = formed
    if not _NUMBER_STARTS.isdisjoint(words):
        words = _spoken_numbers(words)
    return words
