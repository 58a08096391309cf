#!/usr/bin/env python3
"""Time a full-batch GCN epoch with PyTorch Geometric on a dataset folder in
gnnkit's shared layout (edges.tsv, features.f32, labels.txt, train.txt,
val.txt, test.txt, meta.json), as written by scripts/exportdata, so that
gnnkit and PyG train on the very same graph. Prints one JSON line.

The model follows PyG's examples/gcn.py (Kipf & Welling): two GCNConv
layers (cached normalisation, self-loops), ReLU, dropout 0.5 on the input
and hidden features, Adam (lr 0.01, weight decay 5e-4 on all weights),
features row-normalised like `gnnkit train --feature-norm row`.
"Epoch" = zero_grad + forward + loss + backward + Adam step, timed with
device synchronisation; the median is over the epochs after the warm-up
ones; evaluation is not timed.

Adapted from shared/anchors/torch_gnn_bench.py (its loader and timing
conventions). Exit status 3 when torch or torch_geometric cannot be
imported, so callers can tell "not installed" from a failure.
"""
import argparse
import json
import os
import statistics
import sys
import time


def load(d):
    import numpy as np
    with open(os.path.join(d, "meta.json")) as fh:
        meta = json.load(fh)
    n, fdim, classes = int(meta["nodes"]), int(meta["feature_dim"]), int(meta["classes"])
    e = np.loadtxt(os.path.join(d, "edges.tsv"), dtype=np.int64, ndmin=2)
    x = np.fromfile(os.path.join(d, "features.f32"), dtype="<f4").reshape(n, fdim)
    y = np.loadtxt(os.path.join(d, "labels.txt"), dtype=np.int64, ndmin=1)

    def ids(name):
        return np.loadtxt(os.path.join(d, name), dtype=np.int64, ndmin=1)

    return meta, n, classes, e, x, y, ids("train.txt"), ids("val.txt"), ids("test.txt")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="dataset folder in the shared layout")
    p.add_argument("--device", default="cuda", help="cuda or cpu (default cuda, cpu when no GPU is visible)")
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--epochs", type=int, default=200)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    try:
        import numpy as np
        import torch
        import torch.nn.functional as F
        import torch_geometric
        from torch_geometric.nn import GCNConv
        from torch_geometric.utils import to_undirected
    except Exception as exc:  # ImportError, or a broken CUDA build of torch
        print(json.dumps({"error": f"cannot import torch / torch_geometric: {exc}"}))
        return 3

    dev = args.device
    if dev == "cuda" and not torch.cuda.is_available():
        dev = "cpu"
    torch.manual_seed(args.seed)
    t0 = time.perf_counter()
    meta, n, classes, e, x, y, tr, va, te = load(args.data)
    x = x.astype(np.float32)
    rs = np.abs(x).sum(axis=1, keepdims=True)  # the L1 norm; the row sum when x >= 0
    np.divide(x, rs, out=x, where=rs != 0)
    edge_index = torch.from_numpy(e.T.copy())
    if not meta.get("directed", False):
        edge_index = to_undirected(edge_index, num_nodes=n)
    device = torch.device(dev)
    x_t = torch.from_numpy(x).to(device)
    y_t = torch.from_numpy(y).to(device)
    ei = edge_index.to(device)
    tr_t, va_t, te_t = (torch.from_numpy(v).to(device) for v in (tr, va, te))
    load_s = time.perf_counter() - t0

    class GCN(torch.nn.Module):
        def __init__(self, fin, hid, out):
            super().__init__()
            self.conv1 = GCNConv(fin, hid, cached=True)
            self.conv2 = GCNConv(hid, out, cached=True)

        def forward(self, x, ei):
            x = F.dropout(x, p=0.5, training=self.training)
            x = self.conv1(x, ei).relu()
            x = F.dropout(x, p=0.5, training=self.training)
            return self.conv2(x, ei)

    model = GCN(x.shape[1], args.hidden, classes).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)

    def sync():
        if dev == "cuda":
            torch.cuda.synchronize()

    times = []
    loss_v = float("nan")
    for _ in range(args.epochs):
        sync()
        t1 = time.perf_counter()
        model.train()
        opt.zero_grad(set_to_none=True)
        out = model(x_t, ei)
        loss = F.cross_entropy(out[tr_t], y_t[tr_t])
        loss.backward()
        opt.step()
        sync()
        times.append(time.perf_counter() - t1)
        loss_v = float(loss.detach())
    model.eval()
    with torch.no_grad():
        pred = model(x_t, ei).argmax(dim=1)

    def acc(idx):
        return float((pred[idx] == y_t[idx]).float().mean()) if len(idx) else float("nan")

    ms = [t * 1e3 for t in (times[args.warmup:] if len(times) > args.warmup else times)]
    rec = {"impl": "pyg", "data": meta.get("name", os.path.basename(args.data.rstrip("/"))), "nodes": n,
           "edges_directed": int(ei.shape[1]), "device": dev,
           "device_name": torch.cuda.get_device_name(0) if dev == "cuda" else "cpu",
           "torch": torch.__version__, "torch_geometric": torch_geometric.__version__,
           "hidden": args.hidden, "epochs": args.epochs, "warmup": args.warmup,
           "epoch_ms_median": round(statistics.median(ms), 3), "epoch_ms_min": round(min(ms), 3),
           "final_loss": round(loss_v, 5), "val_acc": round(acc(va_t), 4), "test_acc": round(acc(te_t), 4),
           "load_s": round(load_s, 3)}
    print(json.dumps(rec))
    return 0


if __name__ == "__main__":
    sys.exit(main())
