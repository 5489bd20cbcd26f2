"""Processes started from a server that imported numpy, zmq, the package, the etcd
client and structlog once.

For tests that start tens of processes on a few cores: each child is a new OS process
forked from multiprocessing's forkserver, a single-threaded process that holds no
ZeroMQ context, socket or thread of ours (as a spawned child starts), without paying
the interpreter's start and the imports again (about half a second of CPU each on a
slow 2-core machine; structlog, which a process imports at its first warning, 0.24 s
of it). A child gets the environment the server started with, not the test's current
one: a test that sets variables for its children spawns them.
"""
import multiprocessing as mp

ctx = mp.get_context("forkserver")
ctx.set_forkserver_preload(["numpy", "zmq", "actors.distributed", "actors.rpc", "store.elastic",
                            "store.etcd", "etcd3gw", "structlog"])
