"""The weak-signal scores (``guard._signals``): frustration and requests for a person read as
hand-set sums of hints, next to the phrase rules. Examples here are phrasings no rule names;
the corpus (``test_guard_corpus.py``) holds the rest."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guard import ConversationGuard, GuardInput, _data, _signals, asks_for_person
from guard._lexicon import _terms_of
from guard._text import normalized_words
from guard.eval import load_corpus
from tests.unit.test_guard_corpus import CORPUS


@dataclass(frozen=True, slots=True)
class Msg:
    role: str
    content: str


def kind(*texts: str, past: int | None = None) -> str | None:
    return ConversationGuard.evaluate(GuardInput([Msg("user", t) for t in texts], past)).kind


# ------------------------------------------------------------------------- the lexicon


def test_every_signal_list_is_known_and_well_formed() -> None:
    names = _signals.signal_names()
    assert {"target", "negative", "negation", "capability", "person", "staff"} <= set(names)
    for name in names:
        node = _data.table(f"signals.{name}")
        assert set(node) <= {"words", "stems", "phrases", "except"}, name
        for stem in _terms_of("x", node.get("stems", [])):
            assert " " not in stem, (name, stem)
            assert len(stem) >= 3, (name, stem)


@pytest.mark.parametrize("score", [_signals.FRUSTRATION, _signals.HUMAN])
def test_scores_have_a_threshold_and_triggers(score: _signals.Score) -> None:
    assert score.threshold > 0
    assert score.trigger
    assert any(weight < 0 for weight in score.weights.values())  # something counts against


def test_a_stem_matches_any_inflection_and_a_word_only_itself() -> None:
    negative = _signals._BIT["negative"]
    for word in ("decepcionante", "irritante", "imprestavel", "lerdeza", "ridiculamente"):
        assert _signals.mask_of(word) & (negative | _signals._BIT["upset"]), word
    assert not _signals.mask_of("planejamento") & negative


# ------------------------------------------------------------------- the bound is a bound


def _assert_bounded(raw: str) -> None:
    words = normalized_words(raw)
    for score in (_signals.FRUSTRATION, _signals.HUMAN):
        bound = score.bound(words, raw if score is _signals.FRUSTRATION else "")
        if score is _signals.FRUSTRATION:
            total, _ = _signals.score(score, words, raw, lambda: False)
        else:
            reading = _signals.read(words, "", 0, True)
            total = _signals._total(score, reading.counts, True)
        if bound >= 0:
            assert total <= bound + 1e-9, (raw, total, bound)


def test_the_bound_never_undercuts_the_score_on_the_corpus() -> None:
    for case in load_corpus(CORPUS):
        for raw in case.messages:
            _assert_bounded(raw)


_WORDS = sorted(
    {
        w
        for name in _signals.signal_names()
        for w in _terms_of("x", _data.table(f"signals.{name}").get("words", []))
    }
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([*_WORDS, "vc", "de", "do", "o", "!!!", "🙄", "👏"]), max_size=12))
def test_the_bound_never_undercuts_the_score(parts: list[str]) -> None:
    _assert_bounded(" ".join(parts))


# ------------------------------------------------------------------------ frustration


@pytest.mark.parametrize(
    "text",
    [
        "fiquei arretado com tu, mel, apagou minha meta todinha",
        "tô rindo pra não chorar com esse aplicativo",
        "que revolucionário, um app que não sabe nem o saldo 👏",
        "pede pro chatgpt te ensinar a somar",
        "R$ 12 mil de mercado? 🙄 a gente come ouro agora, né",
        "vc é uma negação completa",
        "esse sistema é medonho",
    ],
)
def test_frustration_by_hints_no_rule_names(text: str) -> None:
    assert kind(text) == "frustrated"


@pytest.mark.parametrize(
    "text",
    [
        "que raiva, o ifood errou meu pedido de novo. anota 45 de delivery",
        "vc acredita que o uber cobrou 80? um absurdo",
        "meu marido é um robô, não lembra de nada kkk anota 45 da farmácia",
        "sou meio ruim de digitar, anota 30 de padaria",
        "perfeito, obrigado mel! 👏",
        "mel, acho que vc confundiu, o uber foi ontem",
        # giving up only supposed; a complaint channel against a shop
        "mel, queria entender melhor: o que acontece com meus dados se eu cancelar?",
        "mel, se a gente desinstalar o app perde tudo?",
        "vou abrir reclamação no procon contra a operadora, lança a multa de 50",
        # not even the bank, whose failure it is
        "nem o banco consegue resolver isso, anota 30 de tarifa",
    ],
)
def test_hints_about_something_else_or_kind_words_are_not_frustration(text: str) -> None:
    assert kind(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "mel vc é doida kkkkk me chamou de rica só pq sobrou 20 reais",
        "kkkkkk tu é muito chata mel, nem deixa eu gastar em paz",
        "a mel é maluca 😂 me deu parabéns por gastar só 10 no ifood",
        "kkkkk mel tu é foda, organizou o mês todo",
    ],
)
def test_teasing_with_laughter_is_banter(text: str) -> None:
    assert kind(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "como vc é chata mel kkkk fica me lembrando da meta toda hora, mas tá certa",
        "mel é melhor que terapia, pelo menos me diz a verdade na cara: tô falida kkkk",
    ],
)
def test_laughter_weighs_against_frustration(text: str) -> None:
    assert kind(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "kkkkkk que piada esse app, apagou tudo de novo",
        "kkkk vc é doida, errou tudo de novo",  # laughing, but at what mel got wrong
        "que app doido, apagou tudo de novo kkkk",
        "vc é doida mel? registrou 500 no mercado, foi 50",  # no laughter
    ],
)
def test_teasing_words_still_count_with_a_failure_or_without_laughter(text: str) -> None:
    assert kind(text) == "frustrated"


# --------------------------------------------------------------------------- requests


@pytest.mark.parametrize(
    "text",
    [
        "Seria possível que alguma moça do atendimento me telefonasse? Fico no aguardo.",
        "como eu abro um chamado com o suporte de vcs?",
        "transfere pra alguém pfv",
        "posso falar com um atendente?",
    ],
)
def test_requests_for_a_person_by_who_how_and_whose(text: str) -> None:
    assert kind(text) == "human-request"
    assert asks_for_person(text)


@pytest.mark.parametrize(
    "text",
    [
        "preciso ligar pro meu gerente do banco, quanto falta do financiamento?",
        "a atendente da renner me empurrou um seguro de 19,90, lança aí",
        "humano é bicho complicado né mel kkkk gastei 200 em roupa que nem precisava",
        "liguei no 0800 da claro e a atendente resolveu, anota 99 de internet",
    ],
)
def test_someone_elses_people_and_stories_are_not_requests(text: str) -> None:
    assert kind(text) is None


# ------------------------------------------------------------------------------- loop


def test_a_third_rephrasing_in_unknown_words_is_the_same_question() -> None:
    assert (
        kind("quanto sobrou esse mês?", "sobrou quanto?", "tem grana sobrando ainda?", past=2)
        == "loop"
    )


@pytest.mark.parametrize(
    "texts",
    [
        ("quanto deu o uber?", "uber total?", "qual o saldo?"),
        ("quanto deu o uber?", "uber total?", "obrigado!"),
        ("quanto deu o uber?", "uber total?", "e o ifood?"),
    ],
)
def test_another_topic_a_thanks_or_a_follow_up_is_not(texts: tuple[str, ...]) -> None:
    assert kind(*texts, past=2) is None


@pytest.mark.parametrize(
    "texts",
    [
        # one pair asks the same thing, no pair conflicts: asked again in other words
        (
            "quanto custa a assinatura?",
            "qual o valor do plano?",
            "to perguntando o preço pra continuar usando",
        ),
        (
            "cancela minha assinatura",
            "não quero mais pagar o plano",
            "como faço pra parar a cobrança mensal?",
        ),
        (
            "vcs guardam meus dados bancários?",
            "minha senha do banco fica salva com vcs?",
            "só quero saber se vcs armazenam minha senha do banco",
        ),
    ],
)
def test_one_similar_pair_and_no_conflict_is_a_loop(texts: tuple[str, ...]) -> None:
    assert kind(*texts, past=2) == "loop"


@pytest.mark.parametrize(
    "texts",
    [
        # "dia 24" is a date, not a third amount beside "3 mil" / "3000"
        (
            "cria uma meta de 3 mil pro natal",
            "quero juntar 3000 até dia 24, faz a meta",
            "meta natal: 3 mil. consegue criar?",
        ),
        # records the couple cannot find
        (
            "meus lançamentos de ontem sumiram?",
            "cadê o que eu registrei de manhã",
            "não tô achando os gastos que mandei",
        ),
        # where the trip goes is the trip
        (
            "quanto falta pra meta da viagem?",
            "e a meta de viajar, como tá?",
            "tamo perto de juntar o dinheiro pra Salvador?",
        ),
        # mel's own plan
        ("qual o preço do premium?", "quanto custa o plano?", "o plano pago sai quanto por mês?"),
        # an instalment purchase quoted by its total and by its instalments; undoing
        (
            "lança 3x de 200 no cartão, tênis",
            "tênis 600 reais parcelado em 3 vezes no crédito",
            "mel registra o tênis: 3 parcelas de 200",
        ),
        ("como desfaz", "desfazer o ultimo", "volta o q eu fiz"),
        (
            "parcela o uniforme em 3x",
            "lança o uniforme em 3 parcelas de 120",
            "uniforme 360 em 3 vezes",
        ),
        # a monthly fee is the school's
        (
            "a mensalidade de fevereiro já foi registrada?",
            "vc lançou a mensalidade de fevereiro?",
            "a escola de fevereiro ta lançada ou nao?",
        ),
        # voice notes; connecting the bank
        (
            "vc entende áudio?",
            "posso mandar mensagem de voz?",
            "se eu gravar falando o gasto vc registra?",
        ),
        (
            "o open finance é seguro?",
            "vcs guardam minha senha do banco?",
            "é arriscado conectar minha conta?",
        ),
    ],
)
def test_round_32_rephrasings_are_a_loop(texts: tuple[str, ...]) -> None:
    assert kind(*texts, past=2) == "loop"


@pytest.mark.parametrize(
    "texts",
    [
        ("lança o tênis em 3x de 200", "não, 3x de 250", "isso, 3x de 250 no crédito"),
        ("parcelei o celular em 10x de 150", "não, foi 12x de 125", "corrige pra 12 parcelas"),
    ],
)
def test_a_corrected_instalment_is_not_a_loop(texts: tuple[str, ...]) -> None:
    assert kind(*texts, past=2) is None


def test_different_dates_are_different_questions() -> None:
    assert (
        kind("quanto gastei no dia 5?", "quanto saiu no dia 10?", "e dia 15, quanto foi?", past=2)
        is None
    )


@pytest.mark.parametrize(
    "texts",
    [
        # the answer came
        ("qual o saldo?", "saldo?", "ah vi aqui, valeu mel"),
        ("qual o total do mês?", "total do mês?", "ah blz, apareceu agora, obrigado"),
        # a reaction in between, then something new about the same topic
        ("quanto gastamos com ifood", "nossa, muito", "vamos definir orçamento de 300 pra ifood"),
        # the step is done and the couple moves on
        (
            "quero importar o extrato do bradesco",
            "pronto, mandei o arquivo",
            "agora como eu vejo os gastos que vieram dele?",
        ),
    ],
)
def test_one_similar_pair_is_not_a_loop_when_the_answer_came_or_one_says_nothing(
    texts: tuple[str, ...],
) -> None:
    assert kind(*texts, past=2) is None


def test_one_template_asked_about_different_things_is_not_a_loop() -> None:
    texts = ("gastos com pilates em maio", "gastos com natação em maio", "gastos com kumon em maio")
    assert kind(*texts, past=2) is None
    synonyms = (
        "quanto gastei no mercado",
        "quanto gastei no supermercado",
        "quanto gastei no assaí",
    )
    assert kind(*synonyms, past=2) == "loop"


def test_amounts_in_thousands_are_one_value() -> None:
    texts = (
        "tem como colocar a meta do casamento em 30 mil",
        "muda a meta do casamento pra 30k",
        "meta casamento = 30.000",
    )
    assert kind(*texts, past=2) == "loop"
