"""The node worker: the one process on a node's host that writes that node's model repository,
loads and unloads in that node's Triton and reports what the host has (docs/nodes.md).

It is Django-free and holds no database credentials (an import-linter contract in
pyproject.toml forbids ``django`` and ``webapp`` here): it consumes only the Celery queue
``node.<name>`` and talks to the hub through the hub's HTTP API with a node token.

Modules, from the bottom up:

* :mod:`~workers.node.settings`: the node's settings, read from the environment;
* :mod:`~workers.node.hub_client`: the hub's HTTP API as the node uses it (reports, package
  downloads), with bounded timeouts and bodies;
* :mod:`~workers.node.reporting`: the node's report (the host report plus who it is) and the
  heartbeat thread that sends it;
* :mod:`~workers.node.placing`: fetching a packaged version, checking it and serving it;
* :mod:`~workers.node.app` and :mod:`~workers.node.tasks`: the Celery app and its tasks
  (``node.probe``, ``node.place``, ``node.unload``);
* :mod:`~workers.node.launch`: ``make node NAME=...``, which starts a Triton and this worker.
"""
