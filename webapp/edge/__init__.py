"""What answers before Django's request cycle: the ASGI entry (``asgi``), the ``/v2`` fast
path (``gateway_fast``, which imports no Django) and the streamed chunk upload
(``stream_upload``, which runs Django's own middleware for its checks, on purpose).
"""
