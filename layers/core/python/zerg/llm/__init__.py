"""The LLM port: one interface, swappable providers (OpenAI-compatible HTTP, offline), and the
usage ledger every call is recorded in."""

from zerg.llm.port import CallTag, ChatModel, ChatResult, LLMError, ToolCall, Usage

__all__ = ["CallTag", "ChatModel", "ChatResult", "LLMError", "ToolCall", "Usage"]
