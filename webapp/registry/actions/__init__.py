"""Every state change a person asks for goes through here: one module per area.

Views and API handlers parse the request, call one action and render its result. An action
checks what the rule is about (the object: a role where the rule depends on who owns it, the
state a change needs), owns the transaction, writes the Event rows of the audit trail,
enqueues work after commit (``webapp.dispatch`` inside ``transaction.on_commit``) and pushes
live updates. Refusals are ``webapp.errors.HubError``.

- ``models``: create a model, edit its description, tags and owner, retire it (the
  worker's side is ``webapp.registry.retire``).
- ``versions``: a new version from an upload (the page and the API alike), delete one,
  override its verification, cancel a job.
- ``serving``: ask for a serve, rollback, load, unload or comparison (the worker's side is
  ``webapp.registry.serving``).
- ``sweeps``: ask for a performance sweep (the worker's side is ``webapp.registry.sweeps``).
- ``examples``: save and delete Try it examples.
- ``try_it``: a model's labels and Try it settings.
- ``demo``: add the demo model.

The workers' own steps (``pipeline``, ``serving.run_job``, ``reconcile``, ``jobs``) record
their progress where they run; they are not actions.
"""
