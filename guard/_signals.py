"""Weak signals: what each word of a message hints at, and a hand-set score over them.

A phrase list matches a family only as written; people who are fed up with mel write a
new phrasing every time ("que revolucionário, um app que não sabe o saldo 👏", "fiquei
arretado com tu", "tô rindo pra não chorar com esse aplicativo"). What those phrasings
share is a handful of weak hints — a word pointing at mel, a word of negative judgement
in any inflection, a capability denied ("não sabe", "nunca acerta"), exasperation,
giving up, disappointment, repetition, an eye-roll emoji — and a few that point away
from mel (an amount, a shop, a bank, someone else). Alone each hint means little ("vc",
"erro", "de novo"); together they are frustration.

``lexicon.toml`` [signals.*] lists the words of each hint by ``words`` (exact; a final
``*`` inflects them as elsewhere), ``stems`` (any word that starts with it: "decepc"
matches "decepcionei", "decepção", "decepcionante"; ``except`` lists the words a stem must
not catch) and ``phrases``. [score.frustration] gives each hint a weight and sets the
threshold. Here is only how they are read:

* each word's hints are a bit mask (``_masks.mask_of``), computed once per word and
  cached, so a message costs a dictionary lookup per word (and a message made only of
  words with no hint that can raise a score costs one set operation: ``triggered``);
* ``failure`` is a ``negation`` followed within three words by a ``capability`` verb ("não
  sabe", "nem isso vc consegue", "nunca me entende"), with only ``between`` words between;
* a word of ``target`` stops pointing at mel in "o app do banco" (``theirs``) and in "meu
  marido é um robô"; a word of ``negative`` right after "sou"/"fui"/"eu" (``self``) is
  self-criticism ("sou meio ruim de digitar");
* emoji classes, shouting ("!!!", "???", "?!") and capitals come from the raw text, and a
  message of at most three words is ``short``;
* praise with irony, an eye-roll, a failure, an error or a negative word — or applauded
  without thanks — is ``sarcasm``; thanks with an eye-roll are no ``cheer``;
* "não foi X, foi Y" is a ``correction`` of mel's answer, and one of mel's ``deed``s opening
  a clause or right after a word for mel, outside a question, is ``blame`` (``_blame``: "vc
  mudou pra 800 sozinha 😑", "tá de sacanagem, somou 3 vezes a mesma compra"): both point at mel;
  blamed for doing it again ("tu jogou no cartão, toda vez isso") it is ``recurring``.

The score is the sum of the weights of the hints present (each counted once, those of
``twice`` up to twice). When the message is also about something else (``elsewhere``: an
amount, a shop, a bank, another person — ``_frustration.ELSEWHERE``), that weighs against
it, and the ``mood`` hints (anger, swearing, a judgement word) count only next to a word
pointing at mel: "que raiva, o ifood errou meu pedido" is not about mel, "vc é incapaz de
registrar um gasto simples" is — and anywhere in a complaint that blames mel for a deed
("vc jogou tudo na minha conta. obrigado pela parceria 😒"). Except when the other thing
is what mel is compared with ("nem meu tamagotchi era tão inútil"), or a value met with
irony and no money of the couple's moving ("aham, claro, 80 mil em padaria esse mês. tá
certíssima 🙄": mel's answer), or a value quoted back with a question at the start ("R$ 12
mil de mercado? 🙄").
The guard asks the score only after its phrase rules said no (see ``_frustration``).

A request for a person is scored the same way ([score.human]), the asking words counting
only within ``near`` words of who or what is asked for (``anchor``/``anchored``).

Speed: a score is read only when ``Score.bound`` — an upper bound from the words' cached
bit masks, one set operation for a message of quiet words — can reach the threshold.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from guard._blame import blamed
from guard._data import LexiconError, strings, table
from guard._lexicon import _terms_of
from guard._masks import BIT as _BIT
from guard._masks import CACHE as _CACHE
from guard._masks import CACHE_LIMIT as _CACHE_LIMIT
from guard._masks import NAMES as _NAMES
from guard._masks import PHRASE_BIT as _PHRASE_BIT
from guard._masks import PHRASE_BITS_OF as _PHRASE_BITS_OF
from guard._masks import PHRASES as _PHRASES
from guard._masks import bits as _bits
from guard._masks import mask_of, register, signal_names
from guard._text import emoji_set, has_emoji, laughs

__all__ = [
    "FRUSTRATION",
    "HUMAN",
    "TRIGGER_EMOJI",
    "Reading",
    "Score",
    "glad",
    "loud",
    "mask_of",
    "plain_score",
    "read",
    "score",
    "signal_names",
]

_TARGET: Final = _BIT.get("target", 0)
_PARTNER: Final = _BIT.get("partner", 0)
_NEGATION: Final = _BIT.get("negation", 0)
_CAPABILITY: Final = _BIT.get("capability", 0)
_NEGATIVE: Final = _BIT.get("negative", 0)
_SELF: Final = _BIT.get("self", 0)
_PERSON: Final = _BIT.get("person", 0) | _BIT.get("staff", 0)
_OWNER: Final = frozenset(("meu", "minha", "meus", "minhas", "nosso", "nossa"))


# what ``Score.possible`` does not look for: found by context, or cheaper to assume there
_ALWAYS_POSSIBLE: Final = ("theirs", "their_person", "laughter", "capitals")


def _emoji_classes() -> dict[str, frozenset[str]]:
    return {name: emoji_set(f"score.emoji.{name}") for name in table("score.emoji")}


_EMOJI: Final = _emoji_classes()
_ALL_EMOJI: Final = frozenset[str]().union(*_EMOJI.values())
#: Emoji that can raise a score (all but the happy ones).
TRIGGER_EMOJI: Final = frozenset[str]().union(*(v for k, v in _EMOJI.items() if k != "happy"))

_SCORE: Final = table("score")
_THEIRABLE: Final = frozenset(_terms_of("score.theirable", strings("score.theirable")))
_PREDICATE: Final = frozenset(_terms_of("score.predicate", strings("score.predicate")))
_STILL_MEL: Final = frozenset(_terms_of("score.still_mel", strings("score.still_mel")))
# words allowed between a negation and its verb ("não me entende", "nem isso vc sabe")
_BETWEEN: Final = frozenset(_terms_of("score.between", strings("score.between")))
_OF: Final = frozenset(("do", "da", "dos", "das", "de"))
# a message that starts with an amount and asks about it: a value quoted back
_ECHO: Final = re.compile(
    r"\s*(?:r\$|rs)?\s*-?\s*(?:r\$)?\s*\d[\d.,]*(?:\s*mil)?(?:\s+[^\s?]+){0,3}\s*\?", re.I
)
# mel's answer corrected ("NÃO foi mercado, foi FARMÁCIA"): the category is mel's, not
# something else the message is about (normalised words)
_CORRECTION: Final = re.compile(
    r"\bnao (?:foi|e|era|eram|foram) (?!contigo|com |voce|tu )"
    r"(?:\w+ ){1,3}?(?:foi|e|era|eram|foram|sim) \w+"
)
_A: Final = frozenset(("um", "uma"))
_IS: Final = frozenset(("e", "era", "parece", "virou", "sou", "ta", "fica", "ficou", "seja", "foi"))
# what the scorer computes itself, besides the [signals] and the emoji classes
_COMPUTED: Final = frozenset(
    (
        "failure",
        "sarcasm",
        "shouting",
        "capitals",
        "laughter",
        "short",
        "theirs",
        "their_person",
        "echo",
        "correction",
        "blame",
        "recurring",
        "elsewhere",
        "elsewhere_target",
    )
)


def _number(path: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise LexiconError(f"lexicon.toml: '{path}' must be a number")
    return float(value)


def _union(words: list[str]) -> tuple[int, int, tuple[str, ...]]:
    """The signals of all the words, those of the phrases filed under them, and the words
    that file phrases. The last list asked about is remembered: both scores ask about one
    message's words in turn (the guard never changes a list of words once made)."""
    last = _LAST[0]
    if last[0] is words:
        return last[1]
    get = _CACHE.get
    union = phrases = 0
    filing: list[str] = []
    for word in words:
        found = get(word)
        if found is None:
            found = mask_of(word)  # (sorts the new word into each score's quiet ones)
        union |= found
        if found & _PHRASE_BIT:
            phrases |= _PHRASE_BITS_OF[word]
            filing.append(word)
    result = (union, phrases, tuple(filing))
    _LAST[0] = (words, result)
    return result


_LAST: list[tuple[object, tuple[int, int, tuple[str, ...]]]] = [(None, (0, 0, ()))]


def loud(raw: str) -> bool:
    """An emoji that can raise a score, or shouting: what a score counts in a message whose
    words are all quiet (``Score.bound``)."""
    return raw.count("!") >= 3 or raw.count("?") >= 3 or has_emoji(raw, TRIGGER_EMOJI)


class Score:
    """A hand-set linear score over the signals: lexicon.toml [score.NAME].

    Its ``triggers`` are the signals without which the score cannot reach the threshold
    (and ``pair``, two signals that count only together: a negation and a capability verb).
    Words are sorted once into quiet ones (no trigger, no trigger phrase filed under them)
    and loud ones, so that ``can_score`` costs one set operation for most messages."""

    __slots__ = (
        "_bounds",
        "_glad_bits",
        "_glad_emoji",
        "_glad_phrase_keys",
        "_loud",
        "_pair",
        "_phrase_keys",
        "_possible",
        "_quiet",
        "_short",
        "aimed",
        "anchor",
        "anchored",
        "compared",
        "glad",
        "ironic",
        "mood",
        "mood_bits",
        "near",
        "needs",
        "quiet_words",
        "sour",
        "threshold",
        "trigger",
        "twice",
        "weights",
        "with_failure",
        "with_request",
    )

    def __init__(self, name: str) -> None:
        path = f"score.{name}"
        node = table(path)
        known = set(_NAMES) | set(_EMOJI) | _COMPUTED
        self.weights: Final = {
            key: _number(f"{path}.weights.{key}", value)
            for key, value in table(f"{path}.weights").items()
        }
        lists = {}
        for field in (
            "compared",
            "ironic",
            "twice",
            "mood",
            "aimed",
            "with_failure",
            "triggers",
            "pair",
            "anchor",
            "anchored",
            "needs",
            "glad",
            "sour",
        ):
            value = node.get(field, [])
            lists[field] = frozenset(strings(f"{path}.{field}", value))
        for key in set(self.weights).union(*lists.values()):
            if key not in known:
                raise LexiconError(f"lexicon.toml: '{path}' names an unknown signal {key!r}")
        self.threshold: Final = _number(f"{path}.threshold", node.get("threshold"))
        #: with a request for a person in the message, frustration needs this much more
        self.with_request: Final = _number(f"{path}.with_request", node.get("with_request", 0))
        near = node.get("near", 0)
        if not isinstance(near, int) or isinstance(near, bool):
            raise LexiconError(f"lexicon.toml: '{path}.near' must be a whole number")
        self.near: Final = near
        self.twice: Final = lists["twice"]
        self.mood: Final = lists["mood"]
        self.aimed: Final = lists["aimed"]
        self.with_failure: Final = lists["with_failure"]
        self.compared: Final = lists["compared"]
        self.ironic: Final = lists["ironic"]
        self.glad: Final = lists["glad"]
        self.sour: Final = lists["sour"]
        # the word signals of ``glad``, the words its phrases are filed under, and its emoji
        self._glad_bits: Final = _bits([n for n in self.glad if n in _BIT], path)
        self._glad_phrase_keys: Final = frozenset(
            key for key, found in _PHRASES.items() if any(bit & self._glad_bits for _, bit in found)
        )
        self._glad_emoji: Final = frozenset().union(*(_EMOJI[n] for n in self.glad if n in _EMOJI))
        self.anchor: Final = tuple(sorted(lists["anchor"]))
        #: at least one of these must be there (after anchoring) for any score
        self.needs: Final = lists["needs"]
        self.anchored: Final = tuple(sorted(lists["anchored"]))
        self.mood_bits: Final = _bits([n for n in self.mood if n in _BIT], path)
        self.trigger: Final = _bits(sorted(lists["triggers"]), f"{path}.triggers")
        pair = strings(f"{path}.pair", node.get("pair", []))
        if pair and len(pair) != 2:
            raise LexiconError(f"lexicon.toml: '{path}.pair' must name two signals")
        # the pair's first signal is loud, its second found by its words
        self._pair: Final = _bits(pair, path)
        self._loud: Final = self.trigger | (_BIT[pair[0]] if pair else 0)
        self._phrase_keys: Final = frozenset(
            key for key, found in _PHRASES.items() if any(bit & self.trigger for _, bit in found)
        )
        #: words known to be quiet (see ``bound``)
        self.quiet_words: Final[set[str]] = set()
        self._quiet = self.quiet_words
        self._bounds: dict[tuple[int, int], float] = {}
        self._possible: dict[tuple[int, tuple[str, ...], bool, bool], frozenset[str]] = {}
        register(self)
        self._short: Final = max(self.weights.get("short", 0.0), 0.0)

    def sort(self, word: str, mask: int) -> None:
        """File a word seen for the first time as quiet when it has no trigger signal, is
        not the pair's first signal, and files no trigger phrase."""
        if not mask & self._loud and word not in self._phrase_keys:
            self._quiet.add(word)

    def may_be_glad(self, words: list[str], raw: str) -> bool:
        """Whether ``glad`` can hold for the message: a cheap test before reading it."""
        return (
            bool(_union(words)[0] & self._glad_bits)
            or not self._glad_phrase_keys.isdisjoint(words)
            or has_emoji(raw, self._glad_emoji)
        )

    def quiet(self, words: list[str]) -> bool:
        """Whether every word is known to be quiet (one set operation)."""
        return self.quiet_words.issuperset(words)

    def bound(self, words: list[str], raw: str) -> float:
        """An upper bound of the score, from the words' signals alone (their positions and
        neighbours ignored, every phrase filed under a word assumed present), or -1 when
        no word or phrase of a trigger signal is there (nor both signals of the pair) and
        the raw text has no emoji or shouting that counts: a message below the threshold
        here needs no reading.

        Words are sorted once into quiet ones (no trigger, no trigger phrase filed under
        them) and loud ones, so that most messages cost one set operation."""
        quiet = self._quiet
        if quiet.issuperset(words) and not (raw and loud(raw)):
            return -1.0
        union, phrases, filing = _union(words)
        if not (
            union & self.trigger
            or (self._pair and union & self._pair == self._pair)
            or (filing and self._phrase_triggers(filing, words))
            or (raw and loud(raw))
        ):
            return -1.0
        total = self._bounds.get((union, phrases))
        if total is None:
            if len(self._bounds) > _CACHE_LIMIT:
                self._bounds.clear()
            total = self._bounds[union, phrases] = self._word_bound(union, phrases)
        if raw:
            total += self._raw_bound(raw)
        if len(words) <= 3:
            total += self._short
        return total

    def possible(self, words: list[str], raw: str) -> frozenset[str]:
        """Every signal ``score`` may find in a message of these words (or of some of them)
        and this raw text, and more: a cheap superset, for bounds of other weightings of the
        same signals (the fallback model's). Cached by what it depends on."""
        union, phrases, _ = _union(words)
        emoji = (
            tuple(name for name, found in _EMOJI.items() if not found.isdisjoint(raw))
            if has_emoji(raw, _ALL_EMOJI)
            else ()
        )
        key = (union | phrases, emoji, "!" in raw or "?" in raw, len(raw.split()) <= 3)
        found = self._possible.get(key)
        if found is None:
            if len(self._possible) > _CACHE_LIMIT:
                self._possible.clear()
            found = self._possible[key] = self._possible_of(*key)
        return found

    def _possible_of(
        self, bits: int, emoji: tuple[str, ...], marks: bool, short: bool
    ) -> frozenset[str]:
        """``possible`` of a message whose words (and phrases) have the signals ``bits``,
        with these emoji classes, "!" or "?" (``marks``) and at most three words."""
        names = {*_names_of(bits), *emoji, *_ALWAYS_POSSIBLE}
        if "negation" in names:
            names.update(("failure", "correction"))
        if "praise" in names:
            names.add("sarcasm")
        if "deed" in names:
            names.update(("blame", "recurring"))
        if marks:
            names.update(("shouting", "echo"))
        if short:
            names.add("short")
        weights, twice = self.weights, self.twice
        most = sum(
            weights[name] * (2 if name in twice else 1)
            for name in names
            if weights.get(name, 0.0) > 0
        )
        if most >= self.threshold:  # ("elsewhere" is only looked for above the threshold)
            names.update(("elsewhere", "elsewhere_target"))
        return frozenset(names)

    def _phrase_triggers(self, filing: tuple[str, ...], words: list[str]) -> bool:
        """Whether a phrase of a trigger signal filed under one of the words is there."""
        keys = self._phrase_keys.intersection(filing)
        if not keys:
            return False
        padded = f" {' '.join(words)} "
        trigger = self.trigger
        for key in keys:
            for phrase, bit in _PHRASES[key]:
                if bit & trigger and phrase in padded:
                    return True
        return False

    def _raw_bound(self, raw: str) -> float:
        """The most the raw text can add: emoji, shouting, capitals, a value quoted back."""
        weights = self.weights
        total = 0.0
        if has_emoji(raw, _ALL_EMOJI):
            for name, emoji in _EMOJI.items():
                if not emoji.isdisjoint(raw):
                    total += max(weights.get(name, 0.0), 0.0)
            if not _EMOJI["roll"].isdisjoint(raw):  # an eye-roll takes the thanks off
                total += max(-weights.get("cheer", 0.0), 0.0)
        if "!" in raw or "?" in raw:
            total += max(weights.get("shouting", 0.0), 0.0) + max(weights.get("echo", 0.0), 0.0)
        if raw != raw.lower():
            total += max(weights.get("capitals", 0.0), 0.0)
        return total

    def _word_bound(self, union: int, phrases: int) -> float:
        """The most the signals in ``union`` can add: every phrase filed under its words
        assumed present, and the computed signals they may make; the words' own signals
        of negative weight count (they are there whatever their neighbours)."""
        words = union & ~_PHRASE_BIT
        bits = words | phrases
        weights = self.weights
        total = 0.0
        names = set(_names_of(bits))
        if (bits & self._pair) == self._pair and self._pair:
            names.add("failure")
        if "praise" in names:
            names.add("sarcasm")
        if "negation" in names:
            names.add("correction")
        if "deed" in names:
            names.update(("blame", "recurring"))
        for name in names:
            weight = weights.get(name, 0.0)
            if weight > 0:
                total += weight * 2 if name in self.twice else weight
            elif weight < 0 and name != "partner" and _BIT.get(name, 0) & words:
                # (not the partner: "pelo amor de deus" takes it off)
                total += weight
        return total


class Reading:
    """The signals of one message: how many words of each, and where the words pointing at
    mel and the mood words are."""

    __slots__ = ("at", "counts", "mood_at", "target_at")

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.target_at: list[int] = []
        self.mood_at: list[int] = []
        #: signal → the positions of its words
        self.at: dict[str, list[int]] = {}


def _failure_after(index: int, words: list[str], masks: list[int]) -> int:
    """The position of the capability verb a negation at ``index`` denies, or -1."""
    for later in range(index + 1, min(index + 4, len(words))):
        if masks[later] & _CAPABILITY:
            return later
        if words[later] not in _BETWEEN:
            break
    return -1


def _theirs(words: list[str], index: int, last: int) -> bool:
    """Whether the app/bot at ``index`` is someone else's: "o app do banco", or named so a
    few words on ("que app horrível, o do detran")."""
    if index < last - 1 and words[index + 1] in _OF:
        return words[index + 2] not in _STILL_MEL
    for at in range(index + 2, min(index + 4, last - 1)):
        if words[at] in _THE and words[at + 1] in _OF and words[at + 2] not in _STILL_MEL:
            return True
    return False


_THE: Final = frozenset(("o", "a", "os", "as"))


def read(words: list[str], raw: str, mood: int, positions: bool = False) -> Reading:
    """The signals of a normalised message (``words``) and of its raw text; ``mood`` is the
    bit mask of the signals whose positions are wanted (``positions``: of every signal)."""
    reading = Reading()
    counts = reading.counts
    get = _CACHE.get
    masks = [get(w, -1) for w in words]
    if -1 in masks:
        masks = [mask_of(w) for w in words]
    padded = ""
    last = len(words) - 1
    for index in [i for i, m in enumerate(masks) if m]:
        mask = masks[index]
        word = words[index]
        if mask & _PHRASE_BIT:
            if not padded:
                padded = f" {' '.join(words)} "
            for phrase, bit in _PHRASES[word]:
                if phrase in padded:
                    mask |= bit
        if mask & _TARGET and word in _THEIRABLE:
            if _theirs(words, index, last):
                mask &= ~_TARGET  # "o app do banco", "que app horrível o do detran"
                counts["theirs"] = 1
            elif (
                index > 1
                and word in _PREDICATE
                and words[index - 1] in _A
                and words[index - 2] in _IS
            ):
                mask &= ~_TARGET  # "meu marido é um robô" (not "pagando pra um robô que não sabe")
        if mask & _PARTNER and index and words[index - 1] == "pelo":
            mask &= ~_PARTNER  # "pelo amor de deus" is no partner
        if mask & _PERSON and (
            (index < last - 1 and words[index + 1] in _OF and words[index + 2] not in _STILL_MEL)
            or (index and words[index - 1] in _OWNER)
        ):
            mask &= ~_PERSON  # "o gerente do banco", "a atendente da renner", "meu gerente"
            counts["their_person"] = 1
        if mask & _NEGATIVE and (
            (index and masks[index - 1] & _SELF)
            or (index > 1 and masks[index - 2] & _SELF)
            or (index < last and words[index + 1] == "eu")
        ):
            mask &= ~_NEGATIVE  # "sou meio ruim de digitar", "burra eu"
        if mask & _NEGATION:
            verb = _failure_after(index, words, masks)
            if verb >= 0:
                counts["failure"] = counts.get("failure", 0) + 1
                reading.mood_at.append(verb)
        if mask & _TARGET:
            reading.target_at.append(index)
        if mask & mood:
            reading.mood_at.append(index)
        names = _NAMES_OF.get(mask & ~_PHRASE_BIT)
        if names is None:
            names = _NAMES_OF[mask & ~_PHRASE_BIT] = _names_of(mask)
        for name in names:
            counts[name] = counts.get(name, 0) + 1
        if positions:
            at = reading.at
            for name in names:
                if name in at:
                    at[name].append(index)
                else:
                    at[name] = [index]
    if len(words) <= 3 and (not raw or len(raw.split()) <= 3):
        counts["short"] = 1  # (the message as written: not one the rules shortened)
    if not raw:
        return reading
    if has_emoji(raw, _ALL_EMOJI):
        for name, emoji in _EMOJI.items():
            if not emoji.isdisjoint(raw):
                counts[name] = 1
    if raw.count("!") >= 3 or raw.count("?") >= 3 or "?!" in raw or "!?" in raw:
        counts["shouting"] = 1
    if laughs(raw):
        counts["laughter"] = 1  # ("kkkk", "rsrs": normalisation drops them)
    if raw != raw.lower():
        letters = sum(map(str.isalpha, raw))
        if letters > 5 and sum(map(str.isupper, raw)) * 2 > letters:
            counts["capitals"] = 1
    return reading


def _names_of(mask: int) -> tuple[str, ...]:
    return tuple(name for name in _NAMES if mask & _BIT[name])


_NAMES_OF: dict[int, tuple[str, ...]] = {}


def _near(reading: Reading, distance: int) -> bool:
    """Whether a mood word is within ``distance`` words of a word pointing at mel."""
    return any(abs(t - m) <= distance for t in reading.target_at for m in reading.mood_at)


def _total(scorer: Score, counts: dict[str, int], mood_counts: bool) -> float:
    failed = "failure" in counts or "error" in counts
    weights, twice, mood = scorer.weights, scorer.twice, scorer.mood
    total = 0.0
    for name, count in counts.items():
        weight = weights.get(name)
        if not weight or (not mood_counts and name in mood):
            continue
        if not failed and name in scorer.with_failure:
            continue
        total += weight * 2 if count > 1 and name in twice else weight
    return total


def score(
    scorer: Score, words: list[str], raw: str, elsewhere: Callable[[], bool]
) -> tuple[float, dict[str, int]]:
    """The message's score and the signals it was made of. ``elsewhere`` says whether the
    message is about something other than mel; it is asked only when it can change the
    verdict (it only takes weight off)."""
    reading = read(words, raw, scorer.mood_bits)
    counts = reading.counts
    if "roll" in counts:
        counts.pop("cheer", None)  # thanks with an eye-roll: "obrigado pela parceria 😒"
    if "deed" in counts and blamed(words, raw):
        counts["blame"] = 1
        if "repetition" in counts and "cheer" not in counts:
            # the same mistake again ("tu jogou no cartão, toda vez isso"; not "vc registrou
            # certinho de novo, valeu")
            counts["recurring"] = 1
    if counts.get("praise") and (
        counts.get("irony")
        or counts.get("roll")
        or counts.get("failure")
        or counts.get("negative")
        or counts.get("error")
        or (counts.get("clap") and not counts.get("cheer"))
        # praise for a deed blamed on mel after what the couple said, or again ("eu falei
        # lazer, vc botou em saúde. to impressionado"; not "vc registrou rapidinho, ótimo")
        or (
            counts.get("blame")
            and not counts.get("cheer")
            and (counts.get("repetition") or (counts.get("self") and counts.get("story")))
        )
    ):
        counts["sarcasm"] = 1
    if "negation" in counts and _CORRECTION.search(" ".join(words)) is not None:
        counts["correction"] = 1
    if _ECHO.match(raw) is not None:
        # it starts by quoting a value back with a question ("R$ 12 mil de mercado? 🙄"):
        # the amount is mel's answer, not something else the message is about
        counts["echo"] = 1
        return _total(scorer, counts, True), counts
    if not scorer.compared.isdisjoint(counts) or (
        "sarcasm" in counts
        and ("own" not in counts or counts.get("irony", 0) > 1)
        and not scorer.ironic.isdisjoint(counts)
    ):
        # what mel is compared with ("nem meu tamagotchi era tão inútil"), or mel's answer
        # met with irony ("aham, claro, 80 mil em padaria esse mês. tá certíssima 🙄"; "claro,
        # porque eu gastei 9 mil de uber né": two winks are irony even about money)
        return _total(scorer, counts, True), counts
    total = _total(scorer, counts, True)
    if total < scorer.threshold or not elsewhere():
        return total, counts
    aimed = bool(reading.target_at) or not scorer.aimed.isdisjoint(counts)
    counts["elsewhere_target" if aimed else "elsewhere"] = 1
    # the moods count next to a word for mel, or anywhere in a complaint about what mel did
    mood_counts = "blame" in counts or (bool(reading.target_at) and _near(reading, scorer.near))
    return _total(scorer, counts, mood_counts), counts


def glad(scorer: Score, counts: dict[str, int]) -> bool:
    """Whether signals (``score``'s second value) are praise or thanks with nothing sour
    ([score.NAME] ``glad`` and ``sour``): "meu deus, que app bom", "sério, vc é muito boa"."""
    return not scorer.glad.isdisjoint(counts) and scorer.sour.isdisjoint(counts)


def plain_score(scorer: Score, words: list[str]) -> float:
    """A score over the words alone (no emoji, no punctuation, no ``elsewhere``); the
    ``anchored`` signals count only within ``near`` words of an ``anchor`` one ("quero
    falar com um atendente", not "humano é bicho complicado ... que nem precisava")."""
    if scorer.bound(words, "") < scorer.threshold:
        return -1.0
    reading = read(words, "", 0, bool(scorer.anchored))
    counts = reading.counts
    if scorer.anchored:
        at = reading.at
        anchors = [i for name in scorer.anchor for i in at.get(name, ())]
        near = scorer.near
        for name in scorer.anchored:
            if name in counts and not any(abs(i - j) <= near for i in at[name] for j in anchors):
                del counts[name]
    if scorer.needs and scorer.needs.isdisjoint(counts):
        return -1.0  # nothing asked ("a equipe de vocês fez um ótimo trabalho")
    return _total(scorer, counts, True)


#: The frustration score (lexicon.toml [score.frustration]).
FRUSTRATION: Final = Score("frustration")
#: The request-for-a-person score (lexicon.toml [score.human]).
HUMAN: Final = Score("human")
