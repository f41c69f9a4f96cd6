"""The catalogue's actions: create, edit and retire a model; a version from an upload, delete
one, override its verification, cancel its job; add the demo model.

As in every room, an action is where a change a person asks for happens: views and API
handlers parse the request, call one action and render its result. The action checks the
rule about the object, owns the transaction, writes the audit trail's events, enqueues work
after commit (``webapp.dispatch``) and pushes live updates. Refusals are ``HubError``.
"""
