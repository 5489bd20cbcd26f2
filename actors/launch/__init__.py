"""The elastic launcher, ``python -m actors.launch`` (torchrun's counterpart; docs/ELASTIC.md).

One agent per node: it takes part in the elastic rendezvous (`store.elastic`),
starts `--nproc-per-node` workers with the environment `actors.init_rpc()` reads,
watches them, and restarts the group after a failure or to take in waiting nodes.
Kept light: nothing here imports torch, numpy-heavy code or the rpc services.
"""
