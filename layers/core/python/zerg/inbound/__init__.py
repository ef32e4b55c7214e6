"""Replies: inbound email and SMS become rows, then an acknowledgement, a keyword or a run on the
owner's thread; directives change schedules and the notification policy through the same code as
the API.

- :mod:`~zerg.inbound.messages`: the ``inbound_messages`` table and :class:`~zerg.inbound.messages.Inbound`,
  what a parser hands on.
- :mod:`~zerg.inbound.email` / :mod:`~zerg.inbound.sms`: parsing what SES and two-way SMS deliver.
- :mod:`~zerg.inbound.replies`: the one path from an :class:`Inbound` to its outcome, and the answer
  back on the same channel; :mod:`~zerg.inbound.reply_context`: what a reply's run is shown of what
  the reply answers (the ``[REPLY CONTEXT]`` layer).
- :mod:`~zerg.inbound.directives`: what the directive tools do (what only the owner decides is a
  directive approval, :mod:`zerg.approvals.requests`).
"""
