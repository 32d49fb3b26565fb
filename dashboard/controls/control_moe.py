"""The attention and mixture-of-experts records of the control table
(:mod:`dashboard.controls.control_table`, which places them): their sections, the conditions that
show them and the values the estimator receives while they are hidden."""

from __future__ import annotations

from typing import Any

from dashboard.controls.control_record import ON_OFF, Control, When

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
    Control("kv_heads", "KV heads", "model", "number", spec="kv_heads", section="attention",
            when=GQA, off=_heads),
    Control("q_lora_rank", "Query compression rank", "model", "number", spec="q_lora_rank",
            section="attention", when=MLA, off=_zero),
    Control("kv_lora_rank", "KV compression rank", "model", "number", spec="kv_lora_rank",
            section="attention", when=MLA, off=_zero),
    Control("qk_nope_head_dim", "Q/K head dim (no rotary)", "model", "number",
            spec="qk_nope_head_dim", section="attention", when=MLA, off=_zero),
    Control("qk_rope_head_dim", "Q/K rotary head dim", "model", "number", spec="qk_rope_head_dim",
            section="attention", when=MLA, off=_zero),
    Control("v_head_dim", "Value head dim", "model", "number", spec="v_head_dim",
            section="attention", when=MLA, off=_zero),
)
# mixture of experts: routed experts 0 is a dense model, whatever the hidden sizes say
MOE_CONTROLS = (
    Control("experts", "Routed experts", "model", "number", spec="experts", section="moe"),
    Control("top_k", "Experts per token (top-k)", "model", "number", spec="top_k", section="moe",
            when=MOE, off=_zero),
    Control("expert_ffn", "Expert FFN size", "model", "number", spec="expert_ffn", section="moe",
            when=MOE, off=_zero),
    Control("shared_experts", "Shared experts", "model", "number", spec="shared_experts",
            section="moe", when=MOE, off=_zero),
    Control("dense_layers", "Dense layers", "model", "number", spec="dense_layers", section="moe",
            when=MOE, off=_zero),
)
# how a mixture of experts executes (the software stack's defaults; shown for a MoE model)
MOE_EXECUTION_CONTROLS = (
    Control("ep_dispatcher", "EP dispatcher", "execution", "dropdown", spec="ep_dispatcher",
            section="moe_execution", when=MOE),
    Control("ep_overlap", "EP all-to-all overlap", "execution", "switch", names=ON_OFF[1],
            spec="ep_overlap", section="moe_execution", when=MOE),
    Control("moe_capacity_factor", "Capacity factor", "execution", "number",
            spec="moe_capacity_factor", section="moe_execution", when=MOE),
    Control("moe_imbalance", "Load imbalance", "execution", "number", spec="moe_imbalance",
            section="moe_execution", when=MOE),
    Control("expert_gemm", "Expert GEMM kernels", "execution", "dropdown", spec="expert_gemm",
            section="moe_execution", when=MOE),
    Control("moe_router_padding", "Router pads for FP8", "execution", "switch", names=ON_OFF[1],
            spec="moe_router_padding", section="moe_execution", when=MOE),
    Control("moe_router_fusion", "Fused router", "execution", "switch", names=ON_OFF[1],
            spec="moe_router_fusion", section="moe_execution", when=MOE),
    Control("moe_permute_fusion", "Fused permutation", "execution", "switch", names=ON_OFF[1],
            spec="moe_permute_fusion", section="moe_execution", when=MOE),
    Control("ep_max_domains", "Node-limited routing", "execution", "number",
            spec="ep_max_domains", section="moe_execution", when=MOE),
    Control("swiglu_fp8_cache", "FP8 SwiGLU cache", "execution", "switch", names=ON_OFF[1],
            spec="swiglu_fp8_cache", section="moe_execution", when=MOE),
)
