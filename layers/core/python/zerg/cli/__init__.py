"""The ``zerg`` command line: :mod:`zerg.cli.main` parses and dispatches; one module per command group
(memory, schedules, contacts and policy, inbox, inbound, agents, doctor), sharing :mod:`zerg.cli.common`.
Not in the Lambda layer."""
