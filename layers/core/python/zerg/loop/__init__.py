"""The model<->tool loop every agent runs (:mod:`zerg.loop.agent_loop`) and the tool seam it calls
through (:mod:`zerg.loop.tool`: ``Tool``, ``ToolContext``, ``invoke``, cancellation signals)."""
