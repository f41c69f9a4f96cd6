"""Serving: the switch lock, switches and rollbacks, rollouts to the nodes of a placement,
reconcile, what Triton says of our models, and whether a version fits its devices.

``actions`` is the asking side (serve, roll back, load, unload, compare); ``switch`` and
``rollout`` the workers'; ``reconcile`` sits on top and may queue what repairs need.
"""
