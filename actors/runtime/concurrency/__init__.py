"""Concurrency: futures, the worker pools (and the leader that reads the mailbox), the
blocking hand-off, request deadlines and the registry of every thread the project starts."""
