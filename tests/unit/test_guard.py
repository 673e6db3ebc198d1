"""ConversationGuard (spec 023) at guard level: the spec's scenarios, exact strings, the
choices documented in ``guard._guard``, hard negatives, purity, and the lexicon's own
consistency. The AgentChat-level scenarios live with the agent tests."""

from __future__ import annotations

import ast
import itertools
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from guard import (
    GUARD_RESPONSE_FRUSTRATED,
    GUARD_RESPONSE_HUMAN_REQUEST,
    GUARD_RESPONSE_LOOP,
    ConversationGuard,
    GuardInput,
    GuardVerdict,
    _data,
    _frustration,
    _human,
    _loop,
    _text,
)
from guard._lexicon import NUMBER

GUARD_DIR = Path(__file__).resolve().parents[2] / "guard"


@dataclass(frozen=True, slots=True)
class Msg:
    role: str
    content: object


def user(text: str) -> Msg:
    return Msg("user", text)


def bot(text: str) -> Msg:
    return Msg("assistant", text)


def evaluate(*texts: str, past: int | None = None) -> GuardVerdict:
    """The verdict for a conversation of user messages, oldest first."""
    return ConversationGuard.evaluate(GuardInput([user(t) for t in texts], past))


# --------------------------------------------------------------------------- contract


def test_constants_are_the_spec_strings_verbatim() -> None:
    assert GUARD_RESPONSE_FRUSTRATED == (
        "Vi que tu tá frustrado e eu entendo. Bora tentar de outro jeito — "
        "me conta o que tu precisa em 1 frase curta?"
    )
    assert GUARD_RESPONSE_LOOP == (
        "Acho que travei. Não consegui te ajudar com isso. "
        "Quer reformular ou esperar um humano entrar pra te ajudar mais tarde?"
    )
    assert GUARD_RESPONSE_HUMAN_REQUEST == (
        "Por enquanto só eu (mel) por aqui — sem humano. Anoto o pedido pra avisar quando "
        "suporte entrar. Enquanto isso, posso te ajudar com orçamento, metas ou fatura?"
    )
    assert "\u2014" in GUARD_RESPONSE_FRUSTRATED  # the em dash is part of the string
    assert not GUARD_RESPONSE_LOOP.startswith(("\u201c", '"'))  # the quotes are not


def test_public_api() -> None:
    import guard

    assert guard.__all__ == sorted(guard.__all__, key=lambda n: (not n.isupper(), n))
    assert {
        "ConversationGuard",
        "GuardInput",
        "GuardVerdict",
        "GuardKind",
        "MessageLike",
        "GUARD_RESPONSE_FRUSTRATED",
        "GUARD_RESPONSE_LOOP",
        "GUARD_RESPONSE_HUMAN_REQUEST",
    } <= set(guard.__all__)
    verdict = evaluate("oi")
    with pytest.raises(AttributeError):
        verdict.preempt = True  # type: ignore[misc]
    with pytest.raises(ValueError, match="exactly when preempt"):
        GuardVerdict(preempt=True)


def test_guard_imports_only_the_standard_library() -> None:
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    for path in GUARD_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                roots = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                roots = {(node.module or "").split(".")[0]}
            else:
                continue
            assert roots <= stdlib | {"guard"}, f"{path.name} imports {roots}"


def test_agent_chat_message_is_a_message_like() -> None:
    from agent.messages import ChatMessage

    messages = [ChatMessage(role="user", content="quero falar com uma pessoa, não com bot")]
    verdict = ConversationGuard.evaluate(GuardInput(messages=messages))
    assert verdict.kind == "human-request"


# ------------------------------------------------------------------ the spec's scenarios


def test_frustrated_client_gets_the_empathetic_reply() -> None:
    verdict = evaluate("esse bot é uma porra, não funciona NADA")
    assert verdict == GuardVerdict(True, "frustrated", GUARD_RESPONSE_FRUSTRATED)
    assert re.search(r"entendo|frustrad|bora tentar", verdict.response or "", re.I)


def test_loop_is_detected_after_three_similar_messages() -> None:
    verdict = evaluate("qual o saldo?", "saldo?", "saldo mesmo?", past=2)
    assert verdict == GuardVerdict(True, "loop", GUARD_RESPONSE_LOOP)
    assert re.search(r"travei|reformul|humano", verdict.response or "", re.I)


def test_human_request_is_answered_transparently() -> None:
    verdict = evaluate("quero falar com uma pessoa, não com bot")
    assert verdict == GuardVerdict(True, "human-request", GUARD_RESPONSE_HUMAN_REQUEST)
    assert re.search(r"só eu|por enquanto|sem humano|anoto.*pedido", verdict.response or "", re.I)
    assert re.search(r"orçamento|meta|fatura", verdict.response or "", re.I)


def test_normal_message_does_not_preempt() -> None:
    verdict = evaluate("qual o total do mês?")
    assert verdict == GuardVerdict(preempt=False)
    assert (verdict.preempt, verdict.kind, verdict.response) == (False, None, None)


def test_frustration_wins_over_a_human_request() -> None:
    verdict = evaluate("VAI A MERDA, QUERO FALAR COM HUMANO")
    assert verdict.kind == "frustrated"
    assert verdict.response == GUARD_RESPONSE_FRUSTRATED


# ------------------------------------------------------------------------------- loop


@pytest.mark.parametrize("past", [None, 0, 1, -1, -(10**9)])
def test_loop_is_off_without_the_callers_signal(past: int | None) -> None:
    assert not evaluate("qual o saldo?", "saldo?", "saldo mesmo?", past=past).preempt


@pytest.mark.parametrize("past", [2, 3, 10**12])
def test_loop_fires_from_two_past_turns(past: int) -> None:
    assert evaluate("qual o saldo?", "saldo?", "saldo mesmo?", past=past).kind == "loop"


def test_loop_ignores_assistant_messages_in_between() -> None:
    messages = [
        user("quanto gastei em mercado"),
        bot("Deixa eu ver..."),
        user("quanto eu gastei no mercado?"),
        bot("Desculpa, não consegui."),
        Msg("tool", "{}"),
        user("mercado quanto gastei"),
    ]
    assert ConversationGuard.evaluate(GuardInput(messages, 2)).kind == "loop"


def test_loop_looks_at_the_last_three_user_messages_only() -> None:
    assert evaluate("oi", "qual o saldo?", "saldo?", "saldo mesmo?", past=2).kind == "loop"
    assert not evaluate("qual o saldo?", "saldo?", "e a fatura?", past=2).preempt


def test_loop_needs_three_user_messages() -> None:
    assert not evaluate("saldo?", "saldo?", past=2).preempt


@pytest.mark.parametrize(
    "texts",
    [
        ("e a luz?", "e o mercado?", "e o aluguel?"),
        ("quanto gastei em maio", "e em abril?", "e em março?"),
        ("gastei 50 na padaria", "gastei 30 no uber", "gastei 20 na farmacia"),
        ("gastos de mercado em maio", "gastos de mercado em junho", "gastos de mercado em julho"),
        ("ok", "ok", "ok"),
        ("kkkk", "kkk", "kkkkk"),
    ],
)
def test_follow_ups_and_acknowledgements_are_not_a_loop(texts: tuple[str, ...]) -> None:
    assert not evaluate(*texts, past=2).preempt


@pytest.mark.parametrize(
    "texts",
    [
        ("quanto gastamos de farmacia esse mes?", "qual foi o total com remedio?", "farmacia?"),
        ("q dia fecha a fatura do nubank?", "quando vira a fatura do roxinho?", "fechamento nu"),
        ("registra 89,90 de farmacia", "anota ai farmacia 89,90", "lança 89,90 da drogasil"),
        ("quanto a gente economizou", "economia do mes?", "quanto guardamos?"),
        ("quanto que eu gastei e a Paula?", "o gasto de cada um", "gastos separados da Paula"),
        # across languages, and what the couple owes
        ("me lembra de pagar a luz dia 10", "set a reminder: electricity bill", "lembrete da luz?"),
        ("to no vermelho?", "minha conta tá negativa?", "mel eu to devendo no banco ou não"),
        # what is left to pay is what the couple owes
        ("quanto falta pagar do fotógrafo?", "saldo devedor do fotógrafo", "fotógrafo devo quanto"),
        (
            "quanto falta pagar pro Pedro?",
            "saldo devedor com o Pedro",
            "quanto ainda devo pro Pedro",
        ),
        # a due day said "vence 10"; the new value of a change; the partner's spending
        (
            "adiciona a conta de luz que vence dia 10, 189 reais",
            "conta de luz 189 vencimento dia 10",
            "coloca aí a energia, 189, vence 10",
        ),
        (
            "corrige o lançamento de 500 pra 50",
            "o gasto da farmácia é 50 e não 500, arruma",
            "muda o valor da farmácia pra 50 reais",
        ),
        (
            "oxe como eu vejo os gastos dela",
            "quanto ela gastou?",
            "mostra os lançamentos da minha esposa",
        ),
        # duplicates; adding the partner; settling up
        (
            "apaga os lançamentos duplicados de hoje",
            "remove os gastos repetidos de hj",
            "tira as duplicatas de hoje por favor",
        ),
        (
            "adiciona meu marido na conta",
            "como coloco o Rafael pra ver os gastos junto",
            "quero compartilhar com meu esposo, como faço",
        ),
        (
            "quem deve quem aqui em casa?",
            "o acerto entre eu e a Ju tá como?",
            "qnt eu tenho q passar pra ela esse mês",
        ),
    ],
)
def test_rephrasings_of_one_question_are_a_loop(texts: tuple[str, ...]) -> None:
    assert evaluate(*texts, past=2).kind == "loop"


@pytest.mark.parametrize(
    "texts",
    [
        ("anota 50 de gasolina", "opa, foi 55", "nao, 55,40 certinho"),
        (
            "coloca sessenta de farmácia",
            "ah não foi sessenta e oito",
            "sessenta e oito e cinquenta",
        ),
        ("quanto foi a luz em março?", "e abril?", "maio?"),
        ("quanto gastei de luz?", "quando vence a luz?", "quanto foi a luz?"),
        ("saldo?", "e a fatura?", "e a meta da viagem?"),
        ("primeira pergunta", "segunda pergunta", "terceira pergunta"),
        ("a luz vence dia 10", "na verdade vence 15", "vence 15, 189 reais"),
        ("corrige de 500 pra 50", "não, de 50 pra 5", "muda de 5 pra 55"),
    ],
)
def test_corrections_months_and_other_questions_are_not_a_loop(texts: tuple[str, ...]) -> None:
    assert evaluate(*texts, past=2).kind is None


def test_spec_jaccard_alone_would_miss_the_spec_example() -> None:
    """Contradiction (b): literal whitespace Jaccard scores 0.33 / 0.5 / 0.25 here."""

    def jaccard(a: str, b: str) -> float:
        x = set(re.sub(r"[^\w\s]", "", a.lower()).split())
        y = set(re.sub(r"[^\w\s]", "", b.lower()).split())
        return len(x & y) / len(x | y)

    texts = ["qual o saldo?", "saldo?", "saldo mesmo?"]
    assert [round(jaccard(a, b), 2) for a, b in [texts[:2], texts[1:], texts[::2]]] == [
        0.33,
        0.5,
        0.25,
    ]
    assert evaluate(*texts, past=2).kind == "loop"


# ---------------------------------------------------------- last user message only


def test_only_the_last_user_message_counts_for_frustration() -> None:
    assert not evaluate("que bot burro", "ok, qual o total do mês?").preempt
    assert not evaluate("quero falar com um humano", "deixa, qual o saldo?").preempt


def test_assistant_messages_after_the_last_user_message_are_ignored() -> None:
    messages = [user("vc é inútil"), bot("Vi que tu tá frustrado...")]
    assert ConversationGuard.evaluate(GuardInput(messages)).kind == "frustrated"


def test_no_user_message_no_preempt() -> None:
    assert not ConversationGuard.evaluate(GuardInput([])).preempt
    assert not ConversationGuard.evaluate(GuardInput([bot("que bot burro")])).preempt
    assert not ConversationGuard.evaluate(GuardInput([Msg("system", "vsf")])).preempt


# ----------------------------------------------------------------- contradiction (a)


@pytest.mark.parametrize(
    "text",
    [
        "quero falar com uma pessoa, não com bot",
        "tem algum atendente?",
        "me passa pra um humano",
        "posso falar com o suporte?",
        "quero falar com alguém de verdade",
        "chama um atendente",
        "tem gente aí?",
        "transfere pra uma pessoa",
        "quero atendimento humano",
        "cadê o suporte",
        "quero falar com um ser humano",
        "kd o atendente",
        "alguém aí?",
        "humano pfv",
        "nao quero falar com robo",
        # asking whether a person is there at all: the canonical reply answers it
        "você é humano?",
        "vc é humano ou robô?",
        "tem gente mesmo aí ou é só robô?",
        # indirect: a phone number, a call back, the support team, one word
        "qual o 0800 de vcs?",
        "tem algum número que eu possa ligar?",
        "alguém pode me ligar? fica mais fácil pra mim",
        "me liga pfv",
        "o pessoal do suporte pode me chamar no privado?",
        "preciso que alguém olhe minha conta",
        "ATENDENTE",
        "operador",
        "falr com atendnte",
        "me passa pra um de vcs",
        "responde ai alguem da equipe, pfv",
        "tem como eu falar com quem criou a mel?",
        "sei que vc é um robô, então quem é a pessoa que eu procuro pra resolver o estorno?",
        "posso falar com a mesma moça que me atendeu semana passada?",
        "quero falar com o comercial, tenho interesse no plano pra empresa",
        "mel, me conecta com o pessoal do help desk?",
        "callback pfv, qualquer hora depois das 18h",
        "is there a human here? 🙏",
        "mel vc é ótima mas acho que meu caso precisa de um ser humano 😅",
        # a cry of dismay is no outburst in a request; a person if there is one; someone to call
        "misericórdia, meu marido foi cobrado duas vezes. quem do financeiro de vocês eu procuro?",
        "jesus amado, é muita coisa pra digitar, alguém pode me atender?",
        "se tiver me transfere",
        "vc consegue pedir pra um analista me ligar?",
        # someone to review it; closing the account as the reason for the request
        "Quero que alguém revise manualmente a divisão de despesas do mês passado, por favor",
        "oi, a gente quer cancelar o plano casal, com quem eu falo?",
        # in English and Spanish; what mel cannot do as the reason
        "transfer me to an agent please",
        "representative",
        "anyone there? like, an actual person?",
        "could someone from support give me a call? same number as this one",
        "please have someone reach out to me, it's about my refund",
        "¿puedo chatear con un agente de verdad?",
        "prefiero que me atienda una persona, nada contra vos",
        "vc não consegue ler PDF né? tem alguém da equipe que consiga importar pra mim?",
        "preciso de um atendimento humano, é sobre excluir minha conta e meus dados",
        "meu marido faleceu e preciso encerrar a conta compartilhada. Prefiro tratar disso com"
        " uma pessoa, por favor.",
        # cancelling, or a case too long for a bot, as the reason
        "preciso de um atendente pra me ajudar a cancelar o plano",
        "me passa pra alguém do suporte pra cancelar minha conta",
        "preciso de alguém da equipe, é complicado de explicar pro robô",
    ],
)
def test_human_requests_phrased_many_ways(text: str) -> None:
    assert evaluate(text).kind == "human-request"


@pytest.mark.parametrize(
    "text",
    [
        "vou falar com a minha esposa",
        "preciso falar com meu marido sobre a fatura",
        "a pessoa do banco disse que o limite aumenta mês que vem",
        "o atendente da loja cobrou errado",
        "falei com o gerente do banco hoje",
        "vou falar com o gerente do banco amanhã sobre o limite",
        "tem gente que gasta 1000 por mes em ifood kkk",
        "deu 45 por pessoa no restaurante",
        "a gente gastou 300 no fds",
        "minha esposa perguntou se vc é humano kkk",
        "meu marido é humano e esquece das contas kkk",
        "quero falar com vc sobre as metas do ano",
        "liguei no 0800 da claro e fiquei 40 min esperando atendente kkkk anota a multa de 15",
        "Itau: PIX enviado de R$ 300,00. Nao reconhece? Fale com a gente no 3003 4828",
        "o banco vai me ligar amanhã sobre o limite",
        "qual o telefone da loja? preciso trocar o presente",
        "a loja disse pra falar com o suporte deles pra trocar a tv",
        "minha mae vive dizendo q eu preciso falar com um especialista em investimento",
        # a person only supposed, someone's job, help already given
        "se eu quisesse falar com um humano eu pedia kkkk tô gostando de conversar com vc",
        "minha nora trabalha com suporte técnico numa empresa de telefonia",
        "o pessoal do suporte de vocês me ajudou semana passada, foram super atenciosos",
        "o gerente do banco quer marcar reunião comigo pra oferecer empréstimo",
        "você tem atendimento humano? não preciso agora não, só curiosidade mesmo",
        # a request taken back as a joke
        "chama o gerente kkkkk mentira, só me diz quanto sobrou do orçamento",
        "tem alguém aí? kkkk brincadeira, só queria ver se vc tava acordada. anota 30 de padaria",
        # following mel's Instagram; curiosity said as such
        "vcs tem instagram? queria seguir pra ver as dicas",
        "tem gente de verdade que lê essas mensagens? só curiosidade mesmo kkk",
        "existe algum humano por trás da mel ou é tudo IA? só curiosidade msm",
        # curiosity said first; asked only to know
        "curiosidade: tem gente de verdade lendo essas mensagens ou é tudo automático?",
        "vcs tem atendimento humano? só queria saber mesmo, por enquanto tá tudo certo",
        "alguém de vcs lê essas conversas ou é tudo automático? pergunto só por privacidade",
        "are you a real person or a bot? just curious lol",
        "my wife talked to someone at the bank about the loan",
    ],
)
def test_talk_about_other_people_is_not_a_human_request(text: str) -> None:
    assert not evaluate(text).preempt


# ------------------------------------------------------------------------ frustration


@pytest.mark.parametrize(
    "text",
    [
        "você não serve pra nada",
        "pqp",
        "que raiva desse robô",
        "ta de sacanagem",
        "affff",
        "que bot burro",
        "não entende nada",
        "mds que inferno",
        "tô perdendo a paciência",
        "VC NÃO ENTENDE!!!",
        "🤬",
        # sarcasm, fake thanks, giving up, "doesn't work", censored, regional
        "muito útil vc hein... só q não",
        "obrigado por nada mel 🙃",
        "parabéns mel 👏👏 conseguiu errar a fatura inteira",
        "vou voltar pra planilha, pelo menos ela funciona",
        "1 estrela na play store pra vcs",
        "cancela minha assinatura, não vale o que vcs cobram",
        "isso aqui não funciona de jeito nenhum",
        "p*rra de app, apagou meu lançamento",
        "VAI TOMAR NO C*",
        "bah, que bot mais tosco tchê",
        "vc é surda?",
        # typos, diminutives, paying for this, time wasted, the account deleted
        "esse bot nao fucniona",
        "bot intuil",
        "q robozinho mais burrinho",
        "tá, e pra que eu pago vcs mesmo?",
        "perdi 20 min aqui com vc pra nada",
        "excluí minha conta, tchau",
        "nossa q rapidez pra errar hein 👏👏👏",
        # formal irony, "not even for that", the basics got wrong
        "Agradecido pela atenção dispensada, que foi nenhuma.",
        "nem pra separar o que é meu e o que é dele vc serve",
        "me explica como um app de finanças consegue errar uma conta de somar",
        "mel vc me deu prejuízo, lançou a venda do cliente como despesa",
        "pfv mel só uma vez na vida acerta alguma coisa 🙏🙏",
        "a gente vai no reclame aqui falar desse app",
        # fired if mel were a person, "are you kidding me", the same mistake again, stop and
        # do the job, losing money through it, what the company took away
        "mel se vc fosse gente eu já tinha te demitido",
        "ô mel, tu tá de zoeira com a minha cara? a fatura deu 3 mil e tu diz que é 300",
        "pqp mel de novo jogou o uber em alimentação",
        "para de me mandar dica e resolve meu problema",
        "app de finanças que faz a gente perder dinheiro, ironia né",
        "vcs tiraram o relatório do plano básico pra me forçar a pagar o premium? que palhaçada",
        # not even the simplest thing; capitals that say what was asked; dismay with an insult
        "bah, que negócio mal feito, tchê. nem a fatura consegue ler",
        "EU PEDI O TOTAL DE OUTUBRO",
        "misericórdia, que app ruim, me passa pra um humano",
        "ERRADO. ERRADO. A CATEGORIA É MERCADO",
        "NÃO É PRA CRIAR UMA META, É PRA LANÇAR A COMPRA",
        # praise is the sarcasm: no gladness undoes it
        "nossa que assistente incrível, nem somar duas despesas consegue",
        "obrigadão pela ajuda zero",
        # thanks for the answer to something else; mel's error blamed
        "que maravilha, pedi o saldo e vc me mandou o resumo da semana. obrigada viu",
        "obrigada mel, agora meu marido briga comigo por causa do teu erro",
        # mel as the cause of what went wrong
        "boleto voltou e a culpa é sua, vc marcou como pago algo que eu nunca paguei",
        "por causa de vc eu e o Rafa brigamos a noite inteira",
        "a culpa da briga aqui em casa é toda sua mel. vc disse q ele gastou 1200 no bar",
        "robô de araque",
        "ô inteligência artificial de araque",
        "tô pagando pra isso?? are you kidding me",
        "how is this even 'AI'? my grandma's calculator is smarter than you",
        # told not to, and did it
        "te pedi pra NÃO importar o cartão da minha esposa e tu importou tudo",
        "pqp mel, vc errou de novo, eu que tenho que arrumar tudo",
    ],
)
def test_frustration_without_the_spec_word_list(text: str) -> None:
    assert evaluate(text).kind == "frustrated"


@pytest.mark.parametrize(
    "text",
    [
        "paguei a taxa do lixo, 80 reais",
        "gastei 50 num saco de lixo",
        "comprei uma lixeira nova, 35 reais",
        "o cartão não funciona no mercado",
        "o app do banco não funciona, como registro o gasto?",
        "o trânsito tava horrível",
        "o filme foi horrível mas gastei 40 no cinema",
        "o carro deu merda de novo, 800 no mecanico",
        "comprei uma merda de fone que quebrou, 80 reais",
        "fui burro de parcelar isso",
        "que saco de pão caro, 12 reais",
        "meu marido não entende nada de investimento",
        "gastei pra caralho em maio",
        # outbursts about something else while asking mel to do something
        "que saco, acabou o gás",
        "pqp, a enel me cobrou 412,37 esse mes, registra na luz",
        "esse governo é um lixo, gasolina a 6,50. registra 250 no posto",
        "meu chefe é um burro, vai atrasar o salario. quanto temos de reserva?",
        "porra meu cartao foi clonado, me mostra as ultimas compras do inter",
        "minha sogra pediu 500 emprestado de novo 🙄 anota como emprestimo pra ela",
        "que ótimo, o mercado aumentou de novo",
        "a loja cobrou 2x a geladeira, já abri reclamação no reclame aqui. deixa só um lançamento",
        "o RH errou meu holerite de novo. Já mandei email pra ela. Que raiva. Mel, registra 4.620",
        # the partner, not mel; another app; another company's stars
        "amor vc é mt burro, gastou 300 no bar 🙄 mel anota isso",
        "desinstalei o app do ifood pra parar de gastar kkkk quanto gastei la esse mes?",
        "dei 1 estrela pro uber, motorista horrivel. corrida foi 32,50",
        "vc pagou o barro da obra?",  # one typo from "burro", but about the partner's errand
        "pedi pra ela não comprar e ela comprou, lança 90 de sapato",
        "kkkkk que burro esse homem",
        "what a joke, the bank charged me twice. log 30 fee",
        "ai meu deus eu sou muito burra, apertei errado de novo, apaga esse ultimo",
        "como cancelo um lançamento que fiz errado?",
        # congratulations, ironic or not, to someone else
        "ai ai, governo tá de parabéns, gasolina subindo 🤡 bora cortar gasto, o que vc sugere?",
        "meu marido tá de parabéns, visse, gastou 300 em cerveja 🙃 lança em lazer no nome dele",
        "parabéns pra mim né, estourei o orçamento de roupa de novo 🤡 registra 250 na renner",
        "quem criou vc? fiquei curiosa, é uma empresa de SP?",
        "a seguradora me enrolou o dia todo, que inferno",
    ],
)
def test_negative_words_about_something_else_are_not_frustration(text: str) -> None:
    assert not evaluate(text).preempt


@pytest.mark.parametrize(
    "text",
    ["GASTEI 200 NO POSTO", "QUAL O SALDO DO MÊS?", "PAGUEI A LUZ", "BATEMOS A META!!!"],
)
def test_capitals_alone_are_not_frustration(text: str) -> None:
    assert not evaluate(text).preempt


def test_capitals_are_shouting_only_with_exclamation_marks() -> None:
    assert evaluate("QUERO FALAR COM UM ATENDENTE!!!").kind == "frustrated"
    assert evaluate("ALÔ??? RESPONDE!!!").kind == "frustrated"
    assert evaluate("QUERO FALAR COM UM ATENDENTE").kind == "human-request"
    assert evaluate("BOA NOITE, GOSTARIA DE FALAR COM UM ATENDENTE POR FAVOR").kind == (
        "human-request"
    )
    assert evaluate("Quero falar com um ATENDENTE").kind == "human-request"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (
            "minha sogra fala que app de finanças não presta, mas to provando o contrário com vc",
            None,
        ),
        (
            "minha mãe diz que robô não sabe de nada, mas vc acertou direitinho o valor da fatura",
            None,
        ),
        # the couple agrees, or the complaint is their own
        (
            "meu marido disse que era dinheiro jogado fora assinar vc. odeio admitir mas ele"
            " tava certo",
            "frustrated",
        ),
        (
            "meu marido acha que a culpa é minha mas a culpa é dessa porcaria de assistente",
            "frustrated",
        ),
    ],
)
def test_someone_elses_opinion_the_couple_contradicts_is_no_frustration(
    text: str, kind: str | None
) -> None:
    assert evaluate(text).kind == kind


def test_capitals_that_correct_what_mel_was_told_are_shouting() -> None:
    assert evaluate("EU FALEI QUARENTA E DOIS REAIS, NÃO QUATROCENTOS E DOIS").kind == (
        "frustrated"
    )
    assert (
        evaluate("EU FALEI PRO MEU MARIDO QUE NÃO ERA PRA COMPRAR, ANOTA 300 DE ROUPA").kind is None
    )
    assert evaluate("ESTOU APENAS TESTANDO O APLICATIVO").kind is None


@pytest.mark.parametrize(
    "joy",
    [
        "meu deus, que app bom",
        "sério, vc é muito boa",
        "pqp, que rápido vc é",
        "mds, finalmente organizei tudo, obrigada mel",
        "app bom demais, sério mesmo",
        "5 estrelas pra vocês",
        "eita mel, tu é arretada! já separou tudo certinho do mês",
        "MEL DEU CERTO!!! IMPORTOU TUDINHO 🎉🎉",
        "pedi a fatura e vc me mandou o extrato, aí deu certo no segundo, obrigada",
        "foi por causa de você que eu comecei a economizar, obrigada mel",
        # praise in angry words; good news shouted; getting out of the red
        "nossa mel vc é boa demais, chega dá raiva de não ter usado antes kkkk",
        "sério, você é a melhor coisa que instalei esse ano. que ódio que eu não te conheci antes",
        "caralho mel, nunca vi minha vida financeira tão organizada",
        "MEL!!! BATEMOS A META DA CASA!!! TÔ CHORANDO",
        "MEL EU FUI PEDIDA EM NOIVADO!!!!! 💍💍 cria meta casamento AGORA",
        "mel vc é foda demais, me ajudou a sair do vermelho kkkk",
        "caralho mel kkkkk vc lembrou do aniversário de namoro no orçamento, que fofa",
        "PUTA QUE PARIU CAIU O DÉCIMO TERCEIROOOO 🤑🤑",
        # amazement and curiosity
        "vcs usam chatgpt? fiquei curiosa como a mel funciona por dentro",
        "é sério que dá pra importar o extrato direto? que sinistro, não sabia",
        "pelo preço que cobram a mel vale muito a pena, tava pagando o dobro em outro app",
        # "you're the best"; better than the others
        "uai mel, cê é demais, nem acredito que fechou o mês",
        "vc é bem mais esperta que a alexa kkk, ela nunca entendia nada",
        "a mel é mais útil que o meu contador, ele é um inútil kkkk",
        "vcs são arretados demais, já separaram tudo",  # (a plural the keys had missed)
    ],
)
def test_praise_or_thanks_with_nothing_sour_is_no_frustration(joy: str) -> None:
    assert evaluate(joy).kind is None


@pytest.mark.parametrize(
    "anger",
    [
        "meu deus, que app ruim",
        "sério, vc é muito lerda",
        "pqp, errou de novo",
        "obrigada pela parceria 😒 jogou tudo na minha conta",
        "tô pagando pra isso? o chatgpt faz melhor que vc",
        "cancela minha conta, chega",
    ],
)
def test_the_same_exclamations_with_something_sour_stay_frustration(anger: str) -> None:
    assert evaluate(anger).kind == "frustrated"


def test_a_deed_blamed_on_mel_ties_the_complaint_to_mel() -> None:
    # the moods of a complaint about what mel did count even far from "vc"
    assert evaluate("vc jogou tudo na minha conta. obrigado pela parceria 😒").kind == (
        "frustrated"
    )
    assert evaluate("tá de sacanagem, somou 3 vezes a mesma compra de novo").kind == "frustrated"
    # a question is no blame; someone else's deed is theirs
    assert evaluate("vc registrou o mercado? anota também 20 de padaria").kind is None
    assert evaluate("meu sócio é uma enganação, sumiu com 2 mil. anota como perda").kind is None


def test_swearing_that_repeats_an_unanswered_question_is_at_mel() -> None:
    assert evaluate("quanto gastei de uber", "uber?", "uber caralho", past=2).kind == ("frustrated")
    assert evaluate("uber caralho", past=2).kind is None  # nothing repeated
    assert evaluate("quanto gastei de uber", "uber caralho", past=0).kind is None


def test_the_spec_caps_heuristic() -> None:
    assert _frustration.caps_abuse("VAI A MERDA, QUERO FALAR COM HUMANO")
    assert not _frustration.caps_abuse("OK VC")  # 5 chars or fewer never count
    assert not _frustration.caps_abuse("Quero falar com um ATENDENTE")


# ------------------------------------------------------------------------------ purity


class MutableMsg:
    def __init__(self, role: str, content: object) -> None:
        self.role = role
        self.content = content


def test_inputs_are_not_mutated() -> None:
    texts = ["qual o saldo?", "saldo?", "SALDO MESMO?? que porra"]
    messages = [MutableMsg("user", t) for t in texts]
    messages.insert(1, MutableMsg("assistant", "..."))
    before = [(m.role, m.content) for m in messages]
    guard_input = GuardInput(messages, 2)
    assert ConversationGuard.evaluate(guard_input).kind == "frustrated"
    assert [(m.role, m.content) for m in messages] == before
    assert guard_input.messages is messages
    assert len(messages) == 4


def test_odd_inputs_do_not_raise() -> None:
    class Exploding:
        @property
        def role(self) -> str:
            raise RuntimeError("boom")

        content = "x"

    odd: list[object] = [
        Msg("user", None),
        Msg("user", 42),
        Msg("user", b"bytes"),
        Msg("user", ["a", "list"]),
        Msg("user", ""),
        Msg("user", "\x00\x1b[31m\u200b\ufeff"),
        Msg("user", "😡" * 5000),
        Msg("user", "a" * 10_000),
        Msg(None, "x"),  # type: ignore[arg-type]
        Exploding(),
        object(),
        "not a message",
        None,
    ]
    for message in odd:
        for past in (None, -5, 0, 2, 10**18):
            verdict = ConversationGuard.evaluate(GuardInput([message], past))  # type: ignore[list-item]
            assert isinstance(verdict, GuardVerdict)
    assert not ConversationGuard.evaluate(GuardInput(None, 2)).preempt  # type: ignore[arg-type]
    assert not ConversationGuard.evaluate(GuardInput(42)).preempt  # type: ignore[arg-type]


def test_a_generator_of_messages_is_accepted() -> None:
    gen = (m for m in [user("que bot burro")])
    assert ConversationGuard.evaluate(GuardInput(gen)).kind == "frustrated"  # type: ignore[arg-type]


def test_long_messages_are_clipped_but_keep_head_and_tail() -> None:
    filler = "gastei no mercado e na farmácia " * 300
    assert evaluate("que bot burro " + filler).kind == "frustrated"
    assert evaluate(filler + " quero falar com um atendente").kind == "human-request"


def test_a_verdict_does_not_depend_on_what_the_guard_saw_before() -> None:
    """Shouting in questions with words the scores have filed as quiet (after the first
    evaluation): a shortcut that skipped the scores for quiet words missed the "???"."""
    for _ in range(2):
        assert evaluate("MEL??? CADE VC???", past=1).kind == "frustrated"
        assert evaluate("OI??? VC TA AI MEL???").kind == "frustrated"


def test_role_variants_count_as_user() -> None:
    import enum

    class Role(enum.Enum):
        USER = "user"

    for role in (Role.USER, "User", " user "):
        message = Msg(role, "que bot burro")  # type: ignore[arg-type]
        assert ConversationGuard.evaluate(GuardInput([message])).kind == "frustrated"


# -------------------------------------------------------------------- normalisation


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Vc NÃÃÃO entende, affff!!! kkkk 😡", "voce nao entende aff"),
        ("porraaaa", "porra"),
        ("kd o atendente", "cade o atendente"),
        ("hahaha q bot burro", "que bot burro"),
        ("Tá de sacanagem né?", "ta de sacanagem ne"),
        ("mds q inferno", "meu deus que inferno"),
        ("carro passsa", "carro passa"),
        ("", ""),
        # censored swears, emoji that stand for words, stretched endings
        ("p*rra de app", "porra de app"),
        ("VAI TOMAR NO C*", "vai tomar no cu"),
        ("m3rda", "merda"),
        ("p.q.p", "pqp"),
        ("R$ 67,80 c6 2x", "r 67 80 c6 2x"),
        ("deixei 1⭐", "deixei 1 estrela"),
        ("operadorrr", "operador"),
        # numbers said in words (voice messages)
        ("quatrocentos e cinquenta de luz", "450 de luz"),
        ("sessenta e oito e cinquenta", "68 e 50"),
        ("três mil e duzentos", "3200"),
        ("mil e duzentos", "1200"),
        ("10 mil", "10000"),
        ("zero oitocentos", "0 800"),
        ("um atendente", "um atendente"),
        ("vinte e um", "21"),
    ],
)
def test_normalize(raw: str, expected: str) -> None:
    assert _text.normalize(raw) == expected


def _hand_written_regexes(node: object) -> list[str]:
    """Every regex written by hand in lexicon.toml: the patterns' `regex` fields and the
    string fragments (term lists are normalised when loaded)."""
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, str) and key == "regex":
                found.append(value)
            else:
                found += _hand_written_regexes(value)
    elif isinstance(node, list):
        for item in node:
            found += _hand_written_regexes(item)
    return found


def test_lexicon_patterns_are_written_in_normalised_form() -> None:
    """Accents, doubled vowels or WhatsApp spellings in a pattern could never match."""
    spelling = {key for key in _text._SPELLING if len(key) > 1}
    spelling |= _text._NUMBER_KEYS - {"um", "uma"}  # said numbers become digits
    fragments = [
        value
        for section in _data.table("fragments").values()
        if isinstance(section, dict)
        for value in section.values()
        if isinstance(value, str)
    ]
    sources = _hand_written_regexes(_data.RAW) + fragments + [_human.BARE.pattern]
    assert len(sources) > 50
    for source in sources:
        assert source.isascii(), source
        assert not re.search(r"([aeiou])\1", source), source
        words = set(re.findall(r"(?<![a-z\\\[])[a-z]{2,}(?![a-z\[(])", source))
        assert not words & spelling, (words & spelling, source)


def test_lexicon_lookaheads_over_the_whole_message_start_at_its_start() -> None:
    """A ``(?=.*...)`` or ``(?!.*...)`` that opens an alternative must be anchored with
    ``^``: unanchored, it is tried again from every position of the message (on a
    600-character message one such pattern took 3.4 ms). After a literal it runs only where
    the literal matched, and is fine."""
    sources = _hand_written_regexes(_data.RAW)
    assert any("^(?=.*" in source or "^(?!.*" in source for source in sources)
    for source in sources:
        flat = re.sub(r"\n\s*", "", source)
        for match in re.finditer(r"\(\?[=!]\.\*", flat):
            before = flat[: match.start()]
            opens = before == "" or before.endswith(("|", "(?:"))
            assert not opens, flat[max(0, match.start() - 40) : match.end() + 40]


def test_lexicon_keys_and_terms_are_in_normalised_form() -> None:
    """Keys are written by hand in lexicon.toml; terms are normalised when loaded."""
    rules = [
        _frustration.AT_YOU,
        _frustration.DIRECTED,
        _frustration.DIRECTED_BEFORE,
        _frustration.OUTBURST,
    ]
    key_sets = [p.keys | p.requires for r in rules for p in r.patterns]
    key_sets += [p.keys | p.requires for p in _human.RULES]
    key_sets += [_human.KEYS, _loop._STOP, _frustration.ELSEWHERE.terms.keys]
    for keys in key_sets:
        for word in keys - {NUMBER}:
            assert _text.normalize(word) == word, word


def test_wrapped_lexicon_patterns_keep_their_spaces() -> None:
    """A line break inside a pattern is removed with the indentation after it: a line that
    ends a word or a group and a next line that starts a word were glued by mistake."""
    text = (GUARD_DIR / "lexicon.toml").read_text(encoding="utf-8")
    for block in re.findall(r"'''(.*?)'''", text, re.S):
        lines = block.split("\n")
        for before, after in itertools.pairwise(lines):
            nxt = after.strip()
            glued = (
                bool(nxt)
                and nxt[0].isalnum()
                and (before[-1:].isalnum() or re.search(r"[^ ]\)[?*]?$", before) is not None)
            )
            assert not glued, (before, after)


def test_every_gated_pattern_has_keys() -> None:
    """A pattern without keys would run on every message (and break the fast exit)."""
    for rules in (
        _frustration.AT_YOU,
        _frustration.DIRECTED,
        _frustration.DIRECTED_BEFORE,
        _frustration.OUTBURST,
    ):
        assert rules.keys, rules
        assert all(p.keys for p in rules.patterns)
    assert all(p.keys for p in _human.RULES)


# ------------------------------------------------------------------------------ typos


def test_one_typo_is_forgiven_on_the_words_that_allow_it() -> None:
    from guard._typos import fix_typos, one_typo_away

    assert fix_typos(["esse", "bot", "nao", "fucniona"]) == ["esse", "bot", "nao", "funciona"]
    assert fix_typos(["bot", "intuil"]) == ["bot", "inutil"]  # two letters swapped
    assert fix_typos(["falr", "com", "atendnte"]) == ["falar", "com", "atendente"]
    assert fix_typos(["barro", "lendo", "entendo"]) == ["barro", "lendo", "entendo"]
    assert fix_typos(["funcionou"]) == ["funcionou"]  # a word the lexicon knows
    assert one_typo_away("intuil", "inutil")
    assert not one_typo_away("inutil", "inutil")
    assert not one_typo_away("fncna", "funciona")


def test_typos_are_only_fixed_in_short_messages_or_ones_that_mention_mel() -> None:
    assert evaluate("esse bot nao fucniona").kind == "frustrated"
    assert evaluate("falr com atendnte").kind == "human-request"
    long_message = "o pessoal do trabalho falr com atendnte da loja amanha cedo"
    assert evaluate(long_message).kind is None
