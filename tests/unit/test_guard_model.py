"""The guard's fallback model (``guard._model``, ``guard/model.json``, ``guard.train``): it
speaks only where the rules say none and found something to look at, with the rules' own
verdicts, never against a rule that set a message aside, and the shipped model is what
training on the corpus gives."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from guard import (
    GUARD_RESPONSE_FRUSTRATED,
    GUARD_RESPONSE_HUMAN_REQUEST,
    ConversationGuard,
    GuardInput,
    GuardVerdict,
    _guard,
    train,
)
from guard._features import SIGNAL
from guard._model import model_kind

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "guard_corpus.jsonl"
MODEL = ROOT / "guard" / "model.json"


@dataclass(frozen=True, slots=True)
class Msg:
    role: str
    content: str


def evaluate(*texts: str, past: int | None = None) -> GuardVerdict:
    return ConversationGuard.evaluate(GuardInput([Msg("user", t) for t in texts], past))


def rules_alone(
    monkeypatch: pytest.MonkeyPatch, *texts: str, past: int | None = None
) -> str | None:
    with monkeypatch.context() as m:
        m.setattr(_guard, "model_kind", lambda words: None)
        return evaluate(*texts, past=past).kind


# Rule misses of the blind batches 74-86 and 104-138, which a model trained without them caught.
@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("sinceramente, nem sei pq a gente paga por isso", "frustrated"),
        ("tô pagando premium pra isso? tá de palhaçada", "frustrated"),
        ("tu é um robô de finanças que não sabe o que é fatura? fala sério", "frustrated"),
        ("essa tal de inteligência artificial só se for no nome né", "frustrated"),
        ("me coloca em contato com quem cuida das assinaturas", "human-request"),
        ("oi mel td bem? me ve um atendente ai rapidinho", "human-request"),
    ],
)
@pytest.mark.pure_python
def test_the_model_catches_phrasings_the_rules_miss(
    monkeypatch: pytest.MonkeyPatch, text: str, kind: str
) -> None:
    assert rules_alone(monkeypatch, text) is None
    verdict = evaluate(text)
    assert verdict.kind == kind
    reply = GUARD_RESPONSE_FRUSTRATED if kind == "frustrated" else GUARD_RESPONSE_HUMAN_REQUEST
    assert verdict == GuardVerdict(True, verdict.kind, reply)


@pytest.mark.parametrize(
    "text",
    [
        # ordinary finance talk
        "qual o total do mês?",
        "gastei 50 no mercado",
        "paguei 120 de luz",
        "quanto sobrou esse mês?",
        "me mostra o resumo da semana",
        "o nubank fechou a fatura",
        "minha mãe me mandou 200",
        "anota 35 de uber",
        "cancela o lançamento de ontem",
        # hard negatives: thanks and praise, swearing at something else, people who are not
        # mel's team
        "obrigado mel",
        "valeu mel",
        "tchau",
        "valeu, era só isso",
        "pqp, que rápido vc é",
        "vc é foda mel, sério, nunca consegui organizar tanto a grana",
        "me ajuda com uma coisa",
        "a enel me cobrou 412, que absurdo",
        "minha sogra é uma pessoa difícil",
        "minha mae vive dizendo q eu preciso falar com um especialista em investimento",
        "vou ligar pro suporte da vivo",
        "uber caralho",
        "terceira pergunta",
        "",
    ],
)
def test_ordinary_messages_and_hard_negatives_stay_none(text: str) -> None:
    assert evaluate(text).kind is None


@pytest.mark.pure_python
def test_the_model_never_overrides_the_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_guard, "model_kind", lambda words: "frustrated")
    assert evaluate("quero falar com um atendente").kind == "human-request"
    assert evaluate("qual o saldo?", "saldo?", "saldo mesmo?", past=2).kind == "loop"
    assert evaluate("vou ligar pro suporte da vivo").kind == "frustrated"  # the rules say none
    monkeypatch.setattr(_guard, "model_kind", lambda words: "human-request")
    assert evaluate("esse bot é uma porra, não funciona NADA").kind == "frustrated"
    assert evaluate("vou ligar pro suporte da vivo").kind == "human-request"


@pytest.mark.pure_python
def test_what_a_rule_set_aside_the_model_cannot_take_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """Praise with nothing sour is no frustration, someone else's advice no request, whatever
    the model says."""
    monkeypatch.setattr(_guard, "model_kind", lambda words: "frustrated")
    assert evaluate("pqp, que rápido vc é").kind is None
    monkeypatch.setattr(_guard, "model_kind", lambda words: "human-request")
    text = "minha mae vive dizendo q eu preciso falar com um especialista em investimento"
    assert evaluate(text).kind is None


@pytest.mark.pure_python
def test_a_message_no_rule_looks_at_never_reaches_the_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[list[str]] = []

    def model_kind(words: list[str]) -> str:
        asked.append(words)
        return "frustrated"

    monkeypatch.setattr(_guard, "model_kind", model_kind)
    assert evaluate("gastei 50 no mercado").kind is None
    assert evaluate("qual o total do mês?").kind is None
    assert asked == []
    assert evaluate("vou ligar pro suporte da vivo").kind == "frustrated"
    assert asked[0][:6] == ["vou", "ligar", "pro", "suporte", "da", "vivo"]
    assert any(word.startswith(SIGNAL) for word in asked[0])  # and the rules' signals


def test_no_words_no_model() -> None:
    assert model_kind([]) is None


def test_the_shipped_model_was_trained_on_the_corpus_as_it_reads_today() -> None:
    """Fails after corpus lines are added, or the normalisation or the signals change, without
    retraining: ``python -m guard.train tests/data/guard_corpus.jsonl``. (``--check`` would
    retrain to compare the weights too; the test below shows that it does, on a small corpus.)"""
    assert train.main([str(CORPUS), "--out", str(MODEL), "--check-inputs"]) == 0


def test_train_writes_then_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = CORPUS.read_text(encoding="utf-8").splitlines()
    small = tmp_path / "small.jsonl"
    # about 400 lines, whatever the corpus grows to: this test trains seven times
    small.write_text("\n".join(lines[:: max(1, len(lines) // 400)]) + "\n", encoding="utf-8")
    out = tmp_path / "model.json"
    assert train.main([str(small), "--out", str(out), "--check"]) == 1  # no file yet
    assert train.main([str(small), "--out", str(out)]) == 0
    first = out.read_text(encoding="utf-8")
    assert train.main([str(small), "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == first  # deterministic
    assert train.main([str(small), "--out", str(out), "--check"]) == 0
    out.write_text(first.replace('"bias":[', '"bias":[1'), encoding="utf-8")
    assert train.main([str(small), "--out", str(out), "--check"]) == 1
    out.write_text(first.replace('"bias":[-', '"bias":[-1'), encoding="utf-8")
    assert train.main([str(small), "--out", str(out), "--check"]) == 1  # a weight changed
    out.write_text(first.replace("\n", "\n "), encoding="utf-8")
    assert train.main([str(small), "--out", str(out), "--check"]) == 0  # only the layout
    assert train.main([str(tmp_path / "missing.jsonl"), "--out", str(out)]) == 2
    capsys.readouterr()


def test_check_inputs_notices_new_lines_new_signals_and_new_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = CORPUS.read_text(encoding="utf-8").splitlines()
    small = tmp_path / "small.jsonl"
    small.write_text("\n".join(lines[:: max(1, len(lines) // 200)]) + "\n", encoding="utf-8")
    out = tmp_path / "model.json"
    check = [str(small), "--out", str(out), "--check-inputs"]
    assert train.main(check) == 1  # no file yet
    assert train.main([str(small), "--out", str(out)]) == 0
    assert train.main(check) == 0
    out.write_text(out.read_text(encoding="utf-8").replace('"bias":[-', '"bias":[-1'), "utf-8")
    assert train.main(check) == 0  # (a hand-edited weight: only --check retrains and sees it)
    with monkeypatch.context() as m:  # the lexicon reads the messages differently
        m.setattr(train, "model_input", lambda raw, words: ([*words, "§new"], False))
        assert train.main(check) == 1
    with monkeypatch.context() as m:
        m.setattr(train, "EPOCHS", train.EPOCHS + 1)
        assert train.main(check) == 1
    small.write_text(small.read_text(encoding="utf-8") + lines[1] + "\n", encoding="utf-8")
    assert train.main(check) == 1
    out.write_text("not json", encoding="utf-8")
    assert train.main(check) == 1
    assert train.main([str(tmp_path / "missing.jsonl"), "--out", str(out), "--check-inputs"]) == 2
