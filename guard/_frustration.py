"""Frustration: profanity, insults and complaints aimed at mel, and generic outbursts.

Works on the canonical text of ``_text.normalize`` plus the raw text (for capitals, "!"
and angry emoji). Signals come in three strengths:

* **strong** — fire on their own: profanity used as an outburst (porra, caralho, pqp,
  vsf, vtnc, fdp, "vai a merda" ...), complaints that can only be about the conversation
  ("não serve pra nada", "não entende nada", "quantas vezes vou ter que ...", "responde
  direito"), and any negative word aimed at mel within a couple of words ("que bot
  burro", "lixo de app", "odeio vc", "esse app não funciona", "vc é muito lento").
* **medium** — words that are frustration when they stand alone but often describe
  something else in a finance chat: lixo, merda, horrível, péssimo, "não funciona",
  raiva, cansei, desisto, aff, mds ... They fire unless the message is about another
  topic (an amount, a spending verb, a card, a shop, a film, the traffic, someone else):
  "o cartão não funciona no mercado", "o filme foi horrível mas gastei 40",
  "o carro deu merda, 800 no mecânico" are not about mel.
* **capitals** — the spec's caps-abuse heuristic (> 5 chars, > 50 % of the non-space
  characters upper-case) is frustration only together with a second signal: a request
  for a human, or "!!!" in a message that is not about another topic. Alone it is not:
  plenty of people type everything in capitals ("GASTEI 200 NO POSTO").

Before matching, uses that are clearly not outbursts are neutralised: the object "lixo"
("taxa do lixo", "saco de lixo", "joguei no lixo"), "que saco de ...", intensifiers ("caro
pra caralho"), self-criticism ("fui burro de parcelar") and complaints whose subject is
someone else ("meu marido não entende nada de investimento", "o atendente da loja não
resolveu nada").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from guard._text import normalize

__all__ = ["caps_abuse", "is_frustrated"]

# Words that point at mel: the bot, the app, "you". ("app do banco" is another app.)
_REF: Final = (
    r"(?:voce|voces|tu|te|(?:bot|robo|chatbot|app|assistente)(?! d[aoe]s? )|(?<!lua de )mel"
    r"|(?:^|essa |a |que |sua |uma |esta )ia|maquina|sistema|programa|esse negocio"
    r"|essa coisa|esse treco|essa joca|esse bagulho)"
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
    r"|terrivel|nao adianta)"
)
# Mild adjectives: frustration only as a predicate of mel ("vc é muito lento").
_ADJ: Final = (
    r"(?:ruim|lent[oa]|chat[oa]|frac[oa]|tosc[oa]|bob[oa]|piada|vergonha|decepcao"
    r"|uma negacao|um saco)"
)
_COPULA: Final = r"(?: (?:e|ta|esta|tava|foi|ficou|anda|continua|virou|sendo|parece|so))?"
_INTENS: Final = r"(?: (?:muito|bem|tao|mais|meio|super|extremamente|um|uma|o|a|mesmo|demais))*"

_DIRECTED: Final = re.compile(
    rf"\b{_REF} (?:\w+ ){{0,2}}?{_NEG}\b"
    rf"|\b{_NEG} (?:\w+ ){{0,2}}?{_REF}\b"
    rf"|\b{_REF}{_COPULA}{_INTENS} {_ADJ}\b"
)

_STRONG: Final = re.compile(
    r"\b(?:pqp|porra|caralho|cacete|vsf|vtnc|fdp|cuzao|arrombad[oa]s?|foda se|fodas"
    r"|puta (?:que pariu|merda)|putaquepariu|filho da puta|tomar no cu|porra nenhuma)\b"
    r"|\bvai (?:se |te |pra |pro |a |na |no |tomar no )?(?:foder|fuder|fode|fude|ferrar|lascar"
    r"|danar|catar coquinho|pastar|cu|merda|inferno|puta que pariu|caralho|porra"
    r"|tomar banho|plantar batata|ver se eu to na esquina)\b"
    r"|\b(?:nao|nem) (?:serve|servem|presta) (?:pra|para|de) (?:nada|porra|merda|bosta|coisa)"
    r"|\bserve (?:pra|para) (?:nada|porra)|\bpra que (?:que )?(?:serve|voce serve)\b"
    r"|\bserve pra que\b"
    r"|\bnao (?:me )?(?:entende|entendeu|ajuda|ajudou|resolve|resolveu|sabe|faz|fez)"
    r" (?:em |com |de )?(?:nada|porra|merda|bosta|coisa nenhuma|patavina)\b"
    r"|\b(?:nao|nunca) me entende\b|\bnao ta entendendo nada\b"
    r"|\bentende(?:u)? (?:nada|porra nenhuma)\b"
    r"|\bquantas vezes (?:eu )?(?:vou|vo|tenho|preciso|terei|tem|ja|vai|que)\b"
    r"|\bja te (?:falei|disse|expliquei|pedi|avisei|mandei|perguntei|respondi)\b"
    r"|\b(?:falei|disse|pedi|perguntei|expliquei|repeti|mandei)(?: isso)?(?: (?:ja|umas))?"
    r" (?:\d+|mil|duas|tres|quatro|cinco|varias|cem) vezes\b"
    r"|\bresponde (?:direito|logo|certo|a pergunta|o que eu perguntei)\b"
    r"|\bpresta atencao\b|\baprende a ler\b|\ble direito\b"
    r"|\bpior (?:bot|robo|app|assistente|atendimento|ia|chatbot|sistema)\b"
    r"|\bnao sabe nem\b|\bnem isso (?:voce )?(?:sabe|consegue|faz)\b"
    r"|\bvoce nao sabe (?:isso|nem|fazer)\b"
)

_MEDIUM: Final = re.compile(
    r"\b(?:merda|bosta|porcaria|droga|lixo|horrivel|pessim[oa]|ridicul[oa]|absurdo"
    r"|palhacada|sacanagem|vergonha|inferno|raiva|odio|odeio|detesto|aff|argh|grr|ugh"
    r"|meu deus|pelo amor de deus|pelo amor|desgraca|burr[oa]|burrice|idiota|imbecil"
    r"|inutil|estupid[oa]|incompetente|cansei|desisto|desisti|saco cheio|fudeu|fodeu"
    r"|(?:encher|enchendo|enche) o saco|que saco|lerd[oa]|que demora|demora demais"
    r"|nao aguento|de novo isso|e serio isso|serio isso"
    r"|(?:to|ta|ficando|fiquei|deixa|deixou|deixando) (?:ficando )?(?:muito |bem |tao )?"
    r"(?:puto|puta|pistola|irritad[oa]|nervos[oa]|brav[oa]|furios[oa]|bolad[oa]"
    r"|estressad[oa]|p da vida|com raiva|com odio|de saco cheio)"
    r"|(?:perdendo|perdi|sem|acabou|acabando|haja|esgotou|nao tenho mais) (?:a |minha )?"
    r"paciencia|paciencia (?:acabou|zero|tem limite|esgotou)"
    r"|ta de (?:sacanagem|brincadeira|zoeira|palhacada|zoacao)|brincadeira ne"
    r"|so pode ser (?:brincadeira|sacanagem|piada)|ta me (?:zoando|tirando|trollando|zuando)"
    r"|nao funciona|nao (?:ta|esta) funcionando|nao funcionou|nada funciona|nunca funciona"
    r"|parou de funcionar|nao presta|nao serve|nao (?:me )?entende|nao entendeu"
    r"|nao ajuda|nao ajudou|nao resolve|nao resolveu"
    r"|ja (?:falei|disse|expliquei|pedi) (?:isso|que)|af+(?:e|s|es)?|wtf|imprestavel"
    r"|que chat[oa]|me irrit\w*|irritante|(?:errou|errado|errada|errando) de novo"
    r"|nao e possivel|(?:fala|falando|falou|responde|respondendo) (?:so )?(?:besteira"
    r"|bobagem|merda|asneira|groselha)|horroros[oa]|terrivel|ta foda|ta osso"
    r"|nao adianta (?:nada|falar|nem|conversar|perguntar|explicar)|perda de tempo"
    r"|(?:perdendo|perdi|perder) (?:o |meu |o meu )?tempo"
    r"|(?:me deixa|me deixando|to ficando|vou ficar|fico) (?:louc[oa]|malucx|maluc[oa]|doid[oa])"
    r"|(?:segunda|terceira|quarta|quinta|enesima|milesima|3a|4a) vez"
    r"|toda (?:vez|hora) (?:a mesma coisa|isso|essa|esse|o mesmo)|sempre a mesma coisa"
    r"|(?:a )?mesma coisa de novo|de novo a mesma|nunca acerta|nao acerta|erra tudo|so erra"
    r"|errou tudo|tudo errado|dos infernos|ta zoad[oa]|sem condicoes|inacreditavel"
    r"|eu mereco|ninguem merece|nao (?:to|estou) conseguindo nada|nao consigo nada)\b"
)

# Uses that are not outbursts, removed before the strong / medium / directed checks.
_THIRD: Final = (
    r"(?:ele|ela|eles|elas|marido|esposa|mulher|namorad[oa]|filh[oa]s?|mae|pai|irma|irmao"
    r"|sogr[oa]|cunhad[oa]|amig[oa]s?|gerente|atendente|banco|chefe|vizinh[oa]|gente"
    r"|suporte|loja|cartao|site|pix|maquininha)"
)
_NEUTRALISE: Final = re.compile(
    r"\b(?:d[aoe]s?|n[oa]s?|pro|pra|ao|o|os|em|num|com|sem) lixo\b"
    r"|\bsaco de \w+|\bsacos de \w+"
    r"|\b(?:pra|pa) (?:caralho|porra|cacete|caramba)\b"
    r"|\b(?:fui|sou|eu|fomos|somos|me senti|fiquei|burrice minha|que burrice a minha)"
    r"(?: (?:muito|tao|mais|bem|um|uma))* (?:burr[oa]s?|idiotas?|otari[oa]s?|trouxas?)\b"
    rf"|\b{_THIRD} (?:\w+ ){{0,2}}?nao (?:me )?(?:entende|entendeu|ajuda|ajudou|resolve"
    r"|resolveu|sabe|funciona|funcionou|presta|serve|responde|respondeu)\w*"
    r"(?: (?:em |com |de )?(?:nada|porra|coisa nenhuma))?"
)

# Something other than mel that a negative word may be describing: an amount, a spending
# verb, a thing, a place or another person. Plain words, normalised at import.
_TOPIC_WORDS: Final = """
    reais real conto contos pila pilas mil dinheiro grana salario gastei gastamos gastou
    gastaram gastar gastando paguei pagamos pagou pagaram pagar pagando comprei compramos
    comprou compraram comprar custou custa custam custando cobrou cobraram cobrando cobra
    recebi recebemos parcelei parcelamos parcelou parcelar transferi saquei preço preços caro
    caros barato juros multa taxa tarifa imposto iptu ipva boleto fatura parcela prestação
    empréstimo financiamento dívida cartão pix maquininha banco nubank itaú bradesco
    santander caixa picpay débito crédito site loja mercado supermercado feira padaria
    restaurante lanchonete bar filme cinema show novela série jogo time trânsito ônibus uber
    metrô carro moto pneu mecânico oficina posto gasolina combustível luz água internet
    wifi celular operadora claro vivo tim academia escola faculdade curso hospital médico
    dentista farmácia remédio seguro aluguel condomínio reforma obra geladeira fogão tv fone
    notebook computador roupa comida pizza ifood delivery hotel viagem voo passagem festa
    chefe trabalho emprego vizinho vizinha sogra sogro cunhado cunhada marido esposa
    namorado namorada filho filha mãe pai irmã irmão chuva calor frio fila atendente gerente
    governo dólar inflação dieta lixeira
"""
_OTHER_TOPIC: Final = re.compile(
    r"\b\d+\b(?! vez)|\bplano de saude\b|\b(?:"
    + "|".join(sorted({normalize(w) for w in _TOPIC_WORDS.split()}))
    + r")\b"
    # "o X tava horrível": a subject that is not mel.
    r"|\b(?:o|a|os|as|esse|essa|meu|minha|nosso|nossa|seu|sua) (?!(?:bot|robo|app|mel|ia"
    r"|assistente|sistema|chat|atendimento|que|gente|deus|merda|porcaria|bosta|droga|coisa"
    r"|joca|negocio|treco|lixo)\b)\w+ (?:ta|tava|estava|esta|foi"
    r"|e|ficou|era|anda|veio|deu|quebrou|estragou|pifou|parou|caiu|travou)\b"
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
    r"|\b(?:nunca|nao) acerta\b|\berra tudo\b|\bso erra\b|\btudo errado\b"
)

# An outburst standing as its own clause ("que saco, acabou o gás", "merda esqueci de
# pagar", "..., que raiva"): frustration even in a message about money. Matched on the
# text normalised with ``keep_punct`` (clause punctuation kept as ",").
_OUTBURST: Final = (
    r"(?:merda|droga|que saco|raiva|odio|inferno|porcaria|bosta|af+(?:e|s|es)?|argh|grr"
    r"|ugh|desgraca|palhacada|sacanagem|cansei|desisto|wtf|que demora|que lixo"
    r"|puta merda)"
)
_LEAD: Final = (
    r"(?:(?:ai|ah|ui|puts|nossa|mano|cara|ja|o|oh|af+|meu deus|pelo amor de deus|serio)"
    r" (?:, )?)*(?:(?:mas |ai )?que |puta |mas )?"
)
_TRAIL: Final = r"(?: (?:mesmo|viu|hein|ne|cara|mano|demais))*"
_DET: Final = (
    r"(?:o|a|os|as|um|uma|esse|essa|este|esta|isso|de|do|da|dos|das|desse|dessa|deste"
    r"|desta|disso|no|na|nos|nas|com|pra|pro|para|em|por|pelo|pela|que|e)"
)
_INTERJECTION: Final = re.compile(
    rf"(?:^|, ){_LEAD}{_OUTBURST}{_TRAIL}(?: ,|$)"
    rf"|^{_LEAD}{_OUTBURST} (?!{_DET}\b)\w"
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


def _words_say_frustrated(text: str, raw: str) -> bool:
    if not (_MEDIUM.search(text) or _STRONG.search(text) or _DIRECTED.search(text)):
        return False
    cleaned = _NEUTRALISE.sub(" ", text)
    if _STRONG.search(cleaned) or _DIRECTED.search(cleaned):
        return True
    if not _MEDIUM.search(cleaned):
        return False
    if not _OTHER_TOPIC.search(cleaned) or _ABOUT_MEL.search(cleaned):
        return True
    return _INTERJECTION.search(normalize(raw, keep_punct=True)) is not None


def is_frustrated(text: str, raw: str, wants_human: Callable[[str], bool]) -> bool:
    """Whether the (normalised) ``text`` of the last user message shows frustration.

    ``raw`` is the clipped original text; ``wants_human`` is the human-request detector,
    consulted only for a message in capitals.
    """
    emoji = not raw.isascii()
    if emoji and _ANGRY_EMOJI.search(raw):
        return True
    if _words_say_frustrated(text, raw):
        return True
    if emoji and _CROSS_EMOJI.search(raw) and not _OTHER_TOPIC.search(text):
        return True
    if raw != raw.lower() and caps_abuse(raw):
        if wants_human(text):
            return True
        if raw.count("!") >= 3 and not _OTHER_TOPIC.search(text) and not _CHEER.search(text):
            return True
    return False
