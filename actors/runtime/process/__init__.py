"""Process set-up: structured logs, the allocator and BLAS tuning of a worker, and the
exit flush that delivers what the process sent before it ends."""
