"""Mint (or revoke) the token of a node; the token is the last word printed (``make node``
reads it). The node is registered if it is new."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from webapp.errors import HubError
from webapp.nodes import actions as node_actions
from webapp.nodes import summaries as nodes
from webapp.nodes import tokens as node_scope


class Command(BaseCommand):
    help = (
        "Print a new node token for node NAME (scope node:NAME: it may only post that node's "
        "reports and fetch packaged versions), registering the node; --revoke refuses its "
        "tokens from now on."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument(
            "--revoke", action="store_true", help="Revoke every token of the node instead."
        )

    def handle(self, *args: Any, name: str, revoke: bool, **options: Any) -> None:
        try:
            name = nodes.check_name(name)
        except HubError as exc:
            raise CommandError(exc.message) from None
        if revoke:
            count = node_actions.revoke_tokens(name=name, user=None)
            self.stdout.write(f"Revoked {count} token(s) of node {name}.")
            return
        node = nodes.register(name)
        key = node_scope.issue(node.name)
        self.stdout.write(f"Node token for {node.name} (scope {node_scope.scope_for(name)}): {key}")
