"""One stack per concern; dependencies only point from later to earlier stacks:
Data <- Workflow <- {Api, Messaging}. Messaging attaches its own grants to workflow roles
(instead of asking Workflow to reference its topics) so no reference ever points back."""
