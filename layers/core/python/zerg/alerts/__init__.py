"""Alerts: background results (the task inbox), the owner's notification policy, notifications to
verified contacts (email and SMS through the notifier port) and the escalation of critical alerts."""
