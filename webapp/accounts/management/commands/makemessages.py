"""``makemessages`` that also finds the sentences ``model_store`` writes with ``say``.

``model_store`` cannot call Django's ``gettext``; it writes its sentences with
:func:`model_store.text.say` and :func:`model_store.text.say_n` instead, and the web layer
translates them (``webapp.text``). Django's documentation describes overriding this command to
give xgettext more keywords; that is all this does.
"""

from __future__ import annotations

from django.core.management.commands import makemessages


class Command(makemessages.Command):
    xgettext_options = [
        *makemessages.Command.xgettext_options,
        "--keyword=say",
        "--keyword=say_n:1,2",
    ]
