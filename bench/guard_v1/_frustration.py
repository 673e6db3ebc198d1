"""Frustration: profanity, insults and complaints aimed at mel, and generic outbursts.

Works on the canonical text of ``_text.normalize`` plus the raw text (for capitals, "!"
and angry emoji). Signals come in three strengths:

* **strong** — fire on their own: profanity (porra, caralho, pqp, vsf, vtnc, fdp, "vai a
  merda" ...), complaints that can only be about the conversation ("não serve pra nada",
  "não entende nada", "quantas vezes vou ter que ...", "responde direito"), and any
  negative word aimed at mel within a couple of words ("que bot burro", "lixo de app",
  "odeio vc", "esse app não funciona", "vc é muito lento").
* **medium** — words that are frustration when they stand alone but often describe
  something else in a finance chat: lixo, merda, horrível, péssimo, "não funciona",
  raiva, cansei, desisto, aff, mds ... They fire unless the message is about another
  topic (an amount, a spending verb, a card, a shop, a film, the traffic, someone else,
  "o X tava ...") — "o cartão não funciona no mercado", "o filme foi horrível mas gastei
  40", "o carro deu merda, 800 no mecânico" are not about mel. Two things win over the
  topic: evidence that the message is about the conversation ("eu pedi o saldo", "vc
  registrou errado", "esse app", "só queria ...") and an outburst standing as its own
  clause ("que saco, acabou o gás", "..., que raiva") — the brief counts generic
  outbursts as frustration.
* **capitals** — the spec's caps-abuse heuristic (> 5 chars, > 50 % of the non-space
  characters upper-case) is frustration only together with a second signal: a request
  for a human, or "!!!" in a message that is neither about another topic nor cheering.
  Alone it is not: plenty of people type everything in capitals ("GASTEI 200 NO POSTO").

Before the medium check, uses that are not outbursts are neutralised: the object "lixo"
("taxa do lixo", "saco de lixo", "joguei no lixo"), "saco de ...", intensifiers ("caro
pra caralho"), self-criticism ("fui burro de parcelar") and complaints whose subject is
someone else ("meu marido não entende nada de investimento", "o atendente da loja não
resolveu nada").

Emoji: 🤬 and 🖕 are strong; 😡 😠 💢 👿 😤 😒 🙄 🤦 count like a medium word.

Every regex comes with the words it cannot match without; it only runs when the message
holds one of them (``tests/unit/test_guard_properties.py`` checks the pairs), so an
ordinary finance message costs a few set look-ups.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from typing import Final

from bench.guard_v1._rules import Rules, phrase, words
from bench.guard_v1._text import normalize

__all__ = ["caps_abuse", "is_frustrated"]


# Words that point at mel: the bot, the app, "you". ("app do banco" is another app.)
_REF: Final = (
    r"(?:voce|voces|tu|te|(?:bot|robo|chatbot|app|assistente)(?! d[aoe]s? )|(?<!lua de )mel"
    r"|(?:^|essa |a |que |sua |uma |esta )ia|maquina|sistema|programa|esse negocio"
    r"|essa coisa|esse treco|essa joca|esse bagulho)"
)
_REF_KEYS: Final = words(
    "voce voces tu te bot robo chatbot app assistente mel ia maquina sistema programa "
    "negocio coisa treco joca bagulho"
)
# Negative words and complaints that are frustration when aimed at mel (either order).
_NEG: Final = (
    r"(?:burr[oa]s?|burrice|idiotas?|imbecil|imbecis|inutil|inuteis|estupid[oa]s?"
    r"|retardad[oa]s?|otari[oa]s?|babaca|anta|jumento|lerd[oa]|tapad[oa]|incompetente"
    r"|lixo|merda|bosta|porcaria|droga|porra|caralho|raiva|odio|odeio|detesto|nojo"
    r"|palhacada|desgraca|desgracad[oa]|maldit[oa]|pior|horrivel|pessim[oa]|ridicul[oa]"
    r"|nao (?:me )?(?:presta|serve|funciona|entende|entendeu|ajuda|ajudou|resolve|resolveu"
    r"|responde|respondeu)|nao (?:ta|esta) (?:funcionando|entendendo|ajudando)"
    r"|nao aguento|cansei|desisto|saco cheio|sacanagem|travou|bugou|bugad[oa]|preguica"
    r"|imprestavel|irrita|irritando|irritante|besteira|bobagem|asneira|horroros[oa]"
    r"|terrivel|nao adianta|cansad[oa]|capeta|sem nocao|inutilidade)"
)
_NEG_KEYS: Final = words(
    "burro burra burros burras burrice idiota idiotas imbecil imbecis inutil inuteis "
    "estupido estupida estupidos estupidas retardado retardada retardados retardadas "
    "otario otaria otarios otarias babaca anta jumento lerdo lerda tapado tapada "
    "incompetente lixo merda bosta porcaria droga porra caralho raiva odio odeio detesto "
    "nojo palhacada desgraca desgracado desgracada maldito maldita pior horrivel pessimo "
    "pessima ridiculo ridicula presta serve funciona entende entendeu ajuda ajudou resolve "
    "resolveu responde respondeu funcionando entendendo ajudando aguento cansei desisto "
    "saco sacanagem travou bugou bugado bugada preguica imprestavel irrita irritando "
    "irritante besteira bobagem asneira horroroso horrorosa terrivel adianta cansado "
    "cansada capeta nocao inutilidade"
)
# Mild adjectives: frustration only as a predicate of mel ("vc é muito lento").
_ADJ: Final = (
    r"(?:ruim|lent[oa]|chat[oa]|frac[oa]|tosc[oa]|bob[oa]|piada|vergonha|decepcao"
    r"|uma negacao|um saco|limitad[oa]|sem nocao)"
)
_ADJ_KEYS: Final = words(
    "ruim lento lenta chato chata fraco fraca tosco tosca bobo boba piada vergonha decepcao "
    "negacao saco limitado limitada nocao"
)
_COPULA: Final = r"(?: (?:e|ta|esta|tava|foi|ficou|anda|continua|virou|sendo|parece|so))?"
_INTENS: Final = r"(?: (?:muito|bem|tao|mais|meio|super|extremamente|um|uma|o|a|mesmo|demais))*"

_DIRECTED: Final = re.compile(
    rf"\b{_REF} (?:\w+ ){{0,2}}?{_NEG}\b"
    rf"|\b{_NEG} (?:\w+ ){{0,2}}?{_REF}\b"
    rf"|\b{_REF}{_COPULA}{_INTENS} {_ADJ}\b"
)
_DIRECTED_KEYS: Final = _NEG_KEYS | _ADJ_KEYS

_STRONG: Final = Rules(
    "pqp porra caralho cacete vsf vtnc fdp cuzao arrombado arrombada arrombados arrombadas "
    "fodas putaquepariu",
    phrase("foda", r"\bfoda se\b"),
    phrase("puta", r"\bputa (?:que pariu|merda)\b|\bfilho da puta\b"),
    phrase("cu", r"\btomar no cu\b"),
    phrase(
        "foder fuder fode fude ferrar lascar danar coquinho pastar cu merda inferno puta "
        "caralho porra banho batata esquina",
        r"\bvai (?:se |te |pra |pro |a |na |no |tomar no )?(?:foder|fuder|fode|fude|ferrar"
        r"|lascar|danar|catar coquinho|pastar|cu|merda|inferno|puta que pariu|caralho|porra"
        r"|tomar banho|plantar batata|ver se eu to na esquina)\b",
    ),
    phrase(
        "serve servem presta",
        r"\b(?:nao|nem) (?:serve|servem|presta) (?:pra|para|de) (?:nada|porra|merda|bosta"
        r"|coisa)\b|\bserve (?:pra|para) (?:nada|porra)\b|\bpra que (?:que )?(?:serve"
        r"|voce serve)\b|\bserve pra que\b",
    ),
    phrase(
        "entende entendeu ajuda ajudou resolve resolveu sabe faz fez",
        r"\bnao (?:me )?(?:entende|entendeu|ajuda|ajudou|resolve|resolveu|sabe|faz|fez)"
        r" (?:em |com |de )?(?:nada|porra|merda|bosta|coisa nenhuma|patavina)\b",
    ),
    phrase(
        "entende entendeu entendendo",
        r"\b(?:nao|nunca) me entende\b|\bnao ta entendendo nada\b"
        r"|\bentende(?:u)? (?:nada|porra nenhuma)\b",
    ),
    phrase("entende entendeu", r"\b(?:voce|tu) nunca (?:me )?(?:entende|entendeu)\b"),
    phrase(
        "nada",
        r"\bnada (?:que|do que) eu (?:peco|pergunto|falo|mando|digo) (?:voce |tu )?"
        r"(?:faz|fez|responde|acerta|entende)\b",
    ),
    phrase("quantas", r"\bquantas vezes (?:eu )?(?:vou|vo|tenho|preciso|terei|tem|ja|vai|que)\b"),
    phrase("falei disse expliquei avisei", r"\bja te (?:falei|disse|expliquei|avisei)\b"),
    phrase(
        "vezes 2x 3x 4x 5x 10x",
        r"\b(?:falei|disse|pedi|perguntei|expliquei|repeti|mandei|escrevi)(?: \w+){0,6}?"
        r" (?:(?:\d+|mil|duas|tres|quatro|cinco|varias|cem) vezes|(?:2|3|4|5|10)x)\b",
    ),
    phrase("responde", r"\bresponde (?:direito|logo|certo|a pergunta|o que eu perguntei)\b"),
    phrase("atencao aprende direito", r"\bpresta atencao\b|\baprende a ler\b|\ble direito\b"),
    phrase("pior", r"\bpior (?:bot|robo|app|assistente|atendimento|ia|chatbot|sistema)\b"),
    phrase("problema", r"\bqual (?:e )?(?:o )?(?:seu|teu) problema\b"),
    phrase("serve servem presta", r"\bnem pra isso (?:voce |tu )?(?:serve|servem|presta)\b"),
    phrase(
        "sabe nem",
        r"\bnao sabe nem\b|\bnem isso (?:voce )?(?:sabe|consegue|faz)\b"
        r"|\bvoce nao sabe (?:isso|nem|fazer|somar|contar|calcular|ler|fazer conta)\b",
    ),
)

_MEDIUM: Final = Rules(
    "merda bosta porcaria droga lixo horrivel pessimo pessima ridiculo ridicula absurdo "
    "palhacada sacanagem vergonha inferno infernos raiva odio odeio detesto argh grr ugh "
    "desgraca burro burra burrice idiota imbecil inutil estupido estupida incompetente "
    "cansei desisto desisti fudeu fodeu lerdo lerda aff affe affs affes wtf imprestavel "
    "irritante horroroso horrorosa terrivel inacreditavel capeta inutilidade enrolacao",
    phrase(
        "enrolar enrolando poupe",
        r"\b(?:para|pare) de enrolar\b|\bta (?:me )?enrolando\b|\bme poupe\b"
        r"|\b(?:voce|tu|so) (?:ta |fica |esta )?me enrolando\b",
    ),
    phrase("piada", r"\b(?:isso|isto|voce|tu|essa resposta) e (?:uma )?piada\b"),
    phrase("dificil", r"\bdificil (?:conversar|falar|lidar) (?:com|contigo)\b"),
    phrase("nocao", r"\bsem nocao\b"),
    phrase("coisa", r"\b(?:que )?coisa (?:mais )?(?:chata|irritante|ridicula|horrivel|inutil)\b"),
    phrase("deus", r"\bmeu deus\b"),
    phrase("pelo", r"\bpelo amor\b"),
    phrase("saco", r"\bsaco cheio\b|\b(?:encher|enchendo|enche) o saco\b|\bque saco\b"),
    phrase("demora", r"\bque demora\b|\bdemora demais\b"),
    phrase("aguento", r"\bnao aguento\b"),
    phrase(
        "novo",
        r"\bde novo isso\b|\bmesma coisa de novo\b|\bde novo a mesma\b"
        r"|\b(?:errou|errado|errada|errando) de novo\b",
    ),
    phrase("serio", r"\bserio isso\b"),
    phrase(
        "puto puta pistola irritado irritada nervoso nervosa bravo brava furioso furiosa "
        "bolado bolada estressado estressada vida",
        r"\b(?:to|ta|ficando|fiquei|deixa|deixou|deixando) (?:ficando )?(?:muito |bem |tao )?"
        r"(?:puto|puta|pistola|irritad[oa]|nervos[oa]|brav[oa]|furios[oa]|bolad[oa]"
        r"|estressad[oa]|p da vida)\b",
    ),
    phrase(
        "paciencia",
        r"\b(?:perdendo|perdi|sem|acabou|acabando|haja|esgotou|nao tenho mais) (?:a |minha )?"
        r"paciencia\b|\bpaciencia (?:acabou|zero|tem limite|esgotou)\b",
    ),
    phrase(
        "brincadeira zoeira zoacao piada",
        r"\bta de (?:brincadeira|zoeira|zoacao)\b|\bbrincadeira ne\b"
        r"|\bso pode ser (?:brincadeira|piada)\b",
    ),
    phrase("zoando tirando trollando zuando", r"\bta me (?:zoando|tirando|trollando|zuando)\b"),
    phrase(
        "funciona funcionando funcionou funcionar",
        r"\bnao funciona\b|\bnao (?:ta|esta) funcionando\b|\bnao funcionou\b"
        r"|\bnada (?:\w+ ){0,4}?funciona\b|\bnunca funciona\b|\bparou de funcionar\b",
    ),
    phrase(
        "presta serve entende entendeu ajuda ajudou resolve resolveu",
        r"\bnao (?:presta|serve|entendeu|ajuda|ajudou|resolve|resolveu)\b|\bnao (?:me )?entende\b",
    ),
    phrase("falei disse expliquei pedi", r"\bja (?:falei|disse|expliquei|pedi) (?:isso|que)\b"),
    phrase("chato chata", r"\bque chat[oa]\b"),
    phrase(
        "irrita irritando irritou irritam irritar irrito irritei",
        r"\bme irrit(?:a|ando|ou|am|ar|o|ei)\b",
    ),
    phrase("possivel", r"\bnao e possivel\b"),
    phrase(
        "besteira bobagem asneira groselha",
        r"\b(?:fala|falando|falou|responde|respondendo) (?:so )?(?:besteira|bobagem|asneira"
        r"|groselha)\b",
    ),
    phrase("foda osso", r"\bta (?:foda|osso)\b"),
    phrase("adianta", r"\bnao adianta (?:nada|falar|nem|conversar|perguntar|explicar)\b"),
    phrase(
        "perda perdendo perdi perder",
        r"\bperda de tempo\b|\b(?:perdendo|perdi|perder) (?:o |meu |o meu )?tempo\b",
    ),
    phrase(
        "louco louca maluco maluca doido doida",
        r"\b(?:me deixa|me deixando|to ficando|vou ficar|fico) (?:louc[oa]|maluc[oa]"
        r"|doid[oa])\b",
    ),
    phrase(
        "segunda terceira quarta quinta enesima milesima 3a 4a",
        r"\b(?:segunda|terceira|quarta|quinta|enesima|milesima|3a|4a) vez que (?:eu )?"
        r"(?:\w+ )?(?:pergunto|falo|peco|mando|digo|explico|repito|tento|escrevo)\b"
        r"|\bpela (?:terceira|quarta|quinta|enesima|milesima|3a|4a) vez\b",
    ),
    phrase(
        "toda mesma",
        r"\btoda (?:vez|hora) (?:a mesma coisa|isso|essa|esse|o mesmo)\b"
        r"|\bsempre a mesma coisa\b",
    ),
    phrase(
        "acerta erra errou errado",
        r"\b(?:nunca|nao) acerta\b|\berra tudo\b|\bso erra\b|\berrou tudo\b|\btudo errado\b",
    ),
    phrase("zoado zoada", r"\bta zoad[oa]\b"),
    phrase("condicoes", r"\bsem condicoes\b"),
    phrase("mereco merece", r"\beu mereco\b|\bninguem merece\b"),
    phrase(
        "conseguindo consigo",
        r"\bnao to conseguindo nada\b|\bnao consigo nada\b",
    ),
)

# Uses that are not outbursts, removed before the medium check.
_THIRD: Final = (
    r"(?:ele|ela|eles|elas|marido|esposa|mulher|namorad[oa]|filh[oa]s?|mae|pai|irma|irmao"
    r"|sogr[oa]|cunhad[oa]|amig[oa]s?|gerente|atendente|banco|chefe|vizinh[oa]|gente"
    r"|suporte|loja|cartao|site|pix|maquininha)"
)
_NEUTRALISE_KEYS: Final = words(
    "lixo saco sacos caralho porra cacete caramba burro burra burros burras idiota idiotas "
    "otario otaria otarios otarias trouxa trouxas entende entendeu ajuda ajudou resolve "
    "resolveu sabe funciona funcionou presta serve responde respondeu"
)
_NEUTRALISE: Final = re.compile(
    r"\b(?:d[aoe]s?|n[oa]s?|pro|pra|ao|o|os|em|num|com|sem) lixo\b"
    r"|\bsaco de \w+|\bsacos de \w+"
    r"|\b(?:pra|pa) (?:caralho|porra|cacete|caramba)\b"
    r"|\b(?:fui|sou|eu|fomos|somos|me senti|fiquei|burrice minha|que burrice a minha)"
    r"(?: (?:muito|tao|mais|bem|um|uma))* (?:burr[oa]s?|idiotas?|otari[oa]s?|trouxas?)\b"
    rf"|\b{_THIRD} (?:\w+ ){{0,2}}?nao (?:me )?(?:entende|entendeu|ajuda|ajudou|resolve"
    r"|resolveu|sabe|funciona|funcionou|presta|serve|responde|respondeu)\b"
    r"(?: (?:em |com |de )?(?:nada|porra|coisa nenhuma))?"
)

# Something other than mel that a negative word may be describing: an amount, a spending
# verb, a thing, a place or another person. Plain words, normalised at import.
_TOPIC_WORDS: Final = frozenset(
    normalize(word)
    for word in words(
        """
    reais real conto contos pila pilas mil dinheiro grana salário gastei gastamos gastou
    gastaram gastar gastando paguei pagamos pagou pagaram pagar pagando comprei compramos
    comprou compraram comprar custou custa custam custando cobrou cobraram cobrando cobra
    recebi recebemos parcelei parcelamos parcelou parcelar transferi saquei preço preços caro
    caros barato juros multa taxa tarifa imposto iptu ipva boleto fatura parcela prestação
    empréstimo financiamento dívida cartão pix maquininha banco nubank itaú bradesco
    santander caixa picpay débito crédito site loja mercado supermercado feira padaria
    restaurante lanchonete bar filme cinema show novela série jogo time trânsito ônibus uber
    metrô carro moto pneu mecânico oficina posto gasolina combustível gás luz água internet
    wifi celular operadora claro vivo tim academia escola faculdade curso hospital médico
    dentista farmácia remédio saúde seguro aluguel condomínio reforma obra geladeira fogão
    tv fone notebook computador roupa comida pizza ifood delivery hotel viagem voo passagem
    festa chefe trabalho emprego vizinho vizinha sogra sogro cunhado cunhada marido esposa
    namorado namorada filho filha mãe pai irmã irmão chuva calor frio fila atendente
    gerente governo dólar inflação dieta lixeira
    """
    )
)
# Digits that are not a count of times, or "o X tava ...": a subject that is not mel.
_TOPIC_SHAPES: Final = re.compile(
    r"\b\d+\b(?! vez)"
    r"|\b(?:o|a|os|as|esse|essa|meu|minha|nosso|nossa|seu|sua) (?!(?:bot|robo|app|mel|ia"
    r"|assistente|sistema|chat|atendimento|que|gente|deus|merda|porcaria|bosta|droga|coisa"
    r"|resposta|respostas|conversa|papo"
    r"|joca|negocio|treco|lixo)\b)\w+ (?:ta|tava|estava|esta|foi|e|ficou|era|anda|veio|deu"
    r"|quebrou|estragou|pifou|parou|caiu|travou)\b"
)

# Evidence that a message is about the conversation with mel, even when it also mentions
# money or things: mel's names, the couple's own words to mel ("eu pedi", "já falei"),
# what mel did ("vc registrou", "lançou errado"), "só queria ...".
_ABOUT_MEL: Final = re.compile(
    r"\b(?:(?:bot|robo|chatbot|app|assistente)(?! d[aoe]s? )|(?<!lua de )mel"
    r"|(?:essa|a|que|sua) ia)\b"
    r"|\b(?:eu|ja|te|so) (?:te )?(?:pedi|perguntei|falei|disse|mandei|expliquei|digitei"
    r"|escrevi|coloquei)\b(?! com)"
    r"|\b(?:voce|tu) (?:nao |nunca |ja |de novo )?(?:\w+ )?(?:registrou|anotou|lancou"
    r"|respondeu|errou|erra|entendeu|mostrou|calculou|somou|acerta|acertou|me deu|colocou"
    r"|botou|trocou|confundiu|inventou)\b"
    r"|\b(?:registrou|anotou|lancou|errou|calculou|somou|confundiu|colocou|respondeu)"
    r"(?: \w+){0,4} (?:errado|errada|de novo|outra vez|no mes errado)\b"
    r"|\b(?:eu )?so (?:quero|queria|pedi|perguntei)\b"
)

# An outburst standing as its own clause ("que saco, acabou o gás", "merda esqueci de
# pagar", "..., que raiva"). Matched on the text normalised with ``keep_punct``.
_OUTBURST: Final = (
    r"(?:merda|droga|que saco|raiva|odio|inferno|porcaria|bosta|aff(?:e|s|es)?|argh|grr"
    r"|ugh|desgraca|palhacada|sacanagem|cansei|desisto|wtf|que demora|que lixo"
    r"|puta merda)"
)
_LEAD: Final = (
    r"(?:(?:ai|ah|ui|puts|nossa|mano|cara|ja|o|oh|aff|meu deus|pelo amor de deus|serio)"
    r" (?:, )?)*(?:(?:mas |ai )?que |puta |mas )?"
)
_TRAIL: Final = r"(?: (?:mesmo|viu|hein|ne|cara|mano|demais))*"
_DET: Final = (
    r"(?:o|a|os|as|um|uma|esse|essa|este|esta|isso|de|do|da|dos|das|desse|dessa|deste"
    r"|desta|disso|no|na|nos|nas|com|pra|pro|para|em|por|pelo|pela|que|e)"
)
_INTERJECTION: Final = re.compile(
    rf"(?:^|, ){_LEAD}{_OUTBURST}{_TRAIL}(?: ,|$)|^{_LEAD}{_OUTBURST} (?!{_DET}\b)\w"
)

_ANGRY_EMOJI: Final = re.compile("[\U0001f92c\U0001f595]")  # 🤬 🖕
# 😡 😠 💢 👿 😤 😒 🙄 🤦
_CROSS_EMOJI: Final = re.compile(
    "[\U0001f621\U0001f620\U0001f4a2\U0001f47f\U0001f624\U0001f612\U0001f644\U0001f926]"
)
# Capitals with "!!!" are cheering, not shouting at mel, when they carry these words.
_CHEER: Final = re.compile(
    r"\b(?:bom dia|boa tarde|boa noite|oi|ola|obrigad[oa]|valeu|eba|oba|uhul|uhu|parabens"
    r"|batemos|bati|conseguimos|consegui|top|show|amei|adorei|feliz|felizes|demais|otimo"
    r"|perfeito|viva|aleluia|finalmente|sim|isso ai|boa)\b"
)


def caps_abuse(raw: str) -> bool:
    """The spec's heuristic: more than 5 chars and over half of the non-space ones upper-case."""
    if len(raw) <= 5:
        return False
    non_space = len(raw) - raw.count(" ")
    return non_space > 0 and sum(map(str.isupper, raw)) / non_space > 0.5


def _other_topic(text: str, tokens: Collection[str]) -> bool:
    return not _TOPIC_WORDS.isdisjoint(tokens) or _TOPIC_SHAPES.search(text) is not None


# No word of the message is in here: no word-based signal can fire.
_ANY_KEYS: Final = _STRONG.words | _STRONG.keys | _MEDIUM.words | _MEDIUM.keys | _DIRECTED_KEYS


def _words_say_frustrated(text: str, tokens: Collection[str], raw: str) -> bool:
    if _ANY_KEYS.isdisjoint(tokens):
        return False
    kept: Collection[str] = tokens
    cleaned = text
    if not _NEUTRALISE_KEYS.isdisjoint(tokens):
        # removed phrases leave a double space, which no pattern matches across
        cleaned = _NEUTRALISE.sub("  ", text)
        kept = cleaned.split()
    if _STRONG.search(cleaned, kept):
        return True
    if (
        not _REF_KEYS.isdisjoint(kept)
        and not _DIRECTED_KEYS.isdisjoint(kept)
        and _DIRECTED.search(cleaned)
    ):
        return True
    if not _MEDIUM.search(cleaned, kept):
        return False
    if not _other_topic(text, tokens) or _ABOUT_MEL.search(cleaned):
        return True
    return _INTERJECTION.search(normalize(raw, keep_punct=True)) is not None


def is_frustrated(
    text: str,
    tokens: Collection[str],
    raw: str,
    wants_human: Callable[[str, Collection[str]], bool],
) -> bool:
    """Whether the last user message shows frustration.

    ``text`` is its normalised form and ``tokens`` its words, ``raw`` the
    clipped original (for capitals, "!" and emoji); ``wants_human`` is the human-request
    detector, consulted only for a message in capitals.
    """
    emoji = not raw.isascii()
    if emoji and _ANGRY_EMOJI.search(raw):
        return True
    if _words_say_frustrated(text, tokens, raw):
        return True
    if emoji and _CROSS_EMOJI.search(raw) and not _other_topic(text, tokens):
        return True
    if raw == raw.lower():  # no capitals at all: the common case
        return False
    shouting = raw.count("!") >= 3 and not _other_topic(text, tokens) and not _CHEER.search(text)
    return (shouting or wants_human(text, tokens)) and caps_abuse(raw)
