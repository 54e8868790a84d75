"""A Hugging Face ``config.json`` as a model's architecture columns: one's own model, read once at input.

``model: path/to/config.json`` (a space's workload, a design table's cell) names a local file (never the
network) of one of the families in :data:`FAMILIES`; :func:`load` maps its fields to the columns a
``models.yaml`` entry carries (in its units: counts, ``ffn_kind`` and ``attn_window_kind`` as names,
``tied_embeddings`` a bool). Pure and scalar: it runs once per distinct file, never per row.

Each rule follows the family's configuration class in Hugging Face transformers
(``src/transformers/models/<family>/configuration_<family>.py``; its docstring documents each field and
its default, https://huggingface.co/docs/transformers/model_doc/<family>):

- every family: ``n_layers`` num_hidden_layers, ``d_model`` hidden_size, ``n_heads`` num_attention_heads,
  ``n_kv_heads`` num_key_value_heads ("if not specified, will default to num_attention_heads"), ``d_head``
  head_dim (default hidden_size // num_attention_heads; Qwen3 128, Gemma 256, gpt-oss 64: their classes'
  defaults), ``vocab_size``, ``tied_embeddings`` tie_word_embeddings (the class default where absent: Gemma
  True, the others False), ``d_ff`` intermediate_size. ``ffn_kind`` is swiglu: every family here has the
  gated 3-matrix MLP (SiLU; Gemma's GELU-tanh GeGLU, which models.yaml also calls swiglu).
- ``seq_len`` only where the file records the pre-training length: rope_scaling / rope_parameters
  ``original_max_position_embeddings`` ("the original max position embeddings used during pretraining")
  or gpt-oss's ``initial_context_length``; elsewhere the space or table gives it (max_position_embeddings
  is the longest context served, not the training length).
- Mixtral (configuration_mixtral.py), gpt-oss (configuration_gpt_oss.py), Llama 4 (configuration_llama4.py):
  ``moe_experts`` num_local_experts, ``moe_topk`` num_experts_per_tok, ``d_ff`` intermediate_size per expert.
- Qwen3-MoE (configuration_qwen3_moe.py): num_experts, num_experts_per_tok, ``d_ff`` moe_intermediate_size;
  decoder_sparse_step k > 1: every k-th layer MoE (``moe_layer_freq``), the others dense of
  intermediate_size (``dense_d_ff``); mlp_only_layers: leading dense layers (``moe_dense_layers``).
- DeepSeek-V2/V3 (configuration_deepseek_v3.py; Kimi K2 ships the same class, model_type kimi_k2):
  n_routed_experts, num_experts_per_tok, ``d_ff`` moe_intermediate_size, ``moe_shared_experts``
  n_shared_experts, ``moe_dense_layers`` first_k_dense_replace, ``dense_d_ff`` intermediate_size,
  ``moe_layer_freq`` moe_layer_freq (> 1 only); MLA: q_lora_rank (null: 0), kv_lora_rank,
  ``qk_rope_dim`` qk_rope_head_dim, ``qk_nope_dim`` qk_nope_head_dim, v_head_dim; ``n_kv_heads`` = n_heads.
- Llama 4: text_config; one shared expert of intermediate_size in every MoE layer (modeling_llama4.py
  Llama4TextMoe.shared_expert); interleave_moe_layer_step k > 1: ``moe_layer_freq`` k, dense layers of
  intermediate_size_mlp; attention_chunk_size: chunked attention on the RoPE layers (no_rope_layers 1;
  default every layer but each fourth, no_rope_layer_interval 4).
- Windows (gpt-oss, Gemma 2/3, Mistral): ``attn_window`` sliding_window on the layers layer_types marks
  "sliding_attention" (``attn_window_frac`` their share); without layer_types the class's pattern: gpt-oss
  and Gemma 2 every other layer ((i + 1) % 2), Gemma 3 five of six ((i + 1) % sliding_window_pattern, 6),
  Mistral every layer.
- Gemma 3 (configuration_gemma3.py): text_config of a Gemma3ForConditionalGeneration; what the published
  file leaves out takes Gemma3TextConfig's default (vocab_size 262208, head_dim 256, sliding_window 4096,
  sliding_window_pattern 6, tie_word_embeddings true).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

__all__ = ["FAMILIES", "ConfigError", "load", "architecture", "is_config_path"]

#: model_type -> the rule set it follows
FAMILIES = {
    "llama": "llama", "mistral": "llama", "qwen2": "llama", "qwen3": "llama", "gemma": "llama", "gemma2": "llama",
    "gemma3": "llama", "gemma3_text": "llama", "mixtral": "moe", "gpt_oss": "moe", "llama4": "llama4",
    "llama4_text": "llama4", "qwen3_moe": "qwen3_moe", "deepseek_v2": "deepseek", "deepseek_v3": "deepseek",
    "kimi_k2": "deepseek",
}
#: what a family's configuration class takes where the file gives nothing (transformers' defaults)
_DEFAULTS: dict[str, dict[str, object]] = {
    "qwen3": {"head_dim": 128}, "qwen3_moe": {"head_dim": 128}, "gpt_oss": {"head_dim": 64, "sliding_window": 128},
    "gemma": {"head_dim": 256, "tie_word_embeddings": True},
    "gemma2": {"head_dim": 256, "tie_word_embeddings": True, "sliding_window": 4096},
    "gemma3_text": {"vocab_size": 262208, "head_dim": 256, "tie_word_embeddings": True, "sliding_window": 4096,
                    "sliding_window_pattern": 6},
}
#: every other layer sliding where layer_types is absent (gpt-oss, Gemma 2); Gemma 3: by sliding_window_pattern
_ALTERNATE = ("gpt_oss", "gemma2")
#: the largest config file read (a published config.json is a few KB)
MAX_BYTES = 4 << 20


class ConfigError(ValueError):
    """A config.json that cannot be read as a supported model: one line naming the file and the key."""


def is_config_path(label) -> bool:
    """True where a model label names a config.json (a file name ending .json), not a catalog id or alias."""
    return isinstance(label, str) and label.strip().lower().endswith(".json")


def load(path: str | Path) -> dict[str, object]:
    """The architecture columns of the config.json at ``path``; ConfigError where it is unreadable or
    unsupported."""
    path = Path(path).expanduser()
    try:
        with path.open("rb") as f:
            data = f.read(MAX_BYTES + 1)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        name = str(path) if len(str(path)) <= 200 and str(path).isprintable() else _show(str(path))
        raise ConfigError(f"{name}: cannot read the model's config.json "
                          f"({getattr(exc, 'strerror', None) or exc})") from None
    if len(data) > MAX_BYTES:
        raise ConfigError(f"{path}: over {MAX_BYTES >> 20} MB, not a model's config.json")
    try:
        config = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"{path}: not JSON ({str(exc).splitlines()[0][:120]})") from None
    return architecture(config, str(path))


def architecture(config, source: str = "config.json") -> dict[str, object]:
    """The columns of a parsed config.json (``source`` names it in messages)."""
    if not isinstance(config, dict):
        raise ConfigError(f"{source}: must be a JSON object (a Hugging Face config.json)")
    kind = config.get("model_type")
    if kind not in FAMILIES:
        raise ConfigError(f"{source}: model_type {_show(kind)} is not a supported family; supported: "
                          f"{', '.join(sorted(FAMILIES))}")
    if kind in ("gemma3", "llama4"):  # a multimodal checkpoint: the language model is its text_config
        text = config.get("text_config")
        config, kind = ({**text, "model_type": f"{kind}_text"} if isinstance(text, dict) else config), f"{kind}_text"
    family = FAMILIES[kind]
    cfg = Reader(config, _DEFAULTS.get(kind, {}), source)
    heads = cfg.count("num_attention_heads")
    out: dict[str, object] = {
        "n_layers": cfg.count("num_hidden_layers"), "d_model": cfg.count("hidden_size"), "n_heads": heads,
        "n_kv_heads": cfg.count("num_key_value_heads", heads), "d_ff": cfg.count("intermediate_size"),
        "ffn_kind": "swiglu", "vocab_size": cfg.count("vocab_size"),
        "tied_embeddings": cfg.flag("tie_word_embeddings", False),
        "moe_experts": 0, "moe_topk": 0,
    }
    out["d_head"] = cfg.count("head_dim", out["d_model"] // heads)
    seq_len = _pretraining_length(cfg)
    if seq_len:
        out["seq_len"] = seq_len
    if family == "moe":
        out["moe_experts"] = cfg.count("num_local_experts")
        out["moe_topk"] = cfg.count("num_experts_per_tok", cfg.get("experts_per_token"))
    elif family == "qwen3_moe":
        _qwen3_moe(cfg, out)
    elif family == "deepseek":
        _deepseek(cfg, out)
    elif family == "llama4":
        _llama4(cfg, out)
    _windows(cfg, kind, out)
    return out


class Reader:
    """A config's fields with its class's defaults; each read validated, a mistake one line."""

    def __init__(self, config: dict, defaults: dict, source: str):
        self.config, self.defaults, self.source = config, defaults, source

    def get(self, key: str, default=None):
        value = self.config.get(key)
        return value if value is not None else self.defaults.get(key, default)

    def count(self, key: str, default=None, zero: bool = False) -> int:
        """A whole number >= 1 (>= 0 with ``zero``); the key is required where it has no default."""
        value = self.get(key, default)
        if value is None:
            raise ConfigError(f"{self.source}: {key} is missing (a {self.config.get('model_type')} config gives it)")
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
            and value == int(value) and 0 <= value <= 2**40
        if not ok or (value == 0 and not zero):
            raise ConfigError(f"{self.source}: {key} must be a whole number >= {0 if zero else 1}, not {_show(value)}")
        return int(value)

    def flag(self, key: str, default: bool) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            raise ConfigError(f"{self.source}: {key} must be true or false, not {_show(value)}")
        return value

    def layers(self, key: str) -> list | None:
        value = self.config.get(key)
        if value is not None and not (isinstance(value, list) and len(value) == self.count("num_hidden_layers")):
            raise ConfigError(f"{self.source}: {key} must list one entry per layer (num_hidden_layers)")
        return value


def _pretraining_length(cfg: Reader) -> int:
    """The pre-training sequence length where the file records it, else 0."""
    for key in ("rope_scaling", "rope_parameters"):
        rope = cfg.config.get(key)
        if isinstance(rope, dict) and rope.get("original_max_position_embeddings") is not None:
            return Reader(rope, {}, f"{cfg.source}: {key}").count("original_max_position_embeddings")
    return cfg.count("initial_context_length") if cfg.config.get("initial_context_length") is not None else 0


def _qwen3_moe(cfg: Reader, out: dict) -> None:
    out["moe_experts"] = cfg.count("num_experts")
    out["moe_topk"] = cfg.count("num_experts_per_tok")
    dense_d_ff, out["d_ff"] = out["d_ff"], cfg.count("moe_intermediate_size")
    step = cfg.count("decoder_sparse_step", 1)
    dense = cfg.get("mlp_only_layers", [])
    if not isinstance(dense, list) or dense != list(range(len(dense))):
        raise ConfigError(f"{cfg.source}: mlp_only_layers {_show(dense)} is not representable: only leading dense "
                          f"layers [0, 1, ..., k-1] are (moe_dense_layers)")
    if step > 1 or dense:
        out.update(moe_layer_freq=step, moe_dense_layers=len(dense), dense_d_ff=dense_d_ff)


def _deepseek(cfg: Reader, out: dict) -> None:
    out["moe_experts"] = cfg.count("n_routed_experts")
    out["moe_topk"] = cfg.count("num_experts_per_tok")
    dense_d_ff, out["d_ff"] = out["d_ff"], cfg.count("moe_intermediate_size")
    out["moe_shared_experts"] = cfg.count("n_shared_experts", 0, zero=True)
    out["moe_dense_layers"] = cfg.count("first_k_dense_replace", 0, zero=True)
    if out["moe_dense_layers"]:
        out["dense_d_ff"] = dense_d_ff
    freq = cfg.count("moe_layer_freq", 1)
    if freq > 1:
        out.update(moe_layer_freq=freq, dense_d_ff=dense_d_ff)
    out["n_kv_heads"] = out["n_heads"]  # MLA: the heads' keys and values come from one latent (n_kv_heads = n_heads)
    del out["d_head"]  # unused by MLA (qk_nope_dim + qk_rope_dim, v_head_dim)
    out["q_lora_rank"] = cfg.count("q_lora_rank", 0, zero=True)  # null: no query compression (DeepSeek-V2-Lite)
    out["kv_lora_rank"] = cfg.count("kv_lora_rank")
    out["qk_rope_dim"] = cfg.count("qk_rope_head_dim")
    out["qk_nope_dim"] = cfg.count("qk_nope_head_dim")
    out["v_head_dim"] = cfg.count("v_head_dim")


def _llama4(cfg: Reader, out: dict) -> None:
    out["moe_experts"] = cfg.count("num_local_experts")
    out["moe_topk"] = cfg.count("num_experts_per_tok")
    out["moe_shared_experts"] = 1
    step = cfg.count("interleave_moe_layer_step", 1)
    if step > 1:
        out.update(moe_layer_freq=step, dense_d_ff=cfg.count("intermediate_size_mlp"))
    chunk = cfg.get("attention_chunk_size")
    if chunk is not None:
        rope = cfg.layers("no_rope_layers") or [int((i + 1) % 4 != 0) for i in range(out["n_layers"])]
        out.update(attn_window=cfg.count("attention_chunk_size"), attn_window_frac=sum(map(bool, rope)) / len(rope),
                   attn_window_kind="chunked")


def _windows(cfg: Reader, kind: str, out: dict) -> None:
    """Sliding-window attention: the window and the share of layers it applies to."""
    if cfg.get("sliding_window") is None or kind in ("qwen2", "qwen3", "qwen3_moe") and not cfg.get("use_sliding_window"):
        return  # Qwen2/3 keep a sliding_window field that applies only with use_sliding_window true
    n = out["n_layers"]
    types = cfg.layers("layer_types")
    if types is not None:
        windowed = sum(t == "sliding_attention" for t in types)
    elif kind in _ALTERNATE:
        windowed = sum(bool((i + 1) % 2) for i in range(n))
    elif kind == "gemma3_text":
        pattern = cfg.count("sliding_window_pattern")
        windowed = sum(bool((i + 1) % pattern) for i in range(n))
    elif kind == "gemma":
        return
    elif kind in ("qwen2", "qwen3", "qwen3_moe"):  # the layers from max_window_layers on use the window
        windowed = n - min(cfg.count("max_window_layers", n, zero=True), n)
    else:  # Mistral, Mixtral: every layer
        windowed = n
    if windowed:
        out.update(attn_window=cfg.count("sliding_window"), attn_window_frac=windowed / n, attn_window_kind="sliding")


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
