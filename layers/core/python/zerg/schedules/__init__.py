"""Schedules: background work at set times (checks, digests, reminders). Rows first; on AWS an
EventBridge Scheduler schedule follows each row, locally the ticker of ``zerg serve`` reads them."""
