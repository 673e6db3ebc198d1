"""Human request: the couple asks for a person instead of mel.

The request forms live in ``guard/lexicon.toml`` ([human], [fragments.human]): talking to
a human, attendant or the support team ("quero falar com uma pessoa, não com bot"), being
handed over ("me passa pra um humano"), whether a person is there ("tem gente aí?", "algum
atendente disponível?"), someone to look at it ("preciso que alguém olhe minha conta"),
refusing the bot, asking whether mel is a person or a robot ("tem gente mesmo aí ou é só
robô?"), contact details of mel's people ("qual o 0800 de vcs?", "tem algum número que eu
possa ligar?", "fone de vcs?"), a call back ("alguém pode me ligar?", "me liga pfv",
"gostaria que entrassem em contato"), whether the team is there or when it works ("o
pessoal do suporte tá online?", "tem atendimento no sábado?"), who made mel or who to turn
to ("quem é o dev dessa parada?", "com quem eu falo pra resolver isso?"), whether the
replies are automatic, a meeting with a person, a few English forms ("can I talk to a
human?"), and a message that is only a request word ("ATENDENTE", "humano pfv").

Talk about other people is not a request: the noun must be a human/support noun (not
"minha esposa"), it must not belong to a third party ("o gerente do banco", "o 0800 da
claro", "alguém do banco"), and the talking must not be someone else's or a plan ("vou
falar com", "falei com", "meu marido falar com"), nor a story ("fui atendido por uma
pessoa no banco") nor a company's SMS pasted in ("Em caso de dúvida ligue para o SAC
0800"). "humano erra" is a statement, "sou humano" the user speaking of themselves.

When no pattern matches, the request is also read compositionally (``_signals``,
lexicon.toml [score.human]): who is asked for (staff: atendente, suporte, humano; a person:
alguém, moça, responsável), how (a request, a handover, a way of contact) within a few
words of it, by what line (telefone, 0800, whatsapp), and whose (mel's side: "de vcs", "do
suporte"; someone else's: "do banco", "meu gerente", "da claro"), with stories ("liguei",
"fui atendido") counting against: "seria possível que alguma moça do atendimento me
telefonasse?" is a request no pattern spelled out.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Final

from guard._lexicon import Pattern, Rules, Terms, patterns
from guard._signals import HUMAN, plain_score

__all__ = ["talks_of_others", "wants_human"]

KEYS: Final = Terms.at("human.keys").keys
RULES: Final[tuple[Pattern, ...]] = patterns("human.patterns")
_RULES: Final = Rules(Terms(()), RULES)
# Talk that is a plan, not a request: removed before RULES run.
NOT_REQUESTS: Final[tuple[Pattern, ...]] = patterns("human.neutralise.patterns")
NOT_REQUEST_KEYS: Final = frozenset[str]().union(*(p.keys for p in NOT_REQUESTS))
_NOT_REQUESTS: Final = Rules(Terms(()), NOT_REQUESTS)


def _alternation(terms: Terms) -> str:
    items = sorted(terms.words | {p.strip() for ps in terms.phrases.values() for p in ps})
    return "(?:" + "|".join(re.escape(item) for item in sorted(items, key=len, reverse=True)) + ")"


_FILLER: Final = _alternation(Terms.at("human.bare.filler"))
_REQUEST: Final = _alternation(Terms.at("human.bare.request"))
# The whole message is a request word, maybe with a greeting or "please".
BARE: Final = re.compile(rf"(?:{_FILLER} )*{_REQUEST}(?: {_FILLER})*")
BARE_KEYS: Final = Terms.at("human.bare.request").keys


def wants_human(text: str, tokens: Collection[str]) -> bool:
    """Whether the normalised ``text`` (whose words are ``tokens``) asks for a human."""
    if KEYS.isdisjoint(tokens):
        words = tokens if isinstance(tokens, list) else text.split()
        return not HUMAN.quiet(words) and plain_score(HUMAN, words) >= HUMAN.threshold
    if not NOT_REQUEST_KEYS.isdisjoint(tokens):
        cleaned = _NOT_REQUESTS.sub("  ", text, tokens)  # (keys and requires, as everywhere)
        if cleaned != text:
            text, tokens = cleaned, cleaned.split()
    if _RULES.search(text, tokens, ""):
        return True
    if not BARE_KEYS.isdisjoint(tokens) and BARE.fullmatch(text) is not None:
        return True
    # no pattern: who is asked for, how, by what line and whose (see ``_signals``)
    words = tokens if isinstance(tokens, list) else text.split()
    return plain_score(HUMAN, words) >= HUMAN.threshold


def talks_of_others(text: str, tokens: Collection[str]) -> bool:
    """Whether the normalised ``text`` holds talk that is no request ([human.neutralise]:
    someone else's plan or advice, curiosity, a story)."""
    return not NOT_REQUEST_KEYS.isdisjoint(tokens) and _NOT_REQUESTS.search(text, tokens, "")
