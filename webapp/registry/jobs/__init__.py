"""Jobs: their rows, their steps and log, the audit trail's events, and their pages.

``record`` is how every job reports its life and how every event is written
(``record_event``); the work itself lives in the room that owns it (``build``, ``serving``,
``performance``, ``catalogue``).
"""
