"""The Zerg CDK app: stacks (data, workflow, API, messaging) and the constructs they share."""
