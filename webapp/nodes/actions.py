"""What a person may do to a node: drain it, revoke its tokens, remove it.

Each is an action like every other change the hub makes (each room's ``actions``): the role
is checked here, whoever calls (the Nodes page, the API, ``manage.py nodetoken``), and each change
leaves one line in the audit trail, with who did it and to which node.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from model_store.text import say
from webapp.accounts.roles import Role, require_role
from webapp.nodes import summaries as nodes
from webapp.nodes import tokens as node_scope
from webapp.registry.jobs.record import record_event


def drain(*, name: str, user: Any, draining: bool) -> dict[str, Any]:
    """Stop placing anything new on ``name`` (``draining``), or place on it again; the node's
    summary. Asking for the state it is already in changes nothing and records nothing."""
    require_role(user, Role.OPERATOR)
    node = nodes.get(name)
    if node.draining != draining:
        with transaction.atomic():
            nodes.set_draining(node.name, draining)
            record_event(
                "node.drained" if draining else "node.undrained",
                say("%(user)s drained node %(node)s: nothing new is placed on it.",
                    user=_who(user), node=node.name)
                if draining
                else say("%(user)s stopped draining node %(node)s.", user=_who(user),
                         node=node.name),
                actor=_actor(user),
                data={"node": node.name},
            )  # fmt: skip
    return nodes.summary_of(node.name)


def revoke_tokens(*, name: str, user: Any) -> int:
    """Refuse every token of ``name`` from its next report on (admins); how many were live.

    ``user`` None is ``manage.py nodetoken --revoke``: whoever has the host's shell is trusted.
    """
    if user is not None:
        require_role(user, Role.ADMIN)
    node = nodes.get(nodes.check_name(name)) if user is not None else _known_or_named(name)
    with transaction.atomic():
        count = node_scope.revoke(node.name)
        record_event(
            "node.tokens_revoked",
            say("%(user)s revoked the tokens of node %(node)s (%(count)s live).",
                user=_who(user), node=node.name, count=count),
            actor=_actor(user),
            data={"node": node.name, "revoked": count},
        )  # fmt: skip
    return count


def remove(*, name: str, user: Any) -> None:
    """Forget a node that is down or draining and refuse its tokens (admins); 409 ``node_up``
    when it is up."""
    require_role(user, Role.ADMIN)
    with transaction.atomic():
        node = nodes.remove(name)
        record_event(
            "node.removed",
            say("%(user)s removed node %(node)s; its tokens are revoked.", user=_who(user),
                node=node),
            actor=_actor(user),
            data={"node": node},
        )  # fmt: skip


def _known_or_named(name: str) -> Any:
    """The node ``name`` for the command line, which may revoke the tokens of a node the hub
    has already forgotten (its name is all that is left)."""
    found = nodes.Node.objects.filter(name=nodes.check_name(name)).first()
    return found if found is not None else nodes.Node(name=name)


def _who(user: Any) -> Any:
    return user.get_username() if user is not None else say("the command line")


def _actor(user: Any) -> Any:
    return user if getattr(user, "pk", None) is not None else None
