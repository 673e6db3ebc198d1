"""agent: the conversation brain — AgentChat, the LLM client and profiles, the tools."""

from agent.chat import AgentChat, AskResult, SystemPrompt, ToolCallRecord
from agent.dates import SAO_PAULO, now_sao_paulo
from agent.errors import (
    AgentError,
    LedgerError,
    LLMBadResponse,
    LLMError,
    LLMTimeout,
    LLMUnavailable,
    ProfileError,
    ToolError,
)
from agent.ledger import Expense, Goal, Ledger, MonthBudgets, MonthSpending, NewExpense
from agent.ledger_import import ImportLineError, ImportReport, import_csv
from agent.llm import (
    Endpoint,
    LLMClient,
    LLMResponse,
    OpenAICompatibleLLM,
    Usage,
    cost_micro_usd,
)
from agent.messages import ChatMessage, Role, ToolCallRequest
from agent.money import format_brl, parse_money
from agent.outcomes import Outcome
from agent.profiles import (
    PROFILE_NAMES,
    LLMProfile,
    LLMProfiles,
    load_profiles,
    load_profiles_from_env,
)
from agent.prompts import (
    ASSISTANT_UNAVAILABLE,
    LLM_FAILURE_REPLY,
    TOOL_LOOP_APOLOGY,
    build_system_prompt,
)
from agent.routing import (
    ContinuityClassifier,
    ContinuitySignal,
    DomainAgent,
    DomainAgents,
    EnterpriseRouter,
    RouteDecision,
    RouteState,
    SessionControl,
    SessionControlConfig,
    TurnResult,
    build_domain_agents,
    build_session_control,
)
from agent.tools import Tool, ToolContext, ToolOutcome, ToolRegistry, default_registry

__all__ = [
    "ASSISTANT_UNAVAILABLE",
    "LLM_FAILURE_REPLY",
    "PROFILE_NAMES",
    "SAO_PAULO",
    "TOOL_LOOP_APOLOGY",
    "AgentChat",
    "AgentError",
    "AskResult",
    "ChatMessage",
    "ContinuityClassifier",
    "ContinuitySignal",
    "DomainAgent",
    "DomainAgents",
    "Endpoint",
    "EnterpriseRouter",
    "Expense",
    "Goal",
    "ImportLineError",
    "ImportReport",
    "LLMBadResponse",
    "LLMClient",
    "LLMError",
    "LLMProfile",
    "LLMProfiles",
    "LLMResponse",
    "LLMTimeout",
    "LLMUnavailable",
    "Ledger",
    "LedgerError",
    "MonthBudgets",
    "MonthSpending",
    "NewExpense",
    "OpenAICompatibleLLM",
    "Outcome",
    "ProfileError",
    "Role",
    "RouteDecision",
    "RouteState",
    "SessionControl",
    "SessionControlConfig",
    "SystemPrompt",
    "Tool",
    "ToolCallRecord",
    "ToolCallRequest",
    "ToolContext",
    "ToolError",
    "ToolOutcome",
    "ToolRegistry",
    "TurnResult",
    "Usage",
    "build_domain_agents",
    "build_session_control",
    "build_system_prompt",
    "cost_micro_usd",
    "default_registry",
    "format_brl",
    "import_csv",
    "load_profiles",
    "load_profiles_from_env",
    "now_sao_paulo",
    "parse_money",
]
