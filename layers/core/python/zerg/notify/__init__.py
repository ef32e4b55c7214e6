"""Telling the owner: the verified contacts (and their verification), the notification policy, daily
send limits, the notifications record, delivery through one path (:func:`zerg.notify.deliver.deliver`),
a closed run's answer sent once, and Web Push; the email and SMS channels are in :mod:`zerg.notify.channels`."""
