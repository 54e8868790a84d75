"""Your own model: a Hugging Face config.json (objectives/catalog/hf_config.py), aliases and did-you-mean
(objectives/catalog/model_names.py, model_aliases.yaml), in a space (dse/spec/model_source.py) and a table.

The fixtures in tests/data/hf_configs/ are the published config.json files (their sources in that folder's
README.md); each must give the columns of its models.yaml entry, except where the entry differs for a
documented reason (DIFFERENCES)."""

import json
from pathlib import Path

import numpy as np
import pytest
from cli_run import run_cli

import objectives
from dse.spec import load_spec
from objectives.catalog import MODEL_FIELDS, models
from objectives.catalog.hf_config import ConfigError, architecture, load
from objectives.catalog.model_names import aliases, canonical, model_row

HERE = Path(__file__).parent / "data" / "hf_configs"

#: fixture -> the catalog entry whose columns it must give
CATALOG = {
    "Meta-Llama-3.1-8B": "llama3-8b",  # Llama 3.1 kept Llama 3's shapes (model_aliases.yaml: llama3.1-8b)
    "Meta-Llama-3.1-70B": "llama3-70b",  # (model_aliases.yaml: llama3.1-70b)
    "Meta-Llama-3.1-405B": "llama3.1-405b",
    "Qwen3-30B-A3B": "qwen3-30b-a3b",
    "Qwen3-235B-A22B": "qwen3-235b-a22b",
    "Mixtral-8x7B-v0.1": "mixtral-8x7b",
    "Mixtral-8x22B-v0.1": "mixtral-8x22b",
    "DeepSeek-V3": "deepseek-v3",
    "DeepSeek-R1": "deepseek-r1",
    "Kimi-K2-Instruct": "kimi-k2",
    "gpt-oss-120b": "gpt-oss-120b",
    "gpt-oss-20b": "gpt-oss-20b",
    "Llama-4-Maverick-17B-128E-Instruct": "llama4-maverick",
    "Llama-4-Scout-17B-16E-Instruct": "llama4-scout",
    "gemma-3-27b-it": "gemma3-27b",
}
#: documented differences between a published config and its catalog entry: column -> the config's value
DIFFERENCES = {
    # Gemma3TextConfig's default vocab_size (the file leaves it out): the Hugging Face checkpoint's embedding
    # rows, 64 more than google-deepmind/gemma's 262144 that models.yaml carries (tests/data/hf_configs/README.md)
    "gemma-3-27b-it": {"vocab_size": 262208.0},
}
#: the file records a pre-training length (rope_scaling.original_max_position_embeddings, gpt-oss's
#: initial_context_length); the others leave seq_len to the space or table
RECORDS_SEQ_LEN = {"Meta-Llama-3.1-8B", "Meta-Llama-3.1-70B", "Meta-Llama-3.1-405B", "DeepSeek-V3", "DeepSeek-R1",
                   "Kimi-K2-Instruct", "gpt-oss-120b", "gpt-oss-20b", "Llama-4-Scout-17B-16E-Instruct"}


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_published_config_gives_the_catalog_entry(name):
    entry = models()[CATALOG[name]]
    columns = load(HERE / f"{name}.json")
    assert ("seq_len" in columns) == (name in RECORDS_SEQ_LEN)
    row = model_row({"seq_len": entry["seq_len"], **columns})
    expected = {**entry, **DIFFERENCES.get(name, {})}
    for field in MODEL_FIELDS:
        assert row[field] == pytest.approx(expected[field], rel=1e-4), field  # attn_window_frac: 0.8387 = 52/62


def test_every_catalog_model_of_a_supported_family_has_a_fixture():
    tested = set(CATALOG.values())
    families = ("llama3", "qwen3", "mixtral", "deepseek", "kimi", "gpt-oss", "llama4", "gemma")
    assert {m for m in models() if m.startswith(families)} - tested == {"llama3.3-70b"}  # its config: Llama 3.1 70B's


def test_qwen3_dense_by_hand():
    """Qwen/Qwen3-32B (no catalog entry): the columns read off the file by hand."""
    columns = load(HERE / "Qwen3-32B.json")
    assert columns == {"n_layers": 64, "d_model": 5120, "n_heads": 64, "n_kv_heads": 8, "d_head": 128, "d_ff": 25600,
                       "ffn_kind": "swiglu", "vocab_size": 151936, "tied_embeddings": False, "moe_experts": 0,
                       "moe_topk": 0}  # head_dim 128 though 5120 / 64 = 80; no sliding window (use_sliding_window false)


def test_gemma2_and_qwen2_rules():
    """Gemma 2 windows every other layer, Gemma 1 none; Qwen2 takes hidden_size // heads as head_dim and its
    sliding_window only with use_sliding_window."""
    gemma2 = {"model_type": "gemma2", "num_hidden_layers": 42, "hidden_size": 3584, "num_attention_heads": 16,
              "num_key_value_heads": 8, "head_dim": 256, "intermediate_size": 14336, "vocab_size": 256000,
              "sliding_window": 4096}
    cols = architecture(gemma2)
    assert cols["tied_embeddings"] is True and cols["d_head"] == 256
    assert (cols["attn_window"], cols["attn_window_frac"], cols["attn_window_kind"]) == (4096, 0.5, "sliding")
    assert "attn_window" not in architecture({**gemma2, "model_type": "gemma"})
    qwen2 = {"model_type": "qwen2", "num_hidden_layers": 28, "hidden_size": 3584, "num_attention_heads": 28,
             "num_key_value_heads": 4, "intermediate_size": 18944, "vocab_size": 152064, "sliding_window": 131072,
             "use_sliding_window": False, "tie_word_embeddings": False}
    assert architecture(qwen2)["d_head"] == 128 and "attn_window" not in architecture(qwen2)


@pytest.mark.parametrize("config, needle", [
    ({"model_type": "bert", "hidden_size": 768}, "model_type 'bert' is not a supported family; supported: "),
    ({"hidden_size": 768}, "model_type None is not a supported family"),
    ({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
      "intermediate_size": 128}, "vocab_size is missing"),
    ({"model_type": "llama", "num_hidden_layers": 2.5, "hidden_size": 64, "num_attention_heads": 4,
      "intermediate_size": 128, "vocab_size": 100}, "num_hidden_layers must be a whole number >= 1, not 2.5"),
    ({"model_type": "mixtral", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
      "intermediate_size": 128, "vocab_size": 100, "num_experts_per_tok": 2}, "num_local_experts is missing"),
    ([1, 2], "must be a JSON object"),
])
def test_a_bad_config_is_one_line_naming_the_file_and_key(tmp_path, config, needle):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(ConfigError) as err:
        load(path)
    assert str(err.value).startswith(str(path)) and needle in str(err.value) and "\n" not in str(err.value)
    if "supported" in needle:
        assert "llama" in str(err.value) and "deepseek_v3" in str(err.value) and "gemma3" in str(err.value)


def test_aliases_resolve_and_each_has_a_reason():
    assert canonical("llama3.1-70b") == "llama3-70b" and canonical("llama3.1-8b") == "llama3-8b"
    assert canonical("meta-llama/meta-llama-3-70b") == "llama3-70b"  # a Hugging Face id, any case
    assert canonical("llama3-70b") == "llama3-70b" and canonical("lama3-70b") is None
    assert all(target in models() and alias not in models() for alias, target in aliases().items())


def test_a_table_names_an_alias_or_a_config(capsys):
    base = {"gpu": "h100-sxm", "n_gpus": 512, "global_batch": 512, "tp": 8, "pp": 4, "micro_batch": 1}
    names = np.array(["llama3-70b", "llama3.1-70b", str(HERE / "Meta-Llama-3.1-70B.json")], dtype=object)
    out = objectives.evaluate({**base, "model": names})
    assert out["step_time_s"][0] == out["step_time_s"][1] == out["step_time_s"][2]
    assert list(out["model"]) == list(names)  # the name given stays the row's label
    with pytest.raises(objectives.InputError, match=r"column 'model': unknown model 'llama3.1-7b'; did you mean"):
        objectives.evaluate({**base, "model": "llama3.1-7b"})


def test_evaluate_cli_config_and_typo(tmp_path, capsys):
    good = tmp_path / "good.csv"
    good.write_text(f"model,gpu,n_gpus,global_batch,tp,pp,micro_batch,seq_len\n{HERE / 'Qwen3-30B-A3B.json'},"
                    "h100-sxm,64,256,2,1,1,4096\nllama3.1-8b,h100-sxm,64,256,2,1,1,\n")
    rc, out, err = run_cli(capsys, "evaluate", str(good), "-o", str(tmp_path / "o.csv"))
    assert rc == 0, err
    bad = tmp_path / "bad.csv"
    bad.write_text("model,gpu,n_gpus,global_batch,tp,pp,micro_batch\nllama3.1-7Ob,h100-sxm,64,256,2,1,1\n")
    rc, out, err = run_cli(capsys, "evaluate", str(bad), "-o", str(tmp_path / "o.csv"))
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "unknown model 'llama3.1-7Ob'; did you mean 'llama3.1-70b'" in err, err


SPACE = """name: own
workload: {{model: {model}, train_tokens: 1e11, global_batch: 512{extra}}}
cluster: {{gpu: [h100-sxm], n_gpus: {{min: 64, max: 128, scale: pow2}}}}
objectives: [{{metric: time_to_train_days, direction: min}}]
search: {{sampler: grid, trials: 2, batch_size: 2, seed: 0}}
"""


def test_space_config_relative_to_the_space_file(tmp_path):
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.json").write_text((HERE / "DeepSeek-V3.json").read_text())
    space = tmp_path / "space.yaml"
    space.write_text(SPACE.format(model="cfg/config.json", extra=", n_layers: 31"))
    workload = load_spec(space).workload
    assert workload["model"] == "cfg/config.json" and workload["n_layers"] == 31  # the space's own value wins
    assert workload["kv_lora_rank"] == 512 and workload["moe_dense_layers"] == 3 and workload["seq_len"] == 4096
    assert workload["tied_embeddings"] == 0


def test_space_alias_resolves_and_a_typo_is_one_line_exit_2(tmp_path, capsys):
    space = tmp_path / "space.yaml"
    space.write_text(SPACE.format(model="llama3.1-70b", extra=""))
    assert load_spec(space).workload["model"] == "llama3.1-70b"
    space.write_text(SPACE.format(model="lama3.1-70b", extra=""))
    rc, out, err = run_cli(capsys, "sweep", str(space), "--no-ray", "--out", str(tmp_path / "run"))
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "workload.model: unknown model 'lama3.1-70b'; did you mean 'llama3.1-70b'" in err, err
    space.write_text(SPACE.format(model="missing.json", extra=""))
    rc, out, err = run_cli(capsys, "sweep", str(space), "--no-ray", "--out", str(tmp_path / "run"))
    assert rc == 2 and "workload.model: " in err and "missing.json: cannot read" in err, err
