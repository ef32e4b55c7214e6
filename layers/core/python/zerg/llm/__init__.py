"""The LLM port: one interface, swappable providers (OpenAI-compatible HTTP, offline)."""

from zerg.llm.port import ChatModel, ChatResult, LLMError, ToolCall, Usage

__all__ = ["ChatModel", "ChatResult", "LLMError", "ToolCall", "Usage"]
