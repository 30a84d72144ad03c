"""A sharded run's units handed out as the GPUs ask for them, not fixed in advance.

Fixed shards (shard.assign) are only as even as their cost model: two H200s of one full run
(2026-11-26) finished their shards ~190 s apart, the model having missed time no earlier run
recorded per unit (each child re-read the SASS of every Triton variant it compiled, ~0.5 s
each, on every GPU). Here every rank's precision group walks the same units in
the plan's order, and its child measures a shape only after claiming it in torchrun's key-value
store (the one the workers' process group uses, at MASTER_ADDR:MASTER_PORT): the first rank to
ask gets it, every later ask by another rank is refused, and the owner asking again (its child
restarted after a crash) gets it back. So the ranks work through each group together and end
within about one unit of each other, whatever the units cost.

    spec(prefix, owner)   what a child needs to claim (a dict for runner's spec), or None when
                          there is no store to share (one GPU, or not under torchrun)
    Claimer(spec)         in the child: take(precision, shape_name) -> bool; without a spec
                          every shape is taken (the unit list was this rank's alone)
"""
from __future__ import annotations

import os
from datetime import timedelta

CONNECT_S = 60.0   # how long a child waits for the store before it gives up (and takes nothing)


def spec(prefix: str, owner: str) -> dict | None:
    """The claim settings of this run's children: key prefix (one per run attempt and plan),
    owner (this rank's GPU uuid), the store's address; None without torchrun's store."""
    host, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if not (host and port and int(os.environ.get("WORLD_SIZE", "1")) > 1):
        return None
    return {"host": host, "port": int(port), "prefix": prefix, "owner": owner}


class Claimer:
    """take(precision, shape) -> whether this rank measures it (claims it if nobody has)."""

    def __init__(self, spec: dict | None):
        self.spec, self._store = spec, None

    def take(self, precision: str, shape_name: str) -> bool:
        if not self.spec:
            return True
        if self._store is None:
            import torch.distributed as dist

            self._store = dist.TCPStore(self.spec["host"], self.spec["port"], is_master=False,
                                        timeout=timedelta(seconds=CONNECT_S))
        key = f"{self.spec['prefix']}/{precision}/{shape_name}"
        owner = self.spec["owner"]
        return self._store.compare_set(key, "", owner) == owner.encode()
