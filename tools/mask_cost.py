#!/usr/bin/python3
"""What masks that stay the same when the micro-batch count changes would
cost: one generator and one bernoulli_ per sample (the mask a function of
the sample's index in the batch) against one of each per op per
micro-batch (what mpexec does, docs/executor.md "Randomness").

    /usr/bin/python3 tools/mask_cost.py

Prints, for the dropout shapes of the zoo's dropout models at one
micro-batch of 4 samples, the time of each way (best of 7 rounds of 200)
and their ratio. Runs on one thread, as a stage does by default here.
"""
import time

import torch

SHAPES = {  # name: (shape, the batch dim's size)
    "bert attention (batch*heads, t, t)": ((4 * 4, 32, 32), 4),
    "bert / gpt2 hidden (batch, t, width)": ((4, 32, 64), 4),
    "gpt2 attention (batch, heads, t, t)": ((4, 4, 32, 32), 4),
    "mobilenet classifier (batch, 1024)": ((4, 1024), 4),
}


def per_op(x, p):
    g = torch.Generator().manual_seed(12345)
    return torch.empty_like(x).bernoulli_(1 - p, generator=g)


def per_sample(x, p, batch):
    noise = torch.empty_like(x)
    rows = x.shape[0] // batch
    for i in range(batch):
        g = torch.Generator().manual_seed(12345 + i)
        noise[i * rows:(i + 1) * rows].bernoulli_(1 - p, generator=g)
    return noise


def best_ms(fn, rounds=7, calls=200):
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls * 1000)
    return best


def main():
    torch.set_num_threads(1)
    print(f"{'dropout':40} {'per op ms':>10} {'per sample ms':>14} {'ratio':>6}")
    for name, (shape, batch) in SHAPES.items():
        x = torch.randn(shape)
        a = best_ms(lambda: per_op(x, 0.1))
        b = best_ms(lambda: per_sample(x, 0.1, batch))
        print(f"{name:40} {a:10.4f} {b:14.4f} {b / a:6.2f}")


if __name__ == "__main__":
    main()
