#!/usr/bin/python3
"""The peers bench_suite measures mpexec against, on the same machine.

  pipe   PyTorch's own pipeline runtime in Debian's python3-torch,
         torch.distributed.pipeline.sync.Pipe (a port of torchgpipe), with
         torchgpipe's balance_by_time partitions, checkpoint="never" (mpexec
         keeps activations too), GPipe's schedule over --chunks micro-batches.
  eager  the same nn.Sequential trained whole, one batch per step, as a user
         without a pipeline would.

Both train the bench's way (random inputs, MSE against one-hot labels,
SGD lr 0.001) and print one JSON object: step_ms (the median), steps_ms,
and for pipe the partition sizes. Models are those of models/export.py,
random weights, laid out as an nn.Sequential for Pipe.

    /usr/bin/python3 bench/peers/pipe_peer.py --model mlp --batch 256 \\
        --runtime pipe --chunks 8 --partitions 2 --threads 2 --warmup 1 --steps 5
"""
import argparse
import json
import os
import socket
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models"))
import export  # noqa: E402  (the zoo's definitions)


class Embed(nn.Module):
    """GPT's token and position embeddings as one pipeline layer."""

    def __init__(self, tok, pos):
        super().__init__()
        self.tok, self.pos = tok, pos

    def forward(self, idx):
        return self.tok(idx) + self.pos(torch.arange(idx.size(1)))


def model_and_inputs(name, batch):
    """(nn.Sequential, inputs, labels) for a zoo model."""
    torch.manual_seed(0)
    if name == "mlp":
        m = export.MLP()
        layers = list(m.layers)
        x = torch.randn(batch, 512)
    elif name == "gpt":
        g = export.GPT()
        layers = [Embed(g.tok, g.pos), *g.blocks, g.ln, g.head]
        x = torch.randint(0, 1024, (batch, 64))
    else:
        sys.exit(f"pipe_peer.py: unknown model {name!r} (known: mlp, gpt)")
    seq = nn.Sequential(*layers)
    with torch.no_grad():
        out = seq(x)
    labels = F.one_hot(torch.randint(0, out.shape[-1], out.shape[:-1]), out.shape[-1]).float()
    return seq, x, labels


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--runtime", choices=["pipe", "eager"], required=True)
    ap.add_argument("--chunks", type=int, default=1)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    seq, x, labels = model_and_inputs(args.model, args.batch)
    result = {"runtime": args.runtime, "model": args.model, "batch": args.batch, "threads": args.threads}
    model = seq
    if args.runtime == "pipe":
        import torch.distributed.rpc as rpc
        from torch.distributed.pipeline.sync import Pipe
        from torch.distributed.pipeline.sync._balance import balance_by_time
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(free_port())
        rpc.init_rpc("peer", rank=0, world_size=1)
        sample = x[: max(1, args.batch // args.chunks)]
        balance = balance_by_time(args.partitions, seq, sample, device=torch.device("cpu"))
        layers, parts, start = list(seq), [], 0
        for size in balance:
            parts.append(nn.Sequential(*layers[start:start + size]))
            start += size
        model = Pipe(nn.Sequential(*parts), chunks=args.chunks, checkpoint="never")
        result.update(chunks=args.chunks, balance=balance)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
    steps = []
    for i in range(args.warmup + args.steps):
        start = time.perf_counter()
        out = model(x)
        if args.runtime == "pipe":
            out = out.local_value()
        F.mse_loss(out, labels).backward()
        optimizer.step()
        optimizer.zero_grad()
        if i >= args.warmup:
            steps.append(1000 * (time.perf_counter() - start))
    result.update(step_ms=statistics.median(steps), steps_ms=steps)
    print(json.dumps(result))
    if args.runtime == "pipe":
        rpc.shutdown()


if __name__ == "__main__":
    main()
