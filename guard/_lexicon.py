"""The detectors' building blocks, made from ``guard/lexicon.toml``.

* ``Terms`` — a list of words and phrases (written naturally, normalised here). A word
  matches by set membership, a phrase as whole words in order (a substring test on the
  space-padded message), tried only when its longest word is in the message.
* ``Rules`` — terms plus regex patterns. Python's ``re`` tries every branch of a big
  alternation at every position, which is what made a first version of the guard cost
  20-40 µs a message; so each pattern carries the words it cannot match without (``keys``,
  and optionally a second set, ``requires``) and runs only when the message holds them.
  ``tests/unit/test_guard_properties.py`` checks that every match holds a key. A pattern
  without ``requires`` gets the words it needs read from its parse tree (``guard._needs``),
  so that a common key alone ("disse", "suporte") does not run it. A pattern whose matches
  start and end with a letter or a digit also runs in a faster form, that ``re`` can scan
  for (``guard._spaced``).
* ``fragment`` — a named regex piece; ``<name>`` inside a pattern inserts it, and a term
  list used as a fragment becomes an alternation of its (normalised, escaped) terms.

Every matching function takes the normalised message three ways, computed once per
evaluation: ``text`` ("que bot burro"), ``tokens`` (its words) and ``padded`` (" que bot
burro ", for phrase tests).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from typing import Final

from guard._data import LexiconError, string, strings, table
from guard._needs import needs
from guard._spaced import spaced
from guard._text import normalize

__all__ = [
    "NUMBER",
    "Pattern",
    "Rules",
    "Terms",
    "compile_pattern",
    "fragment",
    "inflections",
    "key_words",
    "patterns",
    "rules",
    "tokens_of",
]

_REFERENCE: Final = re.compile(r"<([a-z_]+)>")
# Words in most messages, the most common first: a phrase is filed under its word that is
# not in here, or else under the one furthest down (the rarest of them).
# fmt: off
_COMMON: Final = (
    "a", "o", "e", "de", "que", "nao", "da", "do", "em", "no", "na", "pra", "um", "uma", "com",
    "me", "te", "se", "eu", "voce", "ta", "to", "os", "as", "por", "isso", "mais", "muito",
    "ja", "tem", "vai", "ai", "la", "aqui", "mel", "anota", "registra", "quanto", "gastei",
    "paguei", "conta", "mes", "reais", "valor", "dinheiro", "tudo", "ser", "foi", "ele",
    "ela", "gente", "mesmo", "quero", "demais", "obrigado", "obrigada", "valeu", "tenho", "ver",
    "so", "nada",
)
# fmt: on
_RANK: Final = {word: rank for rank, word in enumerate(_COMMON)}
_WRAP: Final = re.compile(r"\n[ \t]*")


def _fragments() -> dict[str, object]:
    """All named fragments, whatever sub-table of [fragments] they are defined in."""
    merged: dict[str, object] = {}
    for section, values in table("fragments").items():
        if not isinstance(values, dict):
            raise LexiconError(f"lexicon.toml: 'fragments.{section}' must be a table")
        for name, value in values.items():
            if name in merged:
                raise LexiconError(f"lexicon.toml: fragment '{name}' is defined twice")
            merged[name] = value
    return merged


_FRAGMENTS: Final = _fragments()


def _inflection_rules() -> tuple[dict[str, tuple[str, ...]], frozenset[str]]:
    """[inflection]: a word's last letter → the endings that replace it, and the forms
    never generated (everyday words: "fração" is not a weak "fraco")."""
    node = table("inflection")
    endings: dict[str, tuple[str, ...]] = {}
    for letter, value in node.items():
        if letter == "never":
            continue
        endings[letter] = tuple(normalize(e) for e in strings(f"inflection.{letter}", value))
    never = frozenset(normalize(w) for w in strings("inflection.never", node.get("never")))
    return endings, never


_ENDINGS, _NEVER_INFLECTED = _inflection_rules()


def inflections(word: str) -> list[str]:
    """``word`` in its other genders and numbers, diminutive, augmentative and superlative
    ("burro" → "burra", "burros", "burrinho", "burrão", "burríssimo" ...), as lexicon.toml
    [inflection] says; "c" and "g" before "i" become "qu" and "gu" ("louquinho")."""
    endings = _ENDINGS.get(word[-1:], ())
    stem = word[:-1]
    out = []
    for ending in endings:
        base = stem
        if ending[:1] in "ei" and base[-1:] in "cg":
            base = base + "u" if base[-1] == "g" else base[:-1] + "qu"
        form = normalize(base + ending)  # "otari" + "inho" is "otarinho"
        if form not in _NEVER_INFLECTED:
            out.append(form)
    return out


def _terms_of(path: str, value: object) -> list[str]:
    """The normalised terms of a list; a word written with a final ``*`` ("burro*") stands
    for itself and its ``inflections``."""
    normalised = []
    for term in strings(path, value):
        inflect = term.endswith("*")
        norm = normalize(term[:-1] if inflect else term)
        if not norm:
            raise LexiconError(f"lexicon.toml: '{path}' holds {term!r}, which has no words")
        normalised.append(norm)
        if inflect:
            if " " in norm:
                raise LexiconError(f"lexicon.toml: '{path}': only single words take '*' ({term!r})")
            normalised.extend(inflections(norm))
    return normalised


def _trie(terms: Iterable[str]) -> str:
    """An alternation of ``terms`` as a prefix tree ("burro", "burros", "burra" →
    ``burr(?:a|os?)``): Python's ``re`` tries the branches of a flat alternation one by one
    at every position, a tree costs one branch per letter. A longer term is tried before a
    term that is its prefix, as in a longest-first alternation."""
    root: dict[str, dict] = {}  # type: ignore[type-arg]
    for term in terms:
        node = root
        for char in term:
            node = node.setdefault(char, {})
        node[""] = {}

    def emit(node: dict[str, dict]) -> str:  # type: ignore[type-arg]
        ends = "" in node
        branches = [re.escape(char) + emit(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if ends:
            return f"(?:{body})?"
        return body

    return "(?:" + emit(root) + ")"


def fragment(name: str, _seen: tuple[str, ...] = ()) -> str:
    """The regex of fragment ``name`` with its own references expanded."""
    if name in _seen:
        raise LexiconError(f"lexicon.toml: fragment '{name}' refers to itself")
    if name not in _FRAGMENTS:
        raise LexiconError(f"lexicon.toml: fragment '<{name}>' is not defined")
    value = _FRAGMENTS[name]
    if isinstance(value, list):
        return _trie(set(_terms_of(f"fragments.{name}", value)))
    source = _WRAP.sub("", string(f"fragments.{name}", value))
    return _REFERENCE.sub(lambda m: fragment(m.group(1), (*_seen, name)), source)


#: The pseudo-word a message's tokens hold when it holds a number (``<number>`` in keys).
NUMBER: Final = "#"


def tokens_of(words: Iterable[str], text: str) -> frozenset[str]:
    """The token set the rules look at: the words, plus ``NUMBER`` when there is a number
    (``text`` is the words joined)."""
    tokens = frozenset(words)
    # normalised text is lower-case letters, digits and spaces: not all letters means digits
    if text and not text.replace(" ", "").isalpha():
        return tokens | {NUMBER}
    return tokens


def key_words(spec: str) -> frozenset[str]:
    """Space-separated words; ``<name>`` adds the longest word of every term of the term-list
    fragment ``name`` (a term cannot match without its longest word), ``<number>`` stands
    for any number."""
    out: set[str] = set()
    for item in spec.split():
        match = _REFERENCE.fullmatch(item)
        if match is None:
            out.add(item)
            continue
        if match.group(1) == "number":
            out.add(NUMBER)
            continue
        value = _FRAGMENTS.get(match.group(1))
        if not isinstance(value, list):
            raise LexiconError(f"lexicon.toml: keys use '{item}', which is not a term list")
        terms = _terms_of(f"fragments.{match.group(1)}", value)
        out.update(max(term.split(), key=len) for term in terms)
    return frozenset(out)


def compile_pattern(source: str) -> re.Pattern[str]:
    """A lexicon pattern, fragments expanded, between word boundaries."""
    expanded = _REFERENCE.sub(lambda m: fragment(m.group(1)), _WRAP.sub("", source))
    try:
        return re.compile(rf"\b(?:{expanded})\b")
    except re.error as exc:
        raise LexiconError(f"lexicon.toml: bad pattern {source[:60]!r}...: {exc}") from None


def _body(regex: re.Pattern[str]) -> str | None:
    """What is inside the ``\\b(?:...)\\b`` that ``compile_pattern`` wraps a pattern in, or
    None for a regex it did not make."""
    source = regex.pattern
    if source.startswith("\\b(?:") and source.endswith(")\\b"):
        return source[5:-3]
    return None


class Terms:
    """Words and phrases; see the module docstring."""

    __slots__ = ("keys", "phrase_keys", "phrases", "words")

    def __init__(self, terms: Iterable[str]) -> None:
        words: set[str] = set()
        phrases: dict[str, list[str]] = {}
        for term in terms:
            if " " in term:
                # filed under its rarest word (the longest one that is not everywhere), so
                # the fewest messages have to try it
                rare = [word for word in term.split() if word not in _RANK]
                key = max(rare, key=len) if rare else max(term.split(), key=_RANK.__getitem__)
                phrases.setdefault(key, []).append(f" {term} ")
            else:
                words.add(term)
        self.words: Final = frozenset(words)
        #: the longest word of each phrase → the space-padded phrases filed under it
        self.phrases: Final = {key: tuple(found) for key, found in phrases.items()}
        self.phrase_keys: Final = frozenset(self.phrases)
        #: a message with none of these words cannot match
        self.keys: Final = self.words | frozenset(phrases)

    @classmethod
    def at(cls, path: str) -> Terms:
        """The term list at ``path`` in lexicon.toml."""
        return cls(_terms_of(path, strings(path)))

    def search(self, padded: str, tokens: Collection[str]) -> bool:
        """Whether the message holds one of the terms."""
        if self.keys.isdisjoint(tokens):
            return False
        return self.found(padded, self.keys.intersection(tokens))

    def found(self, padded: str, hits: Collection[str]) -> bool:
        """``search``, given the message's words that are ``keys`` (``hits``)."""
        if not self.words.isdisjoint(hits):
            return True
        for key in self.phrase_keys.intersection(hits):
            for phrase in self.phrases[key]:
                if phrase in padded:
                    return True
        return False


class Pattern:
    """A regex that runs only when the message holds one of ``keys`` (and, when given, one
    of ``requires``); empty ``keys`` means it always runs. ``necessary`` says whether every
    match holds a word of ``requires`` (else they are lexicon.toml's ``only_with``: a
    condition). ``spaced`` is its faster form, to search ``" " + text`` for, when it has one
    (``guard._spaced``)."""

    __slots__ = ("keys", "necessary", "regex", "requires", "spaced")

    def __init__(
        self,
        keys: frozenset[str],
        regex: re.Pattern[str],
        requires: frozenset[str],
        necessary: bool = True,
    ):
        self.keys: Final = keys
        self.regex: Final = regex
        self.requires: Final = requires
        self.necessary: Final = necessary
        body = _body(regex)
        self.spaced: Final = None if body is None else spaced(body)

    def search(self, text: str, tokens: Collection[str]) -> bool:
        """Whether the pattern matches the message."""
        if self.keys and self.keys.isdisjoint(tokens):
            return False
        if self.requires and self.requires.isdisjoint(tokens):
            return False
        if self.spaced is not None:
            return self.spaced.search(f" {text}") is not None
        return self.regex.search(text) is not None


def _commonness(words: frozenset[str]) -> int:
    return sum(len(_COMMON) - _RANK.get(word, len(_COMMON)) for word in words)


def _needed(regex: re.Pattern[str], keys: frozenset[str]) -> frozenset[str]:
    """Words a match of ``regex`` cannot do without (``guard._needs``), to run it only on
    messages holding one as well as a key: of each alternative's sets, the one of the least
    common words (and then the fewest), but not one of keys only when that makes them all
    keys. Empty when some alternative has none, or when a message holding a key always holds
    one of them."""
    body = _body(regex)
    alternatives = [] if body is None else needs(body, _RANK)
    if not alternatives or not all(alternatives):
        return frozenset()

    def rank(words: frozenset[str]) -> tuple[int, int]:
        return _commonness(words), len(words)

    for avoid in (frozenset[str](), keys):
        found = frozenset[str]().union(
            *(
                min((s for s in sets if not s <= avoid), key=rank, default=min(sets, key=rank))
                for sets in alternatives
            )
        )
        if not keys <= found:
            return found
    return frozenset()


def patterns(path: str, value: object = None) -> tuple[Pattern, ...]:
    """The [[path]] pattern tables of lexicon.toml (or ``value``, named ``path``)."""
    if value is None:
        value = table(path.rpartition(".")[0]).get(path.rpartition(".")[2])
    if not isinstance(value, list):
        raise LexiconError(f"lexicon.toml: '{path}' must be a list of [[...patterns]] tables")
    out = []
    for index, item in enumerate(value):
        where = f"{path}[{index}]"
        if not isinstance(item, dict) or "regex" not in item:
            raise LexiconError(f"lexicon.toml: '{where}' needs a regex")
        unknown = set(item) - {"keys", "requires", "only_with", "regex"}
        if unknown:
            raise LexiconError(f"lexicon.toml: '{where}' has unknown fields {sorted(unknown)}")
        regex = compile_pattern(string(f"{where}.regex", item["regex"]))
        keys = key_words(string(f"{where}.keys", item.get("keys", "")))
        requires = key_words(string(f"{where}.requires", item.get("requires", "")))
        only_with = key_words(string(f"{where}.only_with", item.get("only_with", "")))
        if requires and only_with:
            raise LexiconError(f"lexicon.toml: '{where}' has both requires and only_with")
        gate = requires or only_with or _needed(regex, keys)
        out.append(Pattern(keys, regex, gate, necessary=not only_with))
    return tuple(out)


class Rules:
    """Terms plus key-gated patterns, as one detector step."""

    __slots__ = ("_always", "_any_keys", "_masks", "keys", "patterns", "terms")

    def __init__(self, terms: Terms, patterns: tuple[Pattern, ...]) -> None:
        self.terms: Final = terms
        self.patterns: Final = patterns
        #: a message with none of these words cannot match (empty when a pattern always runs)
        self.keys: Final = (
            frozenset()
            if any(not p.keys for p in patterns)
            else terms.keys.union(*(p.keys for p in patterns))
        )
        # key word → the patterns it unlocks, as a bit mask of their positions, so that a
        # message only visits its own candidates, in the order the lexicon lists them (the
        # common forms first); the patterns without keys are candidates for every message
        masks: dict[str, int] = {}
        for index, pattern in enumerate(patterns):
            for key in pattern.keys:
                masks[key] = masks.get(key, 0) | 1 << index
        self._masks: Final = masks
        self._always: Final = sum(1 << i for i, p in enumerate(patterns) if not p.keys)
        # the words a message is looked up by once: a term's or a pattern's keys
        self._any_keys: Final = terms.keys | frozenset(masks)

    def _candidates(self, hits: Collection[str]) -> int:
        """The patterns a message holding ``hits`` of the keys unlocks, as a bit mask."""
        candidates = self._always
        masks = self._masks
        for key in hits:
            candidates |= masks.get(key, 0)
        return candidates

    def search(self, text: str, tokens: Collection[str], padded: str) -> bool:
        """Whether the message holds a term or matches a pattern."""
        if self._any_keys.isdisjoint(tokens):  # the common case (cheaper than a set made)
            if not self._always:
                return False
            hits: Collection[str] = ()
        else:
            hits = self._any_keys.intersection(tokens)
            if self.terms.found(padded, hits):
                return True
        candidates = self._candidates(hits)
        patterns = self.patterns
        spaced_text = ""
        while candidates:  # lowest bit first: in the lexicon's order
            lowest = candidates & -candidates
            candidates ^= lowest
            pattern = patterns[lowest.bit_length() - 1]
            if pattern.requires and pattern.requires.isdisjoint(tokens):
                continue
            if pattern.spaced is None:
                if pattern.regex.search(text) is not None:
                    return True
                continue
            if not spaced_text:
                spaced_text = f" {text}"
            if pattern.spaced.search(spaced_text) is not None:
                return True
        return False

    def sub(self, replacement: str, text: str, tokens: Collection[str]) -> str:
        """``text`` with every match of a pattern whose keys it holds replaced (terms are
        not replaced)."""
        candidates = self._candidates(self._any_keys.intersection(tokens))
        if not candidates:
            return text
        patterns = self.patterns
        text = f" {text}"  # (the faster forms' space; see ``Pattern``)
        spaced_replacement = f" {replacement}"
        while candidates:
            lowest = candidates & -candidates
            candidates ^= lowest
            pattern = patterns[lowest.bit_length() - 1]
            if pattern.requires and pattern.requires.isdisjoint(tokens):
                continue
            if pattern.spaced is None:
                text = f" {pattern.regex.sub(replacement, text[1:])}"
            else:
                text = pattern.spaced.sub(spaced_replacement, text)
        return text[1:]


def rules(path: str) -> Rules:
    """The rules at ``path`` in lexicon.toml: its ``terms`` and ``patterns``, both optional."""
    node = table(path)
    unknown = set(node) - {"terms", "patterns"}
    if unknown:
        raise LexiconError(f"lexicon.toml: '{path}' has unknown fields {sorted(unknown)}")
    terms = Terms(_terms_of(f"{path}.terms", node["terms"])) if "terms" in node else Terms(())
    found = patterns(f"{path}.patterns", node["patterns"]) if "patterns" in node else ()
    return Rules(terms, found)
