"""The table and the JSON of scripts/compare_pytorch.py: medians of each configuration, and the
ratio of Tandem's best format to each PyTorch release's best eager format and to its compiled
step."""
import json
import os
import statistics
from dataclasses import dataclass
from pathlib import Path

FORMAT_TITLES = {"nchw": "NCHW", "channels_last": "channels-last"}
# The ZeRO stage beyond which a PyTorch has no counterpart to measure on a CPU: 1.13's FSDP
# (stage 2: SHARD_GRAD_OP) asserts torch.cuda.is_available() when it starts; a PyTorch with FSDP2
# (fully_shard, run_probe()'s "fsdp2") measures stages 2 and 3 (Note [FSDP2 beside ZeRO 2 and 3]
# in scripts/pytorch_step.py).
PYTORCH_MAX_ZERO = 1
FSDP2_MAX_ZERO = 3
MIB = 1024 * 1024


@dataclass
class Run:
    """Everything one comparison measured and how."""
    args: object
    info: dict              # the machine
    peers: list             # compare_pytorch.Peer, one per PyTorch release
    workloads: list
    configs: list           # compare_pytorch.Config, the columns
    samples: dict           # (row key, config key) -> [images/s, ...]
    errors: list
    details: dict           # (row key, config key) -> the first measurement's result dict
    steps: dict             # arch -> (warm-up, timed) steps


def config_title(config):
    side = "Tandem" if config.side == "tandem" else config.side
    if config.variant == "compile":
        return f"{side} compile ({FORMAT_TITLES[config.fmt]})"
    return f"{side} {FORMAT_TITLES[config.fmt]}"


def row_key(workload, precision):
    """One row of the table: a workload in one precision."""
    return f"{workload.name}:{precision}"


def cell(values, measured=True):
    if not measured:
        return "n/a"
    if not values:
        return "failed"
    median = statistics.median(values)
    if len(values) == 1:
        return f"{median:.0f}"
    return f"{median:.0f} ({min(values):.0f}–{max(values):.0f})"


def best(run, key, side, variant="eager"):
    """The best median images/s of `side`'s configurations of `variant` in row `key`."""
    medians = [statistics.median(run.samples[(key, c.key)]) for c in run.configs
               if c.side == side and c.variant == variant and run.samples.get((key, c.key))]
    return max(medians) if medians else None


def ratio_columns(run):
    """(title, side, variant) of each ratio: Tandem over each release's eager and compile."""
    if run.args.pytorch_only:
        return []
    columns = []
    for peer in run.peers:
        columns.append((f"Tandem / {peer.name}", peer.name, "eager"))
        if any(c.side == peer.name and c.variant == "compile" for c in run.configs):
            columns.append((f"Tandem / {peer.name} compile", peer.name, "compile"))
    return columns


def ratio(run, key, side, variant):
    ours, theirs = best(run, key, "tandem"), best(run, key, side, variant)
    return ours / theirs if ours and theirs else None


def print_header(run):
    info, args = run.info, run.args
    print(f"# Tandem beside PyTorch — {info['date']}")
    print(f"CPU: {info['cpu']} ({info['cpus']} CPUs); AVX-512/AMX: "
          f"{', '.join(info['avx512']) if info['avx512'] else 'no'}")
    for peer in run.peers:
        p = peer.info
        print(f"{peer.name} ({p['torch']}): {p['onednn']} ISA '{p['onednn_isa']}', ATen kernels "
              f"{p['aten_capability']}, mkldnn {'on' if p['mkldnn'] else 'off'}")
    print(f"{args.threads} threads in all (DDP: {args.threads} / 2 per rank); global batch "
          f"{args.batch}; {args.repeats} repeat(s), median (min–max) images/s; load average "
          f"{info['load_average_start']:.2f} at the start, {os.getloadavg()[0]:.2f} at the end")
    # Both sides use libgomp, whose threads spin while they wait: on cores shared with other
    # processes that costs multi-threaded rows several times their speed (passive does not spin).
    print(f"OMP_WAIT_POLICY: {info['omp_wait_policy']} (inherited by every side)")
    if info["load_average_start"] > 0.5 * info["cpus"]:
        print(f"note: the machine was busy before the run (load average "
              f"{info['load_average_start']:.2f} on {info['cpus']} CPUs); multi-threaded rows "
              f"suffer most from other processes on the cores")
    for arch in sorted({w.arch for w in run.workloads}, reverse=True):
        warmup, steps = run.steps[arch]
        print(f"{arch}: {warmup} warm-up + {steps} timed steps per measurement; "
              f"{parameter_line(run, arch)}")


def print_table(run):
    print_header(run)
    print()
    ratios = ratio_columns(run)
    header = ["workload"] + [config_title(c) for c in run.configs] + [r[0] for r in ratios]
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    for w in run.workloads:
        threads = max(1, run.args.threads // w.world)
        for precision in run.args.precisions:
            key = row_key(w, precision)
            row = [w.title.format(t=f"{threads} thread" + ("s" if threads > 1 else ""))
                   + f", b{run.args.batch}" + (", bf16 (PyTorch: autocast)" if precision == "bf16"
                                               else "")]
            row += [cell(run.samples.get((key, c.key), []), measures(w, c, run.peers)) for c in run.configs]
            for _, side, variant in ratios:
                value = ratio(run, key, side, variant)
                row.append(f"{value:.2f}" if value else "-")
            print("| " + " | ".join(row) + " |")
    print_state_table(run)
    if ratios:
        print("\nEach ratio takes Tandem's faster format over the release's faster eager format "
              "(or its compiled step); above 1: Tandem faster.")
    for line in precision_gains(run):
        print(line)
    for error in run.errors:
        print(f"failed: {error}")


def max_zero(peer_info):
    """The highest ZeRO stage a PyTorch (run_probe()'s info) has a counterpart of."""
    return FSDP2_MAX_ZERO if peer_info.get("fsdp2") else PYTORCH_MAX_ZERO


def measures(workload, config, peers):
    """Whether `config`'s side has a counterpart of the workload to measure."""
    if config.side == "tandem":
        return True
    peer = next((p for p in peers if p.name == config.side), None)
    return peer is not None and workload.zero <= max_zero(peer.info)


def state_bytes(run, key, side):
    """The model state bytes the fullest rank held in row `key` on `side`, the largest over its
    formats and repeats (at ZeRO stage 2 the gradient buckets in flight at once, and so the
    peak, depend on timing), or None."""
    values = [run.details.get((key, c.key), {}).get("state_bytes") for c in run.configs
              if c.side == side]
    values = [v for v in values if v is not None]
    return max(values) if values else None


def print_state_table(run):
    """DDP rows: the bytes of parameters, gradients at their peak in a step and optimizer state
    the fullest rank holds, counted (Note [Counted memory]), in MiB and in fp32 copies P of the
    parameters."""
    rows = [(w, precision) for w in run.workloads if w.mode == "ddp"
            for precision in run.args.precisions]
    if not rows:
        return
    sides = ([] if run.args.pytorch_only else [("Tandem", "tandem")])
    sides += [(peer.name, peer.name) for peer in run.peers]
    print("\nModel state per rank (parameters + gradients at their peak + optimizer state, "
          "counted; the fullest rank), MiB (× P, one fp32 copy of the parameters):\n")
    print("| workload | ZeRO stage | " + " | ".join(title for title, _ in sides) + " |")
    print("|" + " --- |" * (2 + len(sides)))
    for w, precision in rows:
        key = row_key(w, precision)
        parameters = run.peers[0].info["parameters"][w.arch] * 4 if run.peers else None
        cells = []
        for _, side in sides:
            value = state_bytes(run, key, side)
            if value is None:
                peer = next((p for p in run.peers if p.name == side), None)
                cells.append("n/a" if peer and w.zero > max_zero(peer.info) else "-")
            else:
                share = f" ({value / parameters:.2f} P)" if parameters else ""
                cells.append(f"{value / MIB:.2f}{share}")
        print(f"| {w.name} {precision} | {w.zero} | " + " | ".join(cells) + " |")


def precision_gains(run):
    """bf16 against fp32 on each side, best eager format each, when both precisions ran."""
    if set(run.args.precisions) != {"fp32", "bf16"}:
        return []
    sides = ([] if run.args.pytorch_only else [("Tandem", "tandem")])
    sides += [(peer.name, peer.name) for peer in run.peers]
    lines = ["", "bf16 / fp32, each side's faster format:"]
    for w in run.workloads:
        gains = []
        for title, side in sides:
            fast, slow = best(run, row_key(w, "bf16"), side), best(run, row_key(w, "fp32"), side)
            gains.append(f"{title} {fast / slow:.2f}" if fast and slow else f"{title} -")
        lines.append(f"- {w.name}: " + ", ".join(gains))
    return lines


def parameter_line(run, arch):
    """Whether Tandem's model (bench_cifar's parameter_bytes / 4) has PyTorch's parameter count."""
    theirs = run.peers[0].info["parameters"][arch]
    ours = {r["parameters"] for (key, config_key), r in run.details.items()
            if config_key.startswith("tandem|") and key.split("-")[0] == arch}
    if not ours:
        return f"parameters: PyTorch {theirs:,}"
    if ours == {theirs}:
        return f"parameters: Tandem {theirs:,} = PyTorch {theirs:,}"
    return f"parameters DIFFER: Tandem {sorted(ours)}, PyTorch {theirs:,}"


def write_json(path, run):
    rows = []
    for w in run.workloads:
        for precision in run.args.precisions:
            key = row_key(w, precision)
            warmup, steps = run.steps[w.arch]
            entry = {"workload": w.name, "arch": w.arch, "mode": w.mode, "zero": w.zero,
                     "precision": precision,
                     "processes": w.world,
                     "threads_per_process": max(1, run.args.threads // w.world),
                     "batch": run.args.batch, "warmup_steps": warmup, "timed_steps": steps,
                     "configurations": [], "ratios": {}}
            for c in run.configs:
                values = run.samples.get((key, c.key), [])
                measured = {"side": c.side, "format": c.fmt, "variant": c.variant,
                            "images_per_s": values,
                            "median": statistics.median(values) if values else None}
                # rank 0's for PyTorch, the largest rank's for Tandem (bench_cifar's)
                peak = run.details.get((key, c.key), {}).get("peak_rss_mb")
                if peak is not None:
                    measured["peak_rss_mb"] = peak
                state = run.details.get((key, c.key), {}).get("state_bytes")
                if state is not None:
                    measured["state_bytes"] = state
                entry["configurations"].append(measured)
            for title, side, variant in ratio_columns(run):
                entry["ratios"][title] = ratio(run, key, side, variant)
            rows.append(entry)
    machine = dict(run.info, load_average_end=os.getloadavg()[0], repeats=run.args.repeats,
                   pytorch=[dict(peer.info, python=peer.python) for peer in run.peers])
    Path(path).write_text(json.dumps({"benchmark": "compare_pytorch", "machine": machine,
                                      "rows": rows, "errors": run.errors}, indent=2) + "\n")
