"""The evaluation's runs: what each trains with, and which of them --quick keeps.

A Run names one way of moving the gradients: DDP's own all-reduce over gloo, one of PyTorch's comm
hooks, or the gradgate gateways with a fixed codec or a controller policy. On PyTorch 1.13 over
gloo, powerSGD_hook aborts (gloo::EnforceNotMet ... op.preamble.length <= op.nbytes) as soon as it
compresses with DDP's default buckets (a 1 MB first bucket and the rest: two buckets' all-reduces
in flight at once); with the whole gradient in one bucket it trains. So the powerSGD_hook runs use
one bucket, and `ddp-powersgd-r2-short-buckets` keeps DDP's default buckets to show the abort.
`may_fail` marks that run: its failure is a result to report, not a failure of the evaluation. The `reference` run (uncompressed DDP)
trains exactly the step budget that defines the target accuracy; the others may train longer
(run_eval.py --steps-factor) to get there. `lowest_rate_only` runs go on the slowest
link of the invocation only (the imbalanced-data comparison is about scarce bandwidth);
`only_rate` runs where one rate says all: the abort, and powerSGD_hook's default warm-up (1000
steps, more than any run here trains: it never compresses, it is DDP's all-reduce) at 100 Mb/s.
"""

from dataclasses import dataclass, field

IMBALANCED_SHARES = "8,4,2,1"


@dataclass(frozen=True)
class Run:
    name: str
    label: str
    backend: str = "gloo"  # gloo | gradgate
    hook: str = "none"  # gloo: none | fp16 | powersgd
    psgd_rank: int = 0
    psgd_warmup: str = ""  # powersgd: "default" | "short"
    codec: str = "none"  # the gateways' codec (with a policy: the codec before its first decision)
    momentum_correction: bool = False  # the hook applies SGD's momentum, the optimizer none
    policy: str = ""  # "" (no controller) | bandwidth | dagc-r
    shares: str = ""
    may_fail: bool = False
    reference: bool = False  # trains exactly the reference step budget
    lowest_rate_only: bool = False
    only_rate: float = 0.0  # > 0: runs at this rate only (when the invocation has it)
    single_bucket: bool = False  # the whole gradient in one DDP bucket
    policy_settings: dict = field(default_factory=dict, compare=False, hash=False)


def catalogue(topk_density):
    """Every run, in the order they execute (the uncompressed reference first)."""
    topk = f"topk:density={topk_density:g},select=threshold"
    runs = [
        Run("ddp", "DDP all-reduce (gloo)", reference=True),
        Run("ddp-fp16", "DDP fp16_compress_hook", hook="fp16"),
    ]
    for rank in (2, 4):
        for warmup in ("default", "short"):
            runs.append(Run(f"ddp-powersgd-r{rank}-{warmup}",
                            f"DDP powerSGD_hook rank {rank}, {warmup} warm-up, one bucket",
                            hook="powersgd", psgd_rank=rank, psgd_warmup=warmup,
                            single_bucket=True, only_rate=100 if warmup == "default" else 0))
    runs.append(Run("ddp-powersgd-r2-short-buckets",
                    "DDP powerSGD_hook rank 2, short warm-up, DDP's default buckets",
                    hook="powersgd", psgd_rank=2, psgd_warmup="short", may_fail=True,
                    only_rate=1000))
    runs += [
        Run("gg-topk", f"gradgate {topk}", backend="gradgate", codec=topk),
        Run("gg-topk-mc", f"gradgate {topk}, momentum correction", backend="gradgate",
            codec=topk, momentum_correction=True),
        Run("gg-powersgd", "gradgate powersgd:rank=4", backend="gradgate", codec="powersgd:rank=4"),
        Run("gg-qsgd", "gradgate qsgd:bits=4", backend="gradgate", codec="qsgd:bits=4,workers=4"),
        Run("gg-bandwidth", "gradgate bandwidth policy", backend="gradgate", policy="bandwidth"),
        Run("imb-uniform", f"imbalanced {IMBALANCED_SHARES}: uniform {topk}", backend="gradgate",
            codec=topk, shares=IMBALANCED_SHARES, lowest_rate_only=True),
        Run("imb-dagc-r", f"imbalanced {IMBALANCED_SHARES}: dagc-r, mean density "
            f"{topk_density:g}", backend="gradgate", codec=topk, policy="dagc-r",
            shares=IMBALANCED_SHARES, lowest_rate_only=True,
            policy_settings={"traffic_budget": topk_density, "ladder": [topk]}),
    ]
    return runs


QUICK_RUNS = ("ddp", "ddp-fp16", "gg-topk", "gg-topk-mc", "gg-bandwidth")
# On unshaped links only the question "does the adaptive policy cost anything?" is asked.
UNSHAPED_RUNS = ("ddp", "gg-topk", "gg-topk-mc", "gg-bandwidth")
# The small CNN is compute-bound on these links: a few runs show it.
CNN_RUNS = ("ddp", "ddp-fp16", "gg-topk", "gg-qsgd", "gg-bandwidth")
SCENARIO_RUN = "gg-bandwidth"


def position(name):
    """Where run `name` stands in the catalogue (unknown names last): the order of tables."""
    names = [run.name for run in catalogue(0.01)]
    return names.index(name) if name in names else len(names)


def select(runs, names):
    """The runs named in `names` (a list), in catalogue order; ValueError for an unknown name."""
    known = {run.name for run in runs}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"unknown run(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return [run for run in runs if run.name in names]
