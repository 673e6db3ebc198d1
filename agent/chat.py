"""AgentChat: one conversational turn — guard first, then the model and its tools.

Logs carry no message text and no phone number (the thread id holds one): the caller
binds its own masked context with ``structlog.contextvars``.

``ask`` never raises for what can go wrong with the model: a preempting guard, no model
configured, the tool-round bound and LLM failures each give a canonical PT-BR reply and
a distinct ``outcome``, so the caller can always deliver something and log why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import structlog

from agent.dates import now_sao_paulo
from agent.errors import LLMError, LLMUnavailable
from agent.ledger import Ledger
from agent.llm import LLMClient, Usage
from agent.messages import ChatMessage
from agent.outcomes import Outcome
from agent.prompts import (
    ASSISTANT_UNAVAILABLE,
    LLM_FAILURE_REPLY,
    TOOL_LOOP_APOLOGY,
    build_system_prompt,
)
from agent.tools.base import ToolContext, ToolRegistry
from guard import ConversationGuard, GuardInput, GuardVerdict

__all__ = ["AgentChat", "AskResult", "SystemPrompt", "ToolCallRecord"]

log = structlog.get_logger(__name__)

SystemPrompt = str | Callable[[datetime], str]
"""A fixed system prompt, or one built for the turn's date."""


@dataclass(frozen=True)
class ToolCallRecord:
    """A tool call made during the turn: its arguments, and its result or error text."""

    name: str
    arguments: dict[str, Any]
    result: Any
    error: str | None
    call_id: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class AskResult:
    """The outcome of :meth:`AgentChat.ask`.

    ``llm_calls`` counts the requests made, failed ones included; ``usage`` sums what
    the answered ones reported (``usage.calls`` = answered calls).
    """

    reply: ChatMessage
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    verdict: GuardVerdict | None = None
    usage: Usage = field(default_factory=Usage)
    llm_calls: int = 0
    outcome: Outcome = Outcome.AGENT

    @property
    def preempted(self) -> bool:
        return self.outcome.preempted

    @property
    def ran_tools(self) -> bool:
        """Whether any tool ran successfully this turn (resets ``pastTurnsWithoutToolCall``)."""
        return any(call.ok for call in self.tool_calls)


def _assistant(text: str) -> ChatMessage:
    return ChatMessage(role="assistant", content=text)


def _this_turns_images(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """Only the last user message keeps its images (the LLM client sends them to a
    ``vision: true`` profile only); earlier messages are sent as text."""
    last = max((i for i, message in enumerate(messages) if message.role == "user"), default=-1)
    return [m if i == last else m.without_images() for i, m in enumerate(messages)]


class AgentChat:
    """mel's conversation service.

    ``llm=None`` means no endpoint is configured: every turn the guard does not answer gets
    :data:`~agent.prompts.ASSISTANT_UNAVAILABLE`. ``ledger=None`` leaves the tools without
    data (they report it to the model).
    """

    def __init__(
        self,
        llm: LLMClient | None,
        tools: ToolRegistry,
        ledger: Ledger | None,
        *,
        name: str = "mel",
        profile: str = "agent",
        system_prompt: SystemPrompt | None = None,
        max_tool_rounds: int = 4,
        clock: Callable[[], datetime] = now_sao_paulo,
    ) -> None:
        if max_tool_rounds < 0:
            raise ValueError("max_tool_rounds must be >= 0")
        self.llm = llm
        self.tools = tools
        self.ledger = ledger
        self.name = name
        self.profile = profile
        self.system_prompt = system_prompt
        self.max_tool_rounds = max_tool_rounds
        self.clock = clock

    async def ask(
        self,
        messages: Sequence[ChatMessage],
        past_turns_without_tool_call: int | None = None,
        *,
        thread_id: str | None = None,
        household_id: str | None = None,
    ) -> AskResult:
        """Answer the conversation's last turn, the guard first (spec 023).

        When the guard preempts, its canonical reply is returned with zero LLM and zero
        tool calls. Otherwise :meth:`answer`.
        """
        verdict = ConversationGuard.evaluate(
            GuardInput(
                messages=list(messages), past_turns_without_tool_call=past_turns_without_tool_call
            )
        )
        if verdict.preempt and verdict.kind is not None:
            log.info("agent_chat.preempted", kind=verdict.kind)
            return AskResult(
                _assistant(verdict.response or ""),
                verdict=verdict,
                outcome=Outcome.preempt(verdict.kind),
            )
        return await self.answer(messages, thread_id=thread_id, household_id=household_id)

    async def answer(
        self,
        messages: Sequence[ChatMessage],
        *,
        thread_id: str | None = None,
        household_id: str | None = None,
    ) -> AskResult:
        """The model's answer with the tools, for at most ``max_tool_rounds`` rounds — no
        guard (for a caller that has evaluated it already). ``household_id`` defaults to
        the household of the thread's user number (the last part of ``thread_id``), else
        ``"default"``. The writer's number is the tools' actor: an expense recorded without
        another payer was paid by whoever wrote (a couple is two people)."""
        if self.llm is None:
            log.info("agent_chat.unavailable", reason="no LLM configured")
            return AskResult(_assistant(ASSISTANT_UNAVAILABLE), outcome=Outcome.UNAVAILABLE)
        return await _Turn(self, self.llm, thread_id, household_id).run(messages)

    def system_message(self, now: datetime) -> ChatMessage:
        prompt = self.system_prompt
        if prompt is None:
            text = build_system_prompt(now, name=self.name)
        else:
            text = prompt if isinstance(prompt, str) else prompt(now)
        return ChatMessage(role="system", content=text)


class _Turn:
    """The tool loop of one ``ask``: state that lives for one turn only."""

    def __init__(
        self,
        chat: AgentChat,
        llm: LLMClient,
        thread_id: str | None,
        household_id: str | None,
    ) -> None:
        self.chat = chat
        self.llm = llm
        self.thread_id = thread_id
        self.now = chat.clock()
        self.actor = thread_id.rsplit(":", 1)[-1] if thread_id else None
        self.household_id = household_id
        self.records: list[ToolCallRecord] = []
        self.usage = Usage()
        self.attempts = 0

    async def _context(self) -> ToolContext:
        """Built on the first tool call only: a turn without tools never touches Redis."""
        if self.household_id is None:
            if self.actor and self.chat.ledger is not None:
                self.household_id = await self.chat.ledger.household_for(self.actor)
            else:
                self.household_id = self.actor or "default"
        return ToolContext(self.household_id, self.chat.ledger, self.now, self.actor)

    def _result(self, reply: str | ChatMessage, outcome: Outcome) -> AskResult:
        message = reply if isinstance(reply, ChatMessage) else _assistant(reply)
        return AskResult(message, list(self.records), None, self.usage, self.attempts, outcome)

    async def run(self, messages: Sequence[ChatMessage]) -> AskResult:
        chat = self.chat
        conversation = [chat.system_message(self.now), *_this_turns_images(messages)]
        schemas = chat.tools.schemas() or None
        rounds = 0
        while True:
            self.attempts += 1
            try:
                response = await self.llm.complete(chat.profile, conversation, tools=schemas)
            except LLMUnavailable as exc:
                log.warning("agent_chat.unavailable", reason=exc.reason, profile=exc.profile)
                return self._result(ASSISTANT_UNAVAILABLE, Outcome.UNAVAILABLE)
            except LLMError as exc:
                log.warning(
                    "agent_chat.llm_failed",
                    error=type(exc).__name__,
                    reason=exc.reason,
                    profile=exc.profile,
                    llm_calls=self.attempts,
                )
                ended = Outcome.OUTAGE if exc.transient else Outcome.ERROR
                return self._result(LLM_FAILURE_REPLY, ended)
            self.usage += response.usage
            message = response.message
            if not message.tool_calls:
                if not message.content.strip():
                    log.warning("agent_chat.llm_failed", error="empty reply", profile=chat.profile)
                    return self._result(LLM_FAILURE_REPLY, Outcome.ERROR)
                self._log_reply(Outcome.AGENT)
                return self._result(message, Outcome.AGENT)
            if rounds >= chat.max_tool_rounds:
                self._log_reply(Outcome.TOOL_LIMIT)
                return self._result(TOOL_LOOP_APOLOGY, Outcome.TOOL_LIMIT)
            rounds += 1
            conversation.append(message)
            ctx = await self._context()
            for call in message.tool_calls:
                outcome = await chat.tools.run(call.name, call.arguments, ctx)
                self.records.append(
                    ToolCallRecord(
                        call.name, outcome.arguments, outcome.result, outcome.error, call.id
                    )
                )
                conversation.append(
                    ChatMessage(role="tool", tool_call_id=call.id, content=outcome.content())
                )

    def _log_reply(self, outcome: Outcome) -> None:
        log.info(
            "agent_chat.answered",
            outcome=outcome,
            llm_calls=self.attempts,
            tools=[record.name for record in self.records],
            tool_errors=sum(1 for record in self.records if not record.ok),
            prompt_tokens=self.usage.prompt_tokens,
            completion_tokens=self.usage.completion_tokens,
            cost_micro_usd=self.usage.cost_micro_usd,
        )
