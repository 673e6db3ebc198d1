"""Tools the agent offers the model: the registry and the finance tools."""

from agent.tools.base import Tool, ToolContext, ToolOutcome, ToolRegistry, validation_error_text
from agent.tools.finance import default_registry, finance_tools

__all__ = [
    "Tool",
    "ToolContext",
    "ToolOutcome",
    "ToolRegistry",
    "default_registry",
    "finance_tools",
    "validation_error_text",
]
