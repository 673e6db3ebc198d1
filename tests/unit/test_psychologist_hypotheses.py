"""Hypothesis batches: every hypothesis cites evidence of THIS session, or the whole batch
is rejected with a text naming each problem and its hypothesis."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.psychologist import (
    DEFAULT_AGENTS,
    EMIT_HYPOTHESES,
    EmitHypothesesArgs,
    HypothesisIn,
    emit_hypotheses_tool,
    validate_batch,
)
from agent.psychologist.hypotheses import BatchResult

SESSION = {"1700000000000-0", "1700000000001-0", "1700000000002-0"}
OTHER_SESSION = {"1600000000000-0"}
KNOWN = SESSION | OTHER_SESSION
TARGETS = [agent.name for agent in DEFAULT_AGENTS]


def hypothesis(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "target_agent": "budget_agent",
        "title": "Total sem ferramenta",
        "description": "A mel citou um total sem chamar budgetTotal.",
        "confidence": 80,
        "evidence_event_ids": ["1700000000001-0"],
    }
    base.update(changes)
    return {key: value for key, value in base.items() if value is not ...}


def check(*items: dict[str, Any], abnormal: bool = False, **kwargs: Any) -> BatchResult:
    kwargs.setdefault("known_event_ids", KNOWN)
    return validate_batch(
        json.dumps({"hypotheses": list(items)}),
        session_event_ids=SESSION,
        abnormal=abnormal,
        **kwargs,
    )


def test_a_valid_batch_is_accepted() -> None:
    result = check(
        hypothesis(),
        hypothesis(target_agent="guard", confidence=0, evidence_event_ids=["1700000000000-0"]),
        hypothesis(confidence=100, termination_analysis="  "),
    )

    assert result.ok
    assert result.error == ""
    assert result.problems == []
    assert [h.confidence for h in result.hypotheses] == [80, 0, 100]
    assert all(isinstance(h, HypothesisIn) for h in result.hypotheses)
    assert result.hypotheses[2].termination_analysis is None  # blank means none


def test_an_unknown_event_id_is_named_with_its_hypothesis() -> None:
    result = check(hypothesis(evidence_event_ids=["1700000000001-0", "9999999999999-9"]))

    assert not result.ok
    assert result.hypotheses == []
    assert "hypotheses[0].evidence_event_ids[1]" in result.error
    assert "'9999999999999-9' não existe" in result.error


def test_an_event_of_another_session_is_rejected_as_such() -> None:
    result = check(hypothesis(evidence_event_ids=["1600000000000-0"]))

    assert not result.ok
    assert "'1600000000000-0' pertence a outra sessão" in result.error
    assert "hypotheses[0]" in result.error


def test_without_the_known_ids_an_outside_id_is_still_rejected() -> None:
    result = check(hypothesis(evidence_event_ids=["1600000000000-0"]), known_event_ids=None)

    assert not result.ok
    assert "'1600000000000-0' não existe nesta sessão" in result.error


@pytest.mark.parametrize("evidence", [[], ...])
def test_evidence_is_required(evidence: Any) -> None:
    result = check(hypothesis(evidence_event_ids=evidence))

    assert not result.ok
    assert "hypotheses[0].evidence_event_ids" in result.error


@pytest.mark.parametrize("confidence", [-1, 101, 1000])
def test_confidence_out_of_range_is_rejected(confidence: int) -> None:
    result = check(hypothesis(confidence=confidence))

    assert not result.ok
    assert "hypotheses[0].confidence" in result.error
    assert "0 a 100" in result.error
    assert str(confidence) in result.error


@pytest.mark.parametrize("confidence", [72.5, "72", 72.0, True, None])
def test_confidence_must_be_a_json_integer(confidence: Any) -> None:
    result = check(hypothesis(confidence=confidence))

    assert not result.ok
    assert "hypotheses[0].confidence: deve ser um número inteiro" in result.error
    assert json.dumps(confidence) in result.error  # what was received


def test_an_abnormal_close_needs_a_termination_analysis_somewhere() -> None:
    rejected = check(hypothesis(), hypothesis(), abnormal=True, cause="worker_lost")

    assert not rejected.ok
    assert "termination_analysis" in rejected.error
    assert "worker_lost" in rejected.error

    accepted = check(
        hypothesis(),
        hypothesis(termination_analysis="O worker caiu e o casal ficou sem resposta."),
        abnormal=True,
    )
    assert accepted.ok
    assert accepted.hypotheses[1].termination_analysis is not None


def test_a_normal_close_does_not_need_a_termination_analysis() -> None:
    assert check(hypothesis(), abnormal=False).ok


def test_one_bad_hypothesis_rejects_the_whole_batch_and_every_problem_is_listed() -> None:
    result = check(
        hypothesis(),
        hypothesis(confidence=72.5),
        hypothesis(evidence_event_ids=["nope"], title=""),
        abnormal=True,
    )

    assert not result.ok
    assert result.hypotheses == []  # the valid first one is not accepted alone
    assert len(result.problems) == 4
    assert result.error.startswith("Lote rejeitado: nenhuma hipótese foi registrada. 4 problemas:")
    assert "hypotheses[0]" not in result.error
    for expected in (
        "hypotheses[1].confidence",
        "hypotheses[2].title: não pode ser vazio",
        "hypotheses[2].evidence_event_ids[0]: o evento 'nope' não existe",
        "lote: a sessão terminou de forma anormal",
    ):
        assert expected in result.error
    assert result.error.rstrip().endswith(f"chame {EMIT_HYPOTHESES} de novo com o lote inteiro.")
    assert all(f"- {problem}" in result.error for problem in result.problems)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ("{not json", "não são um JSON válido"),
        ("[]", "objeto JSON"),
        ("{}", "hypotheses: campo obrigatório ausente"),
        ('{"hypotheses": []}', "a lista está vazia"),
        ('{"hypotheses": "x"}', "deve ser uma lista"),
        ('{"hypotheses": [1]}', "hypotheses[0]: cada hipótese deve ser um objeto"),
    ],
)
def test_malformed_arguments_are_rejected_with_a_reason(arguments: str, expected: str) -> None:
    result = validate_batch(arguments, session_event_ids=SESSION, abnormal=False)

    assert not result.ok
    assert expected in result.error


def test_missing_and_unknown_fields_are_named() -> None:
    result = check(hypothesis(title=..., mood="sad"))

    assert "hypotheses[0].title: campo obrigatório ausente" in result.error
    assert "hypotheses[0].mood: campo desconhecido" in result.error


def test_the_target_must_be_a_known_agent_and_is_normalised() -> None:
    rejected = check(hypothesis(target_agent="banana_agent"), allowed_targets=TARGETS)

    assert not rejected.ok
    assert "hypotheses[0].target_agent: agente desconhecido 'banana_agent'" in rejected.error

    accepted = check(hypothesis(target_agent=" Budget_Agent "), allowed_targets=TARGETS)
    assert accepted.ok
    assert accepted.hypotheses[0].target_agent == "budget_agent"


def test_duplicate_evidence_ids_are_kept_once() -> None:
    ids = ["1700000000001-0", "1700000000001-0", "1700000000000-0"]

    result = check(hypothesis(evidence_event_ids=ids))

    assert result.hypotheses[0].evidence_event_ids == ["1700000000001-0", "1700000000000-0"]


def test_a_parsed_mapping_is_accepted_too() -> None:
    result = validate_batch(
        {"hypotheses": [hypothesis()]}, session_event_ids=list(SESSION), abnormal=False
    )

    assert result.ok


def test_the_tool_schema_comes_from_the_models() -> None:
    tool = emit_hypotheses_tool()
    function = tool["function"]
    item = function["parameters"]["$defs"]["HypothesisIn"]

    assert tool["type"] == "function"
    assert function["name"] == EMIT_HYPOTHESES
    assert function["parameters"]["required"] == ["hypotheses"]
    assert function["parameters"]["properties"]["hypotheses"]["minItems"] == 1
    assert item["properties"]["confidence"] == {
        "description": item["properties"]["confidence"]["description"],
        "type": "integer",
        "minimum": 0,
        "maximum": 100,
    }
    assert item["properties"]["evidence_event_ids"]["minItems"] == 1
    assert set(item["required"]) == {
        "target_agent",
        "title",
        "description",
        "confidence",
        "evidence_event_ids",
    }
    assert item["properties"]["termination_analysis"]["type"] == "string"


def test_the_args_model_rejects_an_empty_batch() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        EmitHypothesesArgs.model_validate({"hypotheses": []})
