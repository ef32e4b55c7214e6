"""Agent configuration per owner (seed 6.3, 8.3): read both agents, change one, through
:mod:`zerg.agents.settings` (the same validation as ``zerg agents set``); what each tool does; the
models the deployment can reach (the page's model picker)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path

from zerg.agents import settings as agent_settings
from zerg.agents.settings import AgentConfigChange
from zerg.api.deps import Owner, Rt, json_response
from zerg.api.errors import ApiError, not_found
from zerg.api.models import AgentConfig, AgentConfigList, ModelChoices, responses
from zerg.tools.catalog import tool_descriptions, tool_names

router = Router()

# Not constrained here: an agent that does not exist is 404 (not found), not 422.
Agent = Annotated[str, Path(description="supervisor or worker")]


@router.get("/api/jarvis/agents", summary="The owner's supervisor and worker configuration (the defaults until changed)",
            responses=responses(200, "Both agents", AgentConfigList, 401))
def list_agents(owner_id: Owner, rt: Rt):
    with rt.pool.connection() as conn:
        agents = agent_settings.list_agents(conn, rt.settings, owner_id, tool_names())
    return json_response({"agents": [_described(a) for a in agents]})


def _described(entry: dict) -> dict:
    """An agent's entry with what each of its available tools does."""
    descriptions = tool_descriptions()
    return {**entry, "tool_descriptions": {name: descriptions[name] for name in entry["available_tools"]}}


@router.put("/api/jarvis/agents/<agent>",
            summary="Change an agent's configuration (the fields given; null resets one to the default)",
            responses=responses(200, "The agent's configuration after the change", AgentConfig, 400, 401, 404, 415))
def put_agent(agent: Agent, body: AgentConfigChange, owner_id: Owner, rt: Rt):
    if agent not in agent_settings.AGENTS:
        raise not_found(f"agent {agent[:100]!r} (supervisor or worker)")
    try:
        with rt.pool.connection() as conn:
            entry = agent_settings.change(conn, rt.settings, owner_id, agent, body, tool_names()[agent])
    except agent_settings.AgentConfigError as exc:
        raise ApiError(422, "validation_error", str(exc)) from None
    return json_response(_described(entry))


@router.get("/api/jarvis/models", summary="The models an agent can be given on this deployment (a menu; other ids "
                                          "a configured provider serves are allowed too)",
            responses=responses(200, "The deployment's own models, then the price table's per reachable provider",
                                ModelChoices, 401))
def list_models(owner_id: Owner, rt: Rt):
    from zerg.llm.providers import model_choices

    return json_response({"models": model_choices(rt.settings), "default_provider": rt.settings.default_provider})
