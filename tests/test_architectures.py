"""Today's architectures (MLA, shared experts, leading dense layers, every-k-th MoE layer, sliding-window and
chunked attention) against hand derivations and the model cards (objectives/training/transformer.py)."""

import numpy as np
import pytest

import objectives
from objectives.training.transformer import attended_keys

CARD_IDS = ("deepseek-v3", "deepseek-r1", "kimi-k2", "gpt-oss-120b", "gpt-oss-20b", "qwen3-235b-a22b", "qwen3-30b-a3b",
            "llama4-maverick", "llama4-scout", "llama3.3-70b", "gemma3-27b")


def _eval(model, **extra):
    row = dict(model=model, gpu="b200", n_gpus=8, global_batch=8, tp=1, pp=1, micro_batch=1, ep=1)
    row.update(extra)
    return objectives.evaluate(row)


def _one(out, name):
    return float(out[name][0])


def test_deepseek_v3_mla_parameters():
    """DeepSeek-V3 (config_671B.json: 61 layers, h 7168, 128 heads, q_lora 1536, kv_lora 512, rope 64, nope 128,
    v 128; 256 experts of 2048 top-8, 1 shared, first 3 layers dense of 18432; vocab 129280, untied).

    MLA per layer (DeepSeek-V3 inference/model.py): wq_a h*1536 = 11,010,048; wq_b 1536*128*(128+64) =
    37,748,736; wkv_a h*(512+64) = 4,128,768; wkv_b 512*128*(128+128) = 16,777,216; wo 128*128*h =
    117,440,512 -> 187,105,280; norms 2h + 1536 + 512 = 16,384. Of these the down projections wq_a and
    wkv_a, 15,138,816, are replicated on every tensor-parallel rank (Megatron-Core duplicated linears).
    One expert 3*h*2048 = 44,040,192; an MoE layer 256 + 1 shared experts and the router h*256:
    11,320,164,352, of which a token uses 9 experts and the router: 398,196,736; a dense layer 3*h*18432 =
    396,361,728. Embeddings 2*129280*h = 1,853,358,080, final norm h.
    Total 61*(187,105,280 + 16,384) + 58*11,320,164,352 + 3*396,361,728 + 1,853,358,080 + 7,168 =
    671,026,404,352 (the card: 671B); active 61*187,121,664 + 58*398,196,736 + 3*396,361,728 + 1,853,365,248 =
    37,552,282,624 (the card: 37B, 1.5% above; README_WEIGHTS 36.7B).
    """
    out = _eval("deepseek-v3")
    assert _one(out, "params_attn_layer") == 187_105_280
    assert _one(out, "params_attn_replicated_layer") == 11_010_048 + 4_128_768
    assert _one(out, "params_ffn_layer") == 11_320_164_352
    assert _one(out, "params_ffn_active_layer") == 398_196_736
    assert _one(out, "params_ffn_dense_layer") == 396_361_728
    assert _one(out, "n_moe_layers") == 58
    assert _one(out, "n_params") == 671_026_404_352
    assert _one(out, "n_params_active") == 37_552_282_624


def test_deepseek_v3_kv_cache_and_activations():
    """KV cache: MLA caches the 512-wide latent and the 64-wide shared rotary key per layer per token
    (DeepSeek-V3 model.py kv_cache and pe_cache): 61 * 576 * 2 bytes = 70,272 bytes (68.6 KiB) per token,
    against 61 * 128 heads * (192 + 128) * 2 = 4,997,120 for its per-head keys and values.

    Activations, training (unabsorbed MLA: the latents are projected up to per-head keys and values before
    the kernel), bf16, no recompute, tp 1, no sequence parallelism, per token of one MoE layer:
    Q 2*128*192 = 49,152; K 49,152; V 2*128*128 = 32,768; context (O's input) 2*128*128 = 32,768; latents,
    each norm's input and its up projection's input, (2+2)*(1536+512) = 8,192 -> 172,032 of attention;
    MLP 2048 * (2*2 + 2) * (8 routed + 1 shared) = 110,592; two norm inputs 4h, the QKV input 2h, the router's
    bf16 input 2h = 57,344; 8 dispatched copies and 8 expert outputs 8*h*(2+2) = 229,376 -> 569,344 bytes.
    pp 16 puts 4 layers, all MoE, on the busiest stage (the first holds the 3 dense ones); 1F1B holds 16
    micro-batches of its 4 layers: 64 layer-micro-batches of 4,096 tokens = 149,250,113,536 bytes, plus the
    fp32 logits 4*4096*129280 = 2,118,123,520: 151.368237056 GB.
    """
    out = _eval("deepseek-v3", n_gpus=256, global_batch=4096, pp=16, ep=8, recompute="none", precision="bf16")
    assert _one(out, "kv_cache_bytes_per_token") == 70_272
    assert _one(out, "layers_per_stage") == 4 and _one(out, "moe_layers_per_stage") == 4
    assert _one(out, "mem_activations_gb") == pytest.approx(151.368237056, rel=1e-12)


def test_gpt_oss_120b_alternating_window_attention_flops():
    """gpt-oss-120b at s = 4096 (36 layers, 64 heads of 64, 8 KV heads, 128 experts of 2880 top-4, V 201088):
    18 full layers attend causally to s/2 = 2048 keys per query on average, 18 windowed layers to
    min(i+1, 128): (128*129/2 + 3968*128)/4096 ~ 128 - 128^2/(2*4096) = 126 keys. Core FLOPs forward per
    token 2 * 64 * (64 + 64) * (18*2048 + 18*126) = 641,138,688 (full attention everywhere: 1,207,959,552).
    Matmuls forward 2*(36*(Q,K,V,O 26,542,080 + 4 experts and router 99,901,440)) + 2*V*h = 10,262,200,320;
    training 3x: 32,710,017,024 FLOPs per token.
    """
    out = _eval("gpt-oss-120b", seq_len=4096)
    assert _one(out, "n_windowed_layers") == 18
    assert _one(out, "model_flops_per_token") == 32_710_017_024
    assert _one(out, "model_flops_per_token_full_attn") == 32_710_017_024 + 3 * 641_138_688
    dense_attn = _eval("gpt-oss-120b", seq_len=4096, attn_window=0)
    assert _one(dense_attn, "model_flops_per_token") - _one(out, "model_flops_per_token") == 3 * 16384 * 18 * (2048 - 126)


def test_gpt_oss_windowed_layers_in_compute():
    """pp 4: 9 layers a stage, of which at most 5 full-attention ones (alternating). A flash kernel does a
    windowed layer's band of 128 keys plus the half key tile at its edge, 192 keys per query, where a full
    layer does 2048: the stage's mean attention time is (5 + 4 * 192/2048) / 9 of a full layer's."""
    win = _eval("gpt-oss-120b", n_gpus=64, global_batch=64, pp=4, ep=8)
    full = _eval("gpt-oss-120b", n_gpus=64, global_batch=64, pp=4, ep=8, attn_window=0)
    assert _one(win, "full_attn_layers_per_stage") == 5
    assert _one(win, "time_attn_fwd_s") == pytest.approx(_one(full, "time_attn_fwd_s") * (5 + 4 * 192 / 2048) / 9, rel=1e-12)
    assert _one(win, "time_compute_mb_s") < _one(full, "time_compute_mb_s")


def test_kimi_k2_parameters():
    """Kimi K2 (README: 61 layers incl. 1 dense, h 7168, 64 heads, 384 experts of 2048, 8 selected, 1 shared;
    config copy: MLA ranks as DeepSeek-V3, vocab 163840, dense 18432).

    MLA per layer: 11,010,048 + 1536*64*192 = 18,874,368 + 4,128,768 + 512*64*256 = 8,388,608 + 64*128*h =
    58,720,256 -> 101,122,048; norms 16,384. MoE layer: 385 experts of 44,040,192 and the router h*384 =
    16,958,226,432; used per token 9 experts + router = 399,114,240. Embeddings 2*163840*h = 2,348,810,240.
    Total 61*101,138,432 + 60*16,958,226,432 + 396,361,728 + 2,348,810,240 + 7,168 = 1,026,408,209,408;
    active 32,861,477,888 (31,687,072,768 without the input embedding).
    """
    out = _eval("kimi-k2")
    assert _one(out, "params_attn_layer") == 101_122_048
    assert _one(out, "n_moe_layers") == 60
    assert _one(out, "n_params") == 1_026_408_209_408
    assert _one(out, "n_params_active") == 32_861_477_888
    assert _one(out, "kv_cache_bytes_per_token") == 70_272


# (total, active, whether the card's active count includes the input embedding, source)
CARDS = {
    "deepseek-v3": (671e9, 37e9, True, "DeepSeek-V3 README: 671B total, 37B activated"),
    "deepseek-r1": (671e9, 37e9, True, "DeepSeek-R1 README: 671B total, 37B activated"),
    # the README's 1T / 32B are rounded: 32.86B with the input embedding would not read 32B; without it
    # (a lookup, no matmul) 31.69B does. The total as the GLM-4.5 report lists it (shared model-architectures notes)
    "kimi-k2": (1043e9, 32e9, False, "Kimi-K2 README: 32B activated; 1043B total (GLM-4.5 report)"),
    # the gpt-oss card counts the unembedding, not the embedding: 5.13B = 4.55B of layers + 0.58B
    "gpt-oss-120b": (117e9, 5.1e9, False, "openai/gpt-oss README: 117B parameters, 5.1B active"),
    "gpt-oss-20b": (21e9, 3.6e9, False, "openai/gpt-oss README: 21B parameters, 3.6B active"),
    "qwen3-235b-a22b": (235e9, 22e9, True, "Qwen3-235B-A22B model card: 235B total, 22B activated"),
    "qwen3-30b-a3b": (30.5e9, 3.3e9, True, "Qwen3-30B-A3B model card: 30.5B total, 3.3B activated"),
    "llama4-maverick": (400e9, 17e9, True, "llama-models models/llama4/MODEL_CARD.md: 400B total, 17B active"),
    "llama4-scout": (109e9, 17e9, True, "llama-models models/llama4/MODEL_CARD.md: 109B total, 17B active"),
    "llama3.3-70b": (70e9, 70e9, True, "llama-models models/llama3_3/MODEL_CARD.md: 70B"),
    "gemma3-27b": (27e9, 27e9, True, "Gemma 3 27B (gemma/gm/nn/_gemma.py Gemma3_27B): 27B"),
}


@pytest.mark.parametrize("model", CARD_IDS)
def test_catalog_total_and_active_parameters_match_the_model_card(model):
    total, active, with_embedding, _source = CARDS[model]
    out = _eval(model)
    counted = _one(out, "n_params_active") - (0.0 if with_embedding else _one(out, "vocab_size") * _one(out, "d_model"))
    assert _one(out, "n_params") == pytest.approx(total, rel=0.02)
    assert counted == pytest.approx(active, rel=0.02)


def test_deepseek_v3_flops_match_megatron_bridge_published_count():
    """Megatron-Bridge publishes DeepSeek-V3 at 1,635 TFLOP/s per GPU and 6,288 tokens/s per GPU (26.08, 256
    GB300, run 95 of training_runs.csv): 2.6002e11 FLOPs per token by Megatron-LM's
    num_floating_point_operations, which counts the one multi-token-prediction module its recipes train
    (recipes/deepseek/h100/deepseek_v3.py mtp_num_layers 1): one more MoE layer and output pass plus its
    2h x h projection. Ours (without the module) plus Megatron's count for it agrees within 0.5%:
    MTP = 3 * (2 * (MLA 187,105,280 + 9 experts 396,361,728 + 2h^2 + h*V) + causal core 2*128*320*2048)."""
    out = _eval("deepseek-v3", seq_len=4096)
    h, V = 7168, 129280
    mtp = 3 * (2 * (187_105_280 + 9 * 44_040_192 + 2 * h * h + h * V) + 2 * 128 * 320 * 2048)
    assert _one(out, "model_flops_per_token") + mtp == pytest.approx(1635e12 / 6288, rel=0.005)


def test_chunked_attention_costs_blocks_of_the_chunk():
    """Llama 4's chunked layers attend within aligned 8,192-token chunks: at s = 32,768 a query sees on average
    8192/2 = 4,096 keys (a sliding window of 8,192 would see 8192 - 8192^2/65536 = 7,168); at s <= 8,192 a
    chunk is the whole sequence, s/2."""
    assert attended_keys(32768.0, 8192.0, 1.0) == 4096.0
    assert attended_keys(32768.0, 8192.0, 0.0) == 7168.0
    assert attended_keys(8192.0, 8192.0, 1.0) == 4096.0
    assert attended_keys(12288.0, 8192.0, 1.0) == (8192**2 + 4096**2) / (2 * 12288)
    long = _eval("llama4-scout", seq_len=32768)
    full = _eval("llama4-scout", seq_len=32768, attn_window=0)
    core_saved = 3 * 2 * 40 * 256 * 36 * (16384 - 4096)  # 36 chunked layers, 40 heads of 128 + 128
    assert _one(full, "model_flops_per_token") - _one(long, "model_flops_per_token") == core_saved


def test_llama4_maverick_alternating_moe_layers():
    """Maverick: every 2nd layer MoE (128 routed experts of 8192 top-1, 1 shared), the others dense of 16384:
    24 + 24. pp 16 gives 3 layers a stage, the busiest holding 2 MoE layers and 1 dense; its experts are
    2 layers x 128 x 3*5120*8192 = 32,212,254,720 parameters over ep 8."""
    out = _eval("llama4-maverick", n_gpus=128, global_batch=128, pp=16, ep=8)
    assert _one(out, "n_moe_layers") == 24
    assert _one(out, "layers_per_stage") == 3 and _one(out, "moe_layers_per_stage") == 2
    assert _one(out, "params_expert_per_gpu") == 2 * 128 * 3 * 5120 * 8192 / 8
    assert _one(out, "params_ffn_dense_layer") == 3 * 5120 * 16384


def test_leading_dense_layers_stay_off_the_busiest_stage():
    """DeepSeek-V3's 3 dense layers sit on the first stage: with pp 16 every other stage holds 4 MoE layers,
    and a single stage (pp 1) holds all 58."""
    assert _one(_eval("deepseek-v3", n_gpus=256, global_batch=256, pp=16, ep=8), "moe_layers_per_stage") == 4
    assert _one(_eval("deepseek-v3", n_gpus=8, ep=8), "moe_layers_per_stage") == 58


def test_shared_experts_are_dense_parameters_and_dispatch_nothing():
    """A shared expert is split over tp like a dense MLP and replicated over ep (Megatron-Core
    SharedExpertMLP); adding one leaves the expert parameters per GPU and the all-to-all time unchanged."""
    base = dict(model="qwen3-30b-a3b", n_gpus=16, global_batch=16, ep=8)
    none, one = _eval(**base), _eval(**base, moe_shared_experts=1)
    assert _one(one, "params_expert_per_gpu") == _one(none, "params_expert_per_gpu")
    assert _one(one, "params_per_gpu") - _one(none, "params_per_gpu") == 48 * 3 * 2048 * 768
    assert _one(one, "time_ep_comm_mb_s") == _one(none, "time_ep_comm_mb_s")
    assert _one(one, "model_flops_per_token") - _one(none, "model_flops_per_token") == 6 * 48 * 3 * 2048 * 768


@pytest.mark.parametrize("override, column", [
    ({"qk_rope_dim": 0}, "qk_rope_dim"),
    ({"n_kv_heads": 8}, "n_kv_heads"),
    ({"attn_window_frac": 1.5}, "attn_window_frac"),
    ({"moe_dense_layers": 61}, "moe_dense_layers"),
])
def test_architecture_input_errors(override, column):
    with pytest.raises(objectives.InputError) as err:
        _eval("deepseek-v3", **override)
    assert err.value.column == column


def test_windowed_search_and_mla_rows_are_vectorized():
    """Rows of different architectures in one table give each row its own counts (no per-row branch)."""
    out = objectives.evaluate(dict(model=np.array(["deepseek-v3", "gpt-oss-120b", "llama3-70b"]), gpu="b200",
                                   n_gpus=8, global_batch=8, tp=1, pp=1, micro_batch=1, ep=1))
    one = [_one(_eval(m), "model_flops_per_token") for m in ("deepseek-v3", "gpt-oss-120b", "llama3-70b")]
    assert np.array_equal(out["model_flops_per_token"], one)


def test_selective_recompute_of_mla_drops_its_per_head_qkv():
    """Selective recompute of an MLA layer re-runs its up projections (Megatron-Core recompute_modules
    mla_up_proj) and keeps no per-head Q, K, V: of the 569,344 bytes per token of the MoE layer above,
    Q 49,152 + K 49,152 + V 32,768 = 131,072 go, 438,272 stay: 64 layer-micro-batches of 4,096 tokens plus the
    logits = 117.008498688 GB. Its compute re-runs the up projections, their column-parallel GEMMs."""
    row = dict(n_gpus=256, global_batch=4096, pp=16, ep=8, precision="bf16")
    none = _eval("deepseek-v3", recompute="none", **row)
    sel = _eval("deepseek-v3", recompute="selective", **row)
    assert _one(sel, "mem_activations_gb") == pytest.approx(117.008498688, rel=1e-12)
    rerun = _one(sel, "time_layer_bwd_s") - _one(none, "time_layer_bwd_s")
    assert rerun > _one(sel, "time_qkv_gemm_s") and rerun < 1.1 * _one(sel, "time_qkv_gemm_s")
    dense = _eval("llama3-70b", n_gpus=8, tp=8, recompute="selective")  # flash attention: selective is free
    assert _one(dense, "time_layer_bwd_s") == _one(_eval("llama3-70b", n_gpus=8, tp=8, recompute="none"), "time_layer_bwd_s")
