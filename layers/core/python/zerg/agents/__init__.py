"""Agent configuration per owner: the supervisor and worker settings an owner chose."""
