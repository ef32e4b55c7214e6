"""Approvals (issue 27): a tool call that waits for the owner's answer. Its table
(:mod:`.requests`) and the wait on the run's workflow (:mod:`.wait`)."""
