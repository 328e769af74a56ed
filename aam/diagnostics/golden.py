"""Golden-file numeric validation of the model: generate once on CPU, compare on any device.

``generate_golden`` builds a tiny seeded ``SequencePredictor`` (every stack, the count head, one
categorical covariate fused by concat, no dropout), fixed inputs with real padding (samples with
different numbers of ASVs, ASVs of different lengths) and a fixed nucleotide mask, runs one
forward + backward in float32 with the ``math`` attention backend in eval mode, and writes
``golden.pt`` (weights, inputs, outputs, gradients, config) and ``metadata.json``.

``compare_golden`` loads those weights into a model built on the ``meta`` device (so nothing is
ever initialised, from a seed or otherwise), recomputes the outputs and gradients on a device for
every attention backend x precision available there, and reports per-tensor errors against the
per-dtype tolerances in ``TOLERANCES``.

Error measure, per tensor: ``max_abs = max |x - golden|`` and ``max_rel = max_abs / max |golden|``
(relative to the tensor's scale, not element-wise, so tiny golden entries do not blow it up).
A tensor passes iff ``max_abs <= atol + rtol * max |golden|`` for its precision; any NaN/inf or
shape mismatch fails.
"""

from __future__ import annotations

import io
import math
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from aam.data.batching import Batch
from aam.data.tokenize import tokenize
from aam.errors import InputError
from aam.models import ModelConfig, SequencePredictor, mask_nucleotides
from aam.models.files import read_torch_file
from aam.models.layers import available_backends
from aam.runtime.atomic import atomic_output, write_json
from aam.training.device import autocast
from aam.training.inference import model_outputs

FORMAT = "aam-golden-v1"
GOLDEN_FILE = "golden.pt"
METADATA_FILE = "metadata.json"
SEED = 20240611
OUTPUT_NAMES = (
    "sample_embedding",
    "asv_embeddings",
    "nuc_logits",
    "prediction",
    "count_prediction",
)
LOSS_DEFINITION = (
    "sum(prediction**2) + mean(nuc_logits**2) + mean(count_prediction**2) "
    "+ mean(sample_embedding**2), computed in float32"
)

# Per-precision tolerances: a tensor passes iff max_abs <= atol + rtol * max|golden|.
# fp32: different kernels / thread counts / devices reorder float32 sums (~1e-6 relative);
# 1e-4 leaves room for that while any real bug (ignored mask, wrong kernel) is orders larger.
# bf16 (autocast): 8-bit mantissa (eps 7.8e-3) through ~10 layers and a backward pass; on CPU
# the worst tensor (a LayerNorm-weight gradient) is ~3e-2 off, while an ignored padding mask
# puts every tensor 1e-1..7e-1 off.
TOLERANCES: dict[str, dict[str, float]] = {
    "fp32": {"rtol": 1e-4, "atol": 1e-6},
    "bf16": {"rtol": 5e-2, "atol": 1e-3},
}


def golden_config() -> ModelConfig:
    """The tiny architecture of the golden model."""
    return ModelConfig(
        embedding_dim=16,
        attention_heads=2,
        dropout=0.0,
        attention_dropout=0.0,
        asv_layers=2,
        sample_layers=1,
        encoder_layers=1,
        max_bp=12,
        token_limit=8,
        count_embedding="add",
        out_dim=2,
        classifier=False,
        count_prediction=True,
        count_layers=1,
        target_layers=1,
        categorical_cardinalities=(3,),
        categorical_embed_dim=4,
        categorical_fusion="concat",
        attn_implementation="math",
    )


def golden_inputs(seed: int = SEED) -> dict[str, torch.Tensor]:
    """Fixed batch: 3 samples with 4, 2 and 3 ASVs; 6 unique ASVs of 5..12 bases (one with an N);
    unique_tokens holds PAD tails, asv_index holds -1 slots; a fixed nucleotide mask."""
    gen = torch.Generator().manual_seed(seed)
    lengths = (12, 9, 7, 12, 5, 10)
    seqs = []
    for n in lengths:
        idx = torch.randint(0, 4, (n,), generator=gen).tolist()
        seqs.append("".join("ACGT"[i] for i in idx))
    seqs[2] = seqs[2][:3] + "N" + seqs[2][4:]
    tokens = torch.from_numpy(tokenize(seqs, max_bp=12)).long()
    masked, nuc_mask = mask_nucleotides(tokens, 0.3, generator=gen)
    asv_index = torch.tensor([[0, 1, 2, 3], [4, 1, -1, -1], [5, 0, 3, -1]])
    counts = torch.tensor([[10.0, 3.0, 1.0, 7.0], [25.0, 2.0, 0.0, 0.0], [4.0, 9.0, 1.0, 0.0]])
    categories = torch.tensor([[1], [2], [0]])
    assert nuc_mask.any() and (tokens == 0).any() and (asv_index < 0).any()
    return {
        "unique_tokens": masked,
        "asv_index": asv_index,
        "counts": counts,
        "categories": categories,
        "nuc_mask": nuc_mask,
    }


def build_golden_model(config: ModelConfig, seed: int = SEED) -> SequencePredictor:
    """Seeded weights (used by ``generate_golden`` only). LayerNorm scales/biases and all biases
    get seeded noise too, so that every parameter shapes the outputs and gets a distinct grad."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = SequencePredictor(config)
        with torch.no_grad():
            for param in model.parameters():
                param.add_(0.05 * torch.randn_like(param))
    return model


def loss_of(out: dict[str, torch.Tensor]) -> torch.Tensor:
    """The fixed scalar whose gradients are stored (see ``LOSS_DEFINITION``)."""
    return (
        out["prediction"].float().pow(2).sum()
        + out["nuc_logits"].float().pow(2).mean()
        + out["count_prediction"].float().pow(2).mean()
        + out["sample_embedding"].float().pow(2).mean()
    )


def golden_batch(inputs: dict[str, torch.Tensor]) -> Batch:
    """The golden inputs as the ``Batch`` training and inference feed the model."""
    return Batch(
        sample_index=torch.arange(len(inputs["asv_index"])),
        asv_rows=torch.arange(len(inputs["unique_tokens"])),
        unique_tokens=inputs["unique_tokens"],
        asv_index=inputs["asv_index"],
        counts=inputs["counts"],
        categories=inputs["categories"],
    )


def run_model(
    model: SequencePredictor, inputs: dict[str, torch.Tensor], precision: str = "fp32"
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], torch.Tensor]:
    """One eval-mode forward (``model_outputs``, autocast per ``precision``) + backward:
    (outputs, gradients per parameter, loss), float32, CPU."""
    device = next(model.parameters()).device
    model.eval()
    model.zero_grad(set_to_none=True)
    batch = golden_batch(inputs).to(device)
    with torch.enable_grad(), autocast(device, precision):
        out = model_outputs(model, batch, nuc_mask=inputs["nuc_mask"].to(device))
    # the file holds the masked positions' logits (the model gives every position's)
    out["nuc_logits"] = out["nuc_logits"][inputs["nuc_mask"].to(device)]
    loss = loss_of(out)
    loss.backward()
    outputs = {k: out[k].detach().float().cpu() for k in OUTPUT_NAMES}
    grads = {}
    for name, param in model.named_parameters():
        g = param.grad
        grads[name] = torch.zeros_like(param, device="cpu") if g is None else g.float().cpu()
    return outputs, grads, loss.detach().float().cpu()


# -- generate -------------------------------------------------------------------------------
def generate_golden(output_dir: str | Path, seed: int = SEED) -> dict[str, Any]:
    """Write ``golden.pt`` and ``metadata.json`` into ``output_dir`` (atomically); return the
    golden dict."""
    output_dir = Path(output_dir)
    config = golden_config()
    inputs = golden_inputs(seed)
    model = build_golden_model(config, seed)
    model.set_attn_implementation("math")
    outputs, grads, loss = run_model(model, inputs, "fp32")
    golden = {
        "format": FORMAT,
        "config": config.to_dict(),
        "seed": seed,
        "state_dict": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "inputs": inputs,
        "outputs": outputs,
        "gradients": grads,
        "loss": loss,
    }
    metadata = {
        "format": FORMAT,
        "generated_on": "cpu",
        "dtype": "float32",
        "attn_implementation": "math",
        "mode": "eval",
        "seed": seed,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "config": config.to_dict(),
        "loss": LOSS_DEFINITION,
        "loss_value": float(loss),
        "tolerances": TOLERANCES,
        "tolerance_rule": "pass iff max_abs <= atol + rtol * max|golden| (per tensor)",
        "tensors": {
            "inputs": {k: list(v.shape) for k, v in inputs.items()},
            "outputs": {k: list(v.shape) for k, v in outputs.items()},
            "gradients": len(grads),
        },
    }
    output_dir.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()  # torch.save to a path names the archive after the (temporary) file
    torch.save(golden, buffer)
    with atomic_output(output_dir / GOLDEN_FILE) as tmp:
        tmp.write_bytes(buffer.getvalue())
    write_json(output_dir / METADATA_FILE, metadata, sort_keys=True)
    return golden


# -- load -----------------------------------------------------------------------------------
def load_golden(golden_dir: str | Path) -> dict[str, Any]:
    """Read and check ``golden_dir/golden.pt``; any problem is one-line ``InputError``."""
    golden_dir = Path(golden_dir)
    path = golden_dir / GOLDEN_FILE
    if not golden_dir.is_dir():
        raise InputError(
            f"--golden {golden_dir}: no such directory; create it with "
            "`aam validate generate --output-dir DIR`"
        )
    if not path.is_file():
        raise InputError(
            f"--golden {golden_dir}: {GOLDEN_FILE} missing; regenerate the golden "
            "files with `aam validate generate`"
        )
    try:
        golden = read_torch_file(path)
    except Exception as err:  # noqa: BLE001 - any unreadable file is the same user error
        reason = " ".join(str(err).split())[:200]
        raise InputError(
            f"{path}: not a readable golden file ({type(err).__name__}: {reason}); "
            "regenerate it with `aam validate generate`"
        ) from None
    if not isinstance(golden, dict) or golden.get("format") != FORMAT:
        raise InputError(
            f"{path}: not an {FORMAT} golden file; regenerate it with `aam validate generate`"
        )
    for key in ("config", "state_dict", "inputs", "outputs", "gradients"):
        if not isinstance(golden.get(key), dict):
            raise InputError(f"{path}: field {key!r} missing or not a dict; regenerate it")
    missing = [k for k in OUTPUT_NAMES if k not in golden["outputs"]]
    if missing:
        raise InputError(f"{path}: outputs {missing} missing; regenerate it")
    return golden


def model_from_golden(golden: dict[str, Any], device: torch.device) -> SequencePredictor:
    """The golden architecture with the golden weights, moved to ``device``. (Built on the CPU
    and overwritten: a ``meta`` build would skip the initialisation, but a module built under a
    device context loads torch._dynamo, ~3 s of CPU per process.)"""
    try:
        config = ModelConfig.from_dict(dict(golden["config"]))
    except (TypeError, ValueError) as err:
        raise InputError(f"golden config: {err}") from None
    model = SequencePredictor(config)
    try:
        model.load_state_dict(golden["state_dict"], strict=True)
    except RuntimeError as err:
        reason = " ".join(str(err).split())[:200]
        raise InputError(f"golden state_dict does not fit its config: {reason}") from None
    return model.to(device)


# -- compare --------------------------------------------------------------------------------
@dataclass
class Combination:
    backend: str
    precision: str
    status: str = "pass"  # pass | fail | unsupported | error
    message: str = ""
    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.backend}/{self.precision}"

    def worst(self) -> dict[str, Any] | None:
        """The row with the largest error relative to its allowance."""
        if not self.rows:
            return None
        return max(self.rows, key=lambda r: r["ratio"])

    def to_dict(self) -> dict[str, Any]:
        worst = self.worst()
        return {
            "backend": self.backend,
            "precision": self.precision,
            "status": self.status,
            "message": self.message,
            "n_tensors": len(self.rows),
            "n_failed": sum(not r["passed"] for r in self.rows),
            "worst_tensor": worst["tensor"] if worst else None,
            "worst_max_abs": worst["max_abs"] if worst else None,
            "worst_max_rel": worst["max_rel"] if worst else None,
        }


def tensor_error(
    name: str, kind: str, got: torch.Tensor, want: torch.Tensor, tol: dict[str, float]
) -> dict[str, Any]:
    """One report row: max abs/rel error of ``got`` against ``want`` and pass/fail."""
    want = want.float()
    scale = float(want.abs().max()) if want.numel() else 0.0
    allowed = tol["atol"] + tol["rtol"] * scale
    if got.shape != want.shape:
        max_abs, note = math.inf, f"shape {list(got.shape)} != golden {list(want.shape)}"
    elif got.numel() == 0:
        max_abs, note = 0.0, ""
    else:
        diff = (got.float() - want).abs()
        max_abs = float(diff.max()) if torch.isfinite(diff).all() else math.inf
        note = "" if math.isfinite(max_abs) else "non-finite values"
    max_rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else math.inf)
    return {
        "tensor": name,
        "kind": kind,
        "shape": list(want.shape),
        "max_abs": max_abs,
        "max_rel": max_rel,
        "golden_max_abs": scale,
        "atol": tol["atol"],
        "rtol": tol["rtol"],
        "ratio": max_abs / allowed if allowed > 0 else math.inf,
        "passed": bool(max_abs <= allowed),
        "note": note,
    }


def available_precisions(device: torch.device) -> tuple[str, ...]:
    if device.type == "cuda":
        return ("fp32", "bf16") if torch.cuda.is_bf16_supported() else ("fp32",)
    return ("fp32", "bf16")  # CPU autocast supports bfloat16


def compare_golden(
    golden_dir: str | Path,
    device: torch.device,
    backends: tuple[str, ...] | None = None,
    precisions: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """Recompute the golden outputs/gradients on ``device`` for each backend x precision.

    Returns the report dict (``combinations`` summary + every per-tensor ``rows`` entry) with
    ``passed`` False if any supported combination failed or errored. ``flash`` is reported as
    ``unsupported`` when it cannot take the key-padding masks (PyTorch's flash has no masks).
    """
    golden = load_golden(golden_dir)
    model = model_from_golden(golden, device)
    backends = backends or available_backends(device)
    precisions = precisions or available_precisions(device)
    combos = []
    matmul_precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")  # no TF32 in the fp32 reference runs
    try:
        _run_combinations(model, golden, backends, precisions, combos)
    finally:
        torch.set_float32_matmul_precision(matmul_precision)
    bad = [c for c in combos if c.status in ("fail", "error")]
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return {
        "golden": str(golden_dir),
        "device": str(device),
        "device_name": device_name,
        "torch": torch.__version__,
        "hip": torch.version.hip,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "tolerances": TOLERANCES,
        "tolerance_rule": "pass iff max_abs <= atol + rtol * max|golden| (per tensor)",
        "passed": not bad,
        "failed_combinations": [c.name for c in bad],
        "combinations": [c.to_dict() for c in combos],
        "rows": [
            {"backend": c.backend, "precision": c.precision, **row}
            for c in combos
            for row in c.rows
        ],
        "_combos": combos,
    }


def _run_combinations(
    model: SequencePredictor,
    golden: dict[str, Any],
    backends: tuple[str, ...],
    precisions: tuple[str, ...],
    combos: list[Combination],
) -> None:
    for precision in precisions:
        if precision not in TOLERANCES:
            raise InputError(f"--precision {precision}: use one of {sorted(TOLERANCES)}")
        tol = TOLERANCES[precision]
        for backend in backends:
            combo = Combination(backend, precision)
            combos.append(combo)
            try:
                model.set_attn_implementation(backend)
            except ValueError as err:
                raise InputError(f"--backend {backend}: {err}") from None
            try:
                outputs, grads, _ = run_model(model, golden["inputs"], precision)
            except RuntimeError as err:
                reason = " ".join(str(err).split())[:160]
                if backend == "flash":
                    combo.status = "unsupported"
                    combo.message = f"unsupported with masks ({reason})"
                else:
                    combo.status, combo.message = "error", f"{type(err).__name__}: {reason}"
                continue
            for name in OUTPUT_NAMES:
                combo.rows.append(
                    tensor_error(name, "output", outputs[name], golden["outputs"][name], tol)
                )
            for name, want in golden["gradients"].items():
                got = grads.get(name, torch.full_like(want, math.nan))
                combo.rows.append(tensor_error(name, "gradient", got, want, tol))
            failed = [r for r in combo.rows if not r["passed"]]
            if failed:
                combo.status = "fail"
                combo.message = f"{len(failed)}/{len(combo.rows)} tensors out of tolerance"


def write_report(report: dict[str, Any], path: str | Path) -> None:
    """The report as JSON (infinite errors as the string "inf"), written atomically."""
    data = {k: v for k, v in report.items() if not k.startswith("_")}

    def clean(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return str(value)
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    write_json(path, clean(data), now=True)  # the result of a failed check too: kept


def format_table(report: dict[str, Any], max_failures: int = 6) -> str:
    """A readable summary: one line per combination, then its worst failing tensors."""
    lines = [
        f"golden compare on {report['device']} ({report['device_name']}), torch {report['torch']}",
        f"{'backend':<14}{'precision':<10}{'status':<13}{'failed':>8}  {'worst tensor':<46}"
        f"{'max_abs':>10}{'max_rel':>10}",
    ]
    for combo in report["_combos"]:
        worst = combo.worst()
        failed = f"{sum(not r['passed'] for r in combo.rows)}/{len(combo.rows)}"
        if worst is None:
            lines.append(
                f"{combo.backend:<14}{combo.precision:<10}{combo.status:<13}"
                f"{'-':>8}  {combo.message}"
            )
            continue
        lines.append(
            f"{combo.backend:<14}{combo.precision:<10}{combo.status:<13}{failed:>8}  "
            f"{worst['tensor'][:45]:<46}{worst['max_abs']:>10.2e}{worst['max_rel']:>10.2e}"
        )
    for combo in report["_combos"]:
        failed = sorted((r for r in combo.rows if not r["passed"]), key=lambda r: -r["ratio"])
        for row in failed[:max_failures]:
            lines.append(
                f"  FAIL {combo.name} {row['kind']} {row['tensor']}: max_abs "
                f"{row['max_abs']:.3e} max_rel {row['max_rel']:.3e} (rtol {row['rtol']:g}, "
                f"atol {row['atol']:g}) {row['note']}".rstrip()
            )
        if len(failed) > max_failures:
            lines.append(
                f"  ... {len(failed) - max_failures} more failing tensors in "
                f"{combo.name} (all rows in the JSON report)"
            )
    verdict = "PASS" if report["passed"] else "FAIL: " + ", ".join(report["failed_combinations"])
    lines.append(verdict)
    return "\n".join(lines)


def failure_message(report: dict[str, Any]) -> str:
    """One line naming the failing combinations and the worst tensor."""
    bad = [c for c in report["_combos"] if c.status in ("fail", "error")]
    worst_combo, worst_row = None, None
    for combo in bad:
        row = combo.worst()
        if row is not None and (worst_row is None or row["ratio"] > worst_row["ratio"]):
            worst_combo, worst_row = combo, row
    names = ", ".join(f"{c.name} ({c.status})" for c in bad)
    msg = f"golden compare FAILED on {report['device']} for {names}"
    if worst_row is not None:
        msg += (
            f"; worst: {worst_combo.name} {worst_row['kind']} {worst_row['tensor']} "
            f"max_abs {worst_row['max_abs']:.3e} max_rel {worst_row['max_rel']:.3e} "
            f"(rtol {worst_row['rtol']:g})"
        )
    else:
        msg += f"; {bad[0].message}"
    return msg
