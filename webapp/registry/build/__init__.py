"""The compile job, the workers' side: validate -> compile -> verify -> package.

``pipeline`` runs the steps by name; each step is a module here; a build that needs CANN runs
on a node (``node_builds``). The version it builds is the catalogue's; asking for a build is
``catalogue.actions.versions``.
"""
