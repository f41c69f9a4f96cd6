"""The model registry, in rooms: one folder per capability, each with its models, its actions
(the changes a person asks for), its views and its workers' side.

- ``catalogue``: models, versions, tags, owners, retiring, adopting a repository, the demo.
- ``jobs``: a job's life (steps, progress, log, the audit trail's events) and its pages.
- ``build``: the compile job's steps, validate -> compile -> verify -> package.
- ``serving``: the switch lock, switches, rollouts to nodes, placement, reconcile, memory fit.
- ``tryit``: test inference, its form, saved examples, labels, the per-user rate limit.
- ``performance``: sweeps, tuning, config revisions.

Django knows one app, ``registry``: ``models.py`` registers every room's tables under it, so
the tables and migrations did not move when the rooms were made. docs/architecture.md#rooms.
"""
