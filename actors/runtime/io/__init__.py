"""Sockets and I/O: the process's ZeroMQ context, the mailbox's I/O thread, the ROUTER,
per-thread channels, attached sockets and CURVE. Only this folder touches a socket."""
