"""The inference room: what decides about one call to a model, whichever door it came in by.

Three doors take inference calls: the ``/v2`` fast path (:mod:`webapp.edge.gateway_fast`, with
its reads in :mod:`webapp.fast_path_reads`), Django's ``/v2`` (:mod:`webapp.gateway`) and the
infer API (:mod:`webapp.registry.tryit.inference`). What they must decide alike lives here, so
that a rule is written once and a door only translates its protocol:

* :mod:`webapp.inference.tokens`: the token verdict (unknown or revoked, expired, no longer
  vouched for by the directory, a node's, the scope's role cap), read by the token middleware
  and by the fast path alike.
"""
