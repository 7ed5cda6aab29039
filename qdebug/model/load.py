"""Resolve `--model/--device/--dtype` and load a checkpoint offline through transformers' Auto classes."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedModel, ProcessorMixin

from qdebug.errors import DeviceError, ModelLoadError, cause

from .adapters import Adapter, adapter_for

DEMO = "demo"
DEMO_DIR = Path(__file__).resolve().parent.parent / "demo" / "checkpoint"
DTYPES = ("auto", "float32", "bfloat16", "float16")
KERNELS = ("eager", "sdpa")
DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")


@dataclass
class LoadedModel:
    """A model ready to trace: the module, its processor, adapter and where/how it runs."""

    model: PreTrainedModel
    processor: ProcessorMixin
    adapter: Adapter
    path: str
    spec: str
    device: str
    dtype: str
    attn_kernel: str  # the attention kernel every layer computes its output with
    device_map: dict | None = None  # module → device, when accelerate placed the model (`--device-map auto`)

    @property
    def config(self) -> PretrainedConfig:
        """The model's config."""
        return self.model.config

    def describe(self) -> dict:
        """The `model` block of reports: path, architecture, device, dtype, kernel."""
        return {
            "path": self.path,
            "spec": self.spec,
            "architecture": self.adapter.name,
            "device": self.device,
            "dtype": self.dtype,
            "attn_kernel": self.attn_kernel,
            **({"device_map": sorted({str(d) for d in self.device_map.values()})} if self.device_map else {}),
        }


def resolve_model_dir(spec: str) -> Path:
    """`demo`, a local directory, or a hub id already in the local HF cache → a checkpoint directory."""
    if spec == DEMO:
        if not (DEMO_DIR / "config.json").is_file():
            raise ModelLoadError(f"the demo checkpoint is missing at {DEMO_DIR}; regenerate it with `qdebug demo train`")
        return DEMO_DIR
    path = Path(spec).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ModelLoadError(f"--model {spec}: is a file; expected a checkpoint directory with config.json")
        if not (path / "config.json").is_file():
            raise ModelLoadError(f"--model {spec}: no config.json in that directory; expected a Hugging Face checkpoint")
        return path
    looks_like_hub_id = spec.count("/") == 1 and not spec.startswith((".", "/", "~"))
    if looks_like_hub_id:
        return _from_hf_cache(spec)
    raise ModelLoadError(f"--model {spec}: no such directory; expected `demo`, a checkpoint directory or a cached hub id")


def _from_hf_cache(repo_id: str) -> Path:
    """Find a hub id in the local cache without touching the network."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        from huggingface_hub import snapshot_download

        # Read the cache location now (not at import): HF_HUB_CACHE / HF_HOME may be set per run.
        cache = os.environ.get("HF_HUB_CACHE") or (os.path.join(os.environ["HF_HOME"], "hub") if os.environ.get("HF_HOME") else None)
        local = snapshot_download(repo_id, local_files_only=True, cache_dir=cache)
    except Exception:  # the hub client raises several types for "not cached"; all mean the same here
        raise ModelLoadError(
            f"--model {repo_id}: not in the local Hugging Face cache and qdebug never downloads; "
            f"expected a cached hub id or a local checkpoint directory"
        ) from None
    if not (Path(local) / "config.json").is_file():
        raise ModelLoadError(f"--model {repo_id}: cached snapshot has no config.json")
    return Path(local)


# config.json's checked contents per resolved checkpoint path, read once per process while the file is unchanged
# (keyed on its size and mtime): one command resolves a model's facts once, however many steps ask.
_CONFIGS: dict[Path, tuple[tuple[int, int], dict]] = {}


def read_config(path: Path) -> dict:
    """config.json as plain JSON (never code), its sizes checked (`config_check`); read once per unchanged file,
    each caller given its own copy."""
    import copy

    file = path / "config.json"
    try:
        st = file.stat()
        key, stamp = file.resolve(), (st.st_size, st.st_mtime_ns)
    except OSError:
        key, stamp = None, None
    cached = _CONFIGS.get(key) if key is not None else None
    if cached is not None and cached[0] == stamp:
        return copy.deepcopy(cached[1])
    data = _read_config(path)
    if key is not None and stamp is not None:
        _CONFIGS[key] = (stamp, copy.deepcopy(data))
    return data


def _read_config(path: Path) -> dict:
    """Read config.json as plain JSON (never code), its sizes checked (`config_check`)."""
    try:
        data = json.loads((path / "config.json").read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelLoadError(f"{path / 'config.json'}: unreadable ({cause(exc)}); expected a JSON model config") from None
    if not isinstance(data, dict):
        raise ModelLoadError(f"{path / 'config.json'}: not a JSON object; expected a model config")
    from .config_check import check_config

    check_config(data, str(path / "config.json"))
    return data


def resolve_device(device: str) -> str:
    """`auto|cpu|cuda|cuda:N` → a concrete device, or DeviceError if it is not here."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        return "cpu"
    if device == "cuda" or device.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise DeviceError(f"--device {device}: CUDA was asked for but no CUDA device is available; use --device cpu or auto")
        if ":" in device:
            index = device.split(":", 1)[1]
            if not index.isdigit() or int(index) >= torch.cuda.device_count():
                raise DeviceError(f"--device {device}: expected cuda:N with N < {torch.cuda.device_count()}")
        return device
    raise DeviceError(f"--device {device}: expected auto, cpu, cuda or cuda:N")


def resolve_dtype(dtype: str, device: str) -> str:
    """`auto` → bfloat16 on a bf16-capable GPU, float32 on CPU; explicit names pass through checked."""
    import torch

    if dtype not in DTYPES:
        raise DeviceError(f"--dtype {dtype}: expected one of {', '.join(DTYPES)}")
    if dtype != "auto":
        return dtype
    if device.startswith("cuda") and torch.cuda.is_bf16_supported():
        return "bfloat16"
    return "float32"


def load_model(
    spec: str = DEMO,
    device: str = "auto",
    dtype: str = "auto",
    attn_kernel: str = "eager",
    attn_implementation: str | None = None,
    trust_remote_code: bool = False,
    device_map: str | None = None,
) -> LoadedModel:
    """Load model + processor offline, computing attention with qdebug's tappable wrapper of `kernel`.

    `attn_implementation` overrides the name given to transformers (e.g. plain "eager" for a reference run).
    `device_map` ("auto", "balanced", ...) lets accelerate spread the layers over the visible devices; inputs
    then go to the token embedding's device, and the recorder copies each capture to CPU wherever it ran.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if attn_kernel not in KERNELS:
        raise DeviceError(f"--attn {attn_kernel}: expected one of {', '.join(KERNELS)}")
    path = resolve_model_dir(spec)
    adapter = adapter_for(read_config(path), where=f"--model {spec}")
    device = resolve_device(device)
    dtype = resolve_dtype(dtype, device)
    if device_map is not None and device_map not in DEVICE_MAPS:
        raise DeviceError(f"--device-map {device_map}: expected one of {', '.join(DEVICE_MAPS)}")

    import torch
    from transformers import AutoProcessor

    from .attention import register

    attn_implementation = attn_implementation or register(attn_kernel)
    try:
        model = adapter.model_class().from_pretrained(
            path,
            dtype=getattr(torch, dtype),
            attn_implementation=attn_implementation,
            local_files_only=True,
            trust_remote_code=trust_remote_code,
            **({"device_map": device_map} if device_map is not None else {}),
        )
        processor = AutoProcessor.from_pretrained(path, local_files_only=True, trust_remote_code=trust_remote_code)
    except Exception as exc:  # transformers, safetensors and tokenizers each raise their own types
        raise ModelLoadError(f"--model {spec}: could not load ({cause(exc)})") from None
    placed = (getattr(model, "hf_device_map", None) or {"": str(model.device)}) if device_map is not None else None
    if placed is None:
        model.to(device)
    else:  # inputs go where the token embeddings live
        device = str(adapter.embed_tokens(model).weight.device)
    model.eval()
    return LoadedModel(model, processor, adapter, str(path), spec, device, dtype, attn_kernel, device_map=placed)
