"""Human request: the couple asks to talk to a person instead of mel.

Matches request forms aimed at a human, attendant, support team or "someone real", on the
canonical text of ``_text.normalize``:

* talk to — ``falar/conversar/contato com [um|uma|o|a|algum|alguém] humano/pessoa/
  atendente/suporte/...`` ("quero falar com uma pessoa, não com bot"), "ser atendida por
  uma pessoa";
* hand over — ``me passa/transfere/encaminha/chama/coloca/manda [pra] um humano``;
* availability — ``tem (algum) atendente?``, "tem gente aí?", "tem alguém que possa me
  atender?", ``cadê o suporte``, "alguém aí?";
* wanting — ``quero/preciso de/queria um atendente``, "atendimento humano", "pessoa de
  verdade", "de carne e osso", a bare "humano" / "atendente" / "operador";
* refusing the bot — "não quero falar com robô", "não quero bot";
* contact — "qual o contato do suporte?", "me passa o whats de algum atendente".

Talk about other people is not a request: the noun must be one of the human nouns above
(not "minha esposa", "meu marido"), a possessive "meu/minha" never precedes it, it must
not belong to a third party ("o gerente do banco", "o atendente da loja", "alguém do
banco"), and the talking must not be someone else's or the couple's own plan or past
("vou falar com", "falei com", "meu marido falar com"). Asking what mel is ("você é
humano?", "é humano ou robô?") is a question, and "humano erra" a statement, not a
request.

Each rule carries the words it cannot match without; a rule's regex only runs when the
message has one of them, so ordinary finance messages cost a set intersection.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Final

from bench.guard_v1._rules import phrase, words

__all__ = ["wants_human"]

# "do/da X" after the noun marks a third party unless X is mel's own side.
_TP: Final = (
    r"(?! (?:d[aoe]s?|n[oa]s?) (?!(?:verdade|carne|mel|app|suporte|atendimento|equipe"
    r"|empresa|voces|voce|whatsapp|chat|plataforma|servico)\b)\w)"
)
_ART: Final = r"(?:(?:um|uma|o|a|os|as|algum|alguma|seu|sua|qualquer) )?"
_NOUN: Final = (
    r"(?:ser humano|humanos?|humana|pessoas?(?: (?:real|reais|de verdade))?|atendentes?"
    r"|atendimento(?: humano)?|alguem|suporte|operador|funcionari[oa]|responsavel|gerente"
    r"|supervisor|supervisora|moderador|sac|equipe|especialista|don[oa]s?|criador(?:es)?"
    r"|consultor(?:a|es)?|desenvolvedor(?:es)?"
    r"|quem (?:manda|cuida|responde) (?:aqui|isso|disso|daqui|por isso))"
    # mel's own side: "alguém da equipe", "o atendente do app"
    r"(?: (?:d[aoe]s?|dessa|desse) (?:equipe|suporte|empresa|mel|app|atendimento|voces))?"
)
_HUMAN: Final = (
    rf"(?:{_ART}{_NOUN}|gente|(?:seu|sua|teu|tua|o|a) (?:chefe|patrao|patroa|criador|criadora))"
    rf"\b{_TP}"
)
# Nouns (and the bot words of a refusal) without which no rule can match.
_KEYS: Final = words(
    """
    humano humana humanos pessoa pessoas atendente atendentes atendimento alguem ninguem
    gente suporte operador funcionario funcionaria responsavel gerente supervisor supervisora
    moderador sac equipe especialista dono dona donos donas criador criadora criadores
    consultor consultora consultores desenvolvedor desenvolvedores quem chefe patrao patroa
    chamado ticket carne bot robo maquina ia chatbot inteligencia transfere transfira
    encaminha encaminhe
    """
)
_HANDOVER: Final = (
    "passa passe passar transfere transfira transferir encaminha encaminhe encaminhar "
    "redireciona redirecione coloca coloque colocar bota joga conecta conecte conectar manda "
    "mande chama chame chamar aciona acione acionar direciona leva leve liga ligue"
)
_WANT: Final = "quero queria preciso precisava gostaria prefiro exijo solicito pede desejo"


_RULES: Final = (
    # talk to a human ("quero falar com uma pessoa"), not someone else's talk or a plan
    phrase(
        "falar conversar falo converso fala papo contato falando conversando atendido "
        "atendida atender atendimento",
        r"(?<!\bvou )(?<!\bvamos )(?<!\bvai )(?<!\bfui )(?<!\bvao )(?<!\bele )(?<!\bela )"
        r"(?<!\bmarido )(?<!\besposa )(?<!\bmulher )(?<!\bnamorado )(?<!\bnamorada )"
        r"\b(?:falar|conversar|falo|converso|fala|papo|contato|falando|conversando"
        r"|atendid[oa]|atender|atendimento)"
        rf"(?: (?:direto|diretamente|so|somente|agora))? (?:com|por|pelo|pela) {_HUMAN}",
    ),
    # hand over to / want a human ("me passa pra um humano", "preciso de um atendente")
    phrase(
        f"{_HANDOVER} {_WANT}",
        rf"\b(?:{_HANDOVER.replace(' ', '|')}|{_WANT.replace(' ', '|')})"
        r"(?: (?:me|eu|de|ser atendid[oa] por|um pouco de))?"
        r"(?: (?:pra|para|pro|pros|com|ao|em contato com|no|na|falar com))?"
        rf" {_ART}(?:ser humano|humanos?|humana|atendentes?|atendimento(?: humano)?|operador"
        rf"|pessoa real|pessoa de verdade|suporte|pessoas?|sac|equipe|responsavel|gerente)"
        rf"\b{_TP}",
    ),
    phrase(
        _HANDOVER,
        rf"\b(?:{_HANDOVER.replace(' ', '|')})(?: me)?(?: (?:pra|para|pro|com|em contato com))?"
        r" (?:alguem|gente)\b",
    ),
    phrase(
        "quero queria prefiro preciso falo",
        r"\b(?:quero|queria|prefiro|preciso de|so falo com) (?:uma |com )?gente\b(?! que)",
    ),
    # is there a human? ("tem algum atendente?", "tem alguém que possa me atender?")
    phrase(
        "tem existe ha teria ninguem nenhum nenhuma",
        rf"\b(?:tem|existe|ha|teria|ninguem|nenhum|nenhuma) {_ART}{_NOUN}\b{_TP}"
        r"(?= ai\b| aqui\b| ou\b| de verdade\b| real\b| humano\b| disponivel\b| online\b"
        r"| vivo\b| acordad[oa]\b| trabalhando\b| atendendo\b| hoje\b| ao vivo\b| agora\b"
        r"| pfv\b| por favor\b| nessa\b| nesse\b| la\b| por ai\b"
        r"| que (?:possa|pode|me|atenda|responda|fale|consiga)\b"
        r"| (?:pra|para) (?:falar|conversar|me atender|atender|me ajudar|me responder)\b|$)"
        r"|\btem gente\b(?= ai\b| aqui\b| ou\b| de verdade\b|$)",
    ),
    phrase("cade onde", rf"\b(?:cade|onde (?:ta|esta|estao|fica)) {_ART}{_NOUN}\b{_TP}"),
    # "algum atendente disponível?" — asking whether a person is there, without "tem"
    phrase(
        "disponivel online livre",
        r"^(?:oi |ola )?(?:algum|alguma|um|uma) (?:atendente|humano|pessoa|operador)"
        r" (?:disponivel|online|livre)\b",
    ),
    phrase(
        "alguem ninguem",
        r"\b(?:alguem|ninguem) (?:ai|aqui|ouvindo|online|vivo|disponivel|de verdade|real"
        r"|humano|de carne e osso|me (?:atende|responde|ouve)"
        r"|pra (?:falar|conversar|me atender|me ajudar|me responder)"
        r"|(?:pode|poderia|consegue) me (?:atender|responder)|me (?:ligar|liga|ligue|retornar))"
        r"\b",
    ),
    phrase("chamado ticket", r"\babr(?:e|ir|a) (?:um |uma )?(?:chamado|ticket)\b"),
    # unmistakable phrases ("atendimento humano", "pessoa de verdade", "carne e osso")
    phrase(
        "humano humana carne verdade real reais",
        r"\b(?:atendimento|atendente|suporte) humano\b|\bajuda humana\b|\bcarne e osso\b"
        r"|\b(?:pessoa|pessoas|gente|alguem|humano) (?:de verdade|real|reais)\b",
    ),
    # "humano" after a word that makes it the thing asked for ("quero humano", "um
    # humano"), not a statement ("humano erra") or a question about mel ("é um humano?")
    phrase(
        "humano",
        r"(?<!\be )(?<!\bsou )(?<!\bser )(?<!\bseja )(?<!\bou )"
        r"\b(?:um|uma|algum|o|com|pra|para|por|de|ao|quero|queria|preciso|chama|cade|tem"
        r"|atendimento|atendente|suporte|ajuda|contato) humano\b(?! ou (?:bot|robo|ia|maquina)\b)"
        r"(?! aqui\b)",  # "o humano aqui esqueceu …": the user speaking of themselves
    ),
    phrase(
        "atendimento atendido atendida",
        r"\b(?:atendimento|atendid[oa]) (?:de|com|por) (?:um |uma |algum |alguma )?"
        r"(?:pessoa|humano|atendente|gente)\b",
    ),
    # refusing the bot ("não quero falar com robô")
    phrase(
        "bot robo maquina ia chatbot inteligencia",
        r"\bnao (?:quero|gosto de|vou) (?:falar |conversar )?(?:com )?(?:um |uma |o |a |esse "
        r"|essa )?(?:bot|robo|maquina|ia|chatbot|inteligencia artificial)\b"
        r"|\bchega de (?:bot|robo|maquina)\b",
    ),
    # contact details of a human ("qual o contato do suporte?")
    phrase(
        "contato telefone numero whatsapp email fone canal",
        r"\b(?:contato|telefone|numero|whatsapp|email|fone|canal) (?:d[aoe]s? |pro |pra |com )?"
        rf"{_ART}(?:suporte|atendentes?|atendimento|humano|pessoa|sac|equipe|responsavel)\b{_TP}",
    ),
    phrase(
        "como onde",
        r"\b(?:como|onde) (?:eu )?(?:falo|entro em contato|contato|acho|encontro|chamo|aciono)"
        rf" (?:com )?{_ART}(?:suporte|atendentes?|atendimento|humano|pessoa|alguem|sac|voces)\b",
    ),
)

# The whole message is just a human noun, maybe with a greeting or "please".
_FILLER: Final = (
    r"(?:oi|ola|ei|alo|bom dia|boa tarde|boa noite|pfv|por favor|urgente|agora|ja|logo|ai"
    r"|mel|aqui|eu|quero|so|um|uma|o|a|favor|obrigad[oa])"
)
_BARE: Final = re.compile(
    rf"(?:{_FILLER} )*(?:atendente|atendimento|operador|suporte|humano|pessoa|sac|ser humano"
    rf"|alguem|me (?:transfere|transfira|encaminha|encaminhe))(?: {_FILLER})*"
)


def wants_human(text: str, tokens: Collection[str]) -> bool:
    """Whether the normalised ``text`` (whose words are ``tokens``) asks for a human."""
    if _KEYS.isdisjoint(tokens):
        return False
    for triggers, pattern in _RULES:
        if not triggers.isdisjoint(tokens) and pattern.search(text) is not None:
            return True
    return _BARE.fullmatch(text) is not None
