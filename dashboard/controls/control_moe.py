"""The attention and mixture-of-experts records of the control table
(:mod:`dashboard.controls.control_table`, which places them): their sections, the conditions that
show them and the values the estimator receives while they are hidden."""

from __future__ import annotations

from typing import Any

from dashboard.controls.control_record import ON_OFF, Control, When
from model.specs import execution as ex

MOE = When("experts", lambda v: v != 0)  # a mixture of experts (routed experts > 0)
GQA = When("attention", lambda v: v == "gqa")
MLA = When("attention", lambda v: v == "mla")
ZERO3 = When("zero", lambda v: v == 3)  # weights sharded: the FSDP options apply
# sections of a group: (title, condition for being drawn open; None: always open)
SECTIONS: dict[str, tuple[str, When | None]] = {
    "attention": ("Attention", None),
    "moe": ("Mixture of experts", MOE),
    "moe_execution": ("Mixture of experts", MOE),
    "kernels": ("Kernels, schedule & optimizer", None),
    "fsdp": ("FSDP (ZeRO-3)", ZERO3),
}


def _attention_kind(m: Any) -> str:
    """MLA with low-rank keys/values, MHA with one K/V head per head, else GQA (MQA: 1)."""
    return "mla" if m.mla else ("mha" if m.kv_heads == m.heads else "gqa")


def _zero(_: dict[str, Any]) -> int:
    return 0


def _heads(scn: dict[str, Any]) -> Any:
    return scn["heads"]


# attention: the kind decides which of its sizes apply (MHA: K/V heads = heads; MLA: its ranks)
ATTENTION_CONTROLS = (
    Control("attention", "Attention type", "model", "radio", str,
            "MHA: one key/value head per query head; GQA/MQA: fewer key/value heads shared by "
            "groups of heads (1: multi-query); MLA: multi-head latent attention (DeepSeek-V2/"
            "V3), keys and values (and queries) through low-rank latents.",
            choices=("mha", "gqa", "mla"), names=("MHA", "GQA / MQA", "MLA"),
            read=_attention_kind, section="attention"),
    Control("kv_heads", "KV heads", "model", "number", int,
            "Key/value heads of grouped-query attention; must divide the heads (1: "
            "multi-query).", lo=1, hi=100_000, spec="kv_heads", section="attention", when=GQA,
            off=_heads),
    Control("q_lora_rank", "Query compression rank", "model", "number", int,
            "MLA: rank of the query latent (0: queries projected directly from the hidden "
            "state, as DeepSeek-V2-Lite).", lo=0, hi=1_000_000, spec="q_lora_rank",
            section="attention", when=MLA, off=_zero),
    Control("kv_lora_rank", "KV compression rank", "model", "number", int,
            "MLA: rank of the key/value latent, what the KV cache keeps per token (512 in "
            "DeepSeek-V3).", lo=0, hi=1_000_000, spec="kv_lora_rank", section="attention",
            when=MLA, off=_zero),
    Control("qk_nope_head_dim", "Q/K head dim (no rotary)", "model", "number", int,
            "MLA: query/key dimension per head without rotary embedding.", lo=0, hi=100_000,
            spec="qk_nope_head_dim", section="attention", when=MLA, off=_zero),
    Control("qk_rope_head_dim", "Q/K rotary head dim", "model", "number", int,
            "MLA: query/key dimension per head that carries the rotary embedding (the key's "
            "is shared by the heads).", lo=0, hi=100_000, spec="qk_rope_head_dim",
            section="attention", when=MLA, off=_zero),
    Control("v_head_dim", "Value head dim", "model", "number", int,
            "MLA: value (and attention output) dimension per head.", lo=0, hi=100_000,
            spec="v_head_dim", section="attention", when=MLA, off=_zero),
)
# mixture of experts: routed experts 0 is a dense model, whatever the hidden sizes say
MOE_CONTROLS = (
    Control("experts", "Routed experts", "model", "number", int,
            "Routed experts E per MoE layer; 0: a dense model (the MoE sizes below do not "
            "apply).", lo=0, hi=100_000, spec="experts", section="moe"),
    Control("top_k", "Experts per token (top-k)", "model", "number", int,
            "Routed experts each token is sent to: k copies of each token cross the "
            "expert-parallel all-to-all and k expert MLPs run per token.", lo=0, hi=100_000,
            spec="top_k", section="moe", when=MOE, off=_zero),
    Control("expert_ffn", "Expert FFN size", "model", "number", int,
            "Hidden size f_e of one routed expert's MLP (2048 in DeepSeek-V3).", lo=0,
            hi=10_000_000, spec="expert_ffn", section="moe", when=MOE, off=_zero),
    Control("shared_experts", "Shared experts", "model", "number", int,
            "Experts every token passes through besides its routed ones (no all-to-all).",
            lo=0, hi=1_000, spec="shared_experts", section="moe", when=MOE, off=_zero),
    Control("dense_layers", "Dense layers", "model", "number", int,
            "Layers with a dense MLP of the FFN size instead of experts (DeepSeek-V3's first "
            "3); the others are MoE layers.", unit="layers", lo=0, hi=10_000,
            spec="dense_layers", section="moe", when=MOE, off=_zero),
)
# how a mixture of experts executes (the software stack's defaults; shown for a MoE model)
MOE_EXECUTION_CONTROLS = (
    Control("ep_dispatcher", "EP dispatcher", "execution", "dropdown", str,
            "How tokens travel to their experts: alltoall (NCCL all-to-all, one copy per "
            "routed expert) or flex (DeepEP / HybridEP: each token crosses to another NVLink "
            "domain once, then fans out over NVLink).", choices=ex.EP_DISPATCHERS,
            spec="ep_dispatcher", section="moe_execution", when=MOE),
    Control("ep_overlap", "EP all-to-all overlap", "execution", "switch", bool,
            "Overlap the expert-parallel all-to-alls of one microbatch with the compute of "
            "another (Megatron-Core's --overlap-moe-expert-parallel-comm); off: exposed.",
            choices=ON_OFF[0], names=ON_OFF[1], spec="ep_overlap", section="moe_execution",
            when=MOE),
    Control("moe_capacity_factor", "Capacity factor", "execution", "number", float,
            "0: dropless routing. c > 0: every expert takes c × the mean tokens per expert, "
            "dropping beyond and padding below (the token-drop recipes); it then sets the "
            "busiest GPU's load instead of the imbalance.", unit="× mean", lo=0, hi=64,
            spec="moe_capacity_factor", section="moe_execution", when=MOE),
    Control("moe_imbalance", "Load imbalance", "execution", "number", float,
            "Dropless routing: tokens of the busiest GPU's experts over the mean (1.0: "
            "force-balanced, as published benchmarks run; real routing is not); the step "
            "waits for that GPU's expert GEMMs and all-to-alls.", unit="× mean", lo=1, hi=64,
            spec="moe_imbalance", section="moe_execution", when=MOE),
    Control("expert_gemm", "Expert GEMM kernels", "execution", "dropdown", str,
            "How the local experts' matmuls run: multi-stream (Transformer Engine's "
            "GroupedLinear: one cuBLASLt GEMM per expert on 4 streams, so at most 4 experts' "
            "tiles share a wave) or grouped (one grouped kernel over every local expert: "
            "CUTLASS grouped GEMM, DeepGEMM).", choices=ex.EXPERT_GEMMS, spec="expert_gemm",
            section="moe_execution", when=MOE),
    Control("moe_router_padding", "Router pads for FP8", "execution", "switch", bool,
            "The router pads each expert's token count to the FP8 GEMM alignment "
            "(Megatron-Core's moe_router_padding_for_fp8); off: under FP8/FP4 the experts' "
            "input and output are copied through padded buffers (Transformer Engine "
            "Fp8Padding/Fp8Unpadding).", choices=ON_OFF[0], names=ON_OFF[1],
            spec="moe_router_padding", section="moe_execution", when=MOE),
    Control("moe_router_fusion", "Fused router", "execution", "switch", bool,
            "The router's score, top-k and aux-loss as Transformer Engine's fused kernels "
            "(Megatron-Core's moe_router_fusion); off: PyTorch ops, one kernel and one pass "
            "over HBM each (model/physics/token_kernels.py).", choices=ON_OFF[0],
            names=ON_OFF[1], spec="moe_router_fusion", section="moe_execution", when=MOE),
    Control("moe_permute_fusion", "Fused permutation", "execution", "switch", bool,
            "The tokens' permutation to their experts and back as Transformer Engine's fused "
            "kernels (Megatron-Core's moe_permute_fusion); off: PyTorch index ops, one kernel "
            "and one pass over HBM each.", choices=ON_OFF[0], names=ON_OFF[1],
            spec="moe_permute_fusion", section="moe_execution", when=MOE),
    Control("ep_max_domains", "Node-limited routing", "execution", "number", int,
            "Each token's experts lie in at most this many NVLink domains, so its all-to-all "
            "copies cross at most this many domains (DeepSeek-V3 §2.1.2: 4 nodes); 0: "
            "unlimited.", unit="domains", lo=ex.INTEGERS["ep_max_domains"][0],
            hi=ex.INTEGERS["ep_max_domains"][1], spec="ep_max_domains",
            section="moe_execution", when=MOE),
    Control("swiglu_fp8_cache", "FP8 SwiGLU cache", "execution", "switch", bool,
            "The routed experts keep their SwiGLU input in FP8 with 1×128 scales and rerun "
            "the SwiGLU in the backward, so the second expert linear keeps nothing of its own "
            "(DeepSeek-V3 §3.3.3).", choices=ON_OFF[0], names=ON_OFF[1],
            spec="swiglu_fp8_cache", section="moe_execution", when=MOE),
)
