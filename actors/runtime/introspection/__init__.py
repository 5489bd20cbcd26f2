"""Introspection: what a running process is doing, answered without its worker threads.

==================  ==========================================================================
``recorder.py``     `TRAFFIC`: messages and bytes per kind, and the flight recorder, a ring
                    of the last messages and collective steps, dumped to a file on failures
``dumps.py``        `WRITER`: writes those files on a thread of its own, so that the thread
                    that failed reports at once; what is queued is written at exit
``status.py``       the STATUS answer: who this process is, its traffic, and the sections
                    that the layers above register (calls in flight, collectives, contexts)
``stacks.py``       the STACKS answer: every thread's Python stack
``server.py``       the ROUTER that answers STATUS, STACKS and RECORDER on an actor's I/O
                    thread, in JSON only
``signals.py``      SIGUSR1: dump the recorder and the stacks to a file
==================  ==========================================================================
"""
