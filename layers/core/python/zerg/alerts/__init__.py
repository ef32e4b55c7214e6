"""Alerts: what a run's close brings about. A background run's assessment and task inbox item, the
escalation matrix and the repeats of a critical alert, the daily digest, reminders, the answer mail of
``notify_on_complete`` and the per-owner daily spending cap. Telling the owner itself (contacts,
policy, delivery, channels) is :mod:`zerg.notify`."""
