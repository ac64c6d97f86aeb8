"""How large one request to the daemon may be, whichever way it comes (gRPC or JSON).

Requests are a few hundred bytes; more is an attack or a bug. Both transports refuse
more before reading it whole: gRPC as RESOURCE_EXHAUSTED (dispatch.py), JSON as 413
(json_calls.py), and a connection may have no more than this in flight ahead of what
the daemon reads (transport.py).
"""

MAX_REQUEST_BYTES = 64 * 1024
