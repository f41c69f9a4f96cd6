"""The hub's side of nodes: who they are, their reports, their tokens, where a build runs,
waiting for their answers, and what a person may do to one (drain, revoke, remove).

A Django app of its own (label ``nodes``); its tables were made by ``ops`` and keep their
names. The node worker itself is ``workers/node/`` and never imports this. docs/nodes.md.
"""
