#!/usr/bin/env bash
# Probe the attention people actually use, as their libraries ship it (pip install 'kernelgap[zoo]').
# An argument map binds each constructor argument to m, rank, d_model or a constant; --output picks
# the prediction out of a tuple. Each command writes results/probe-NAME/report.html.
set -euo pipefail

# Performer (FAVOR+ random features): rank = the number of random features.
kernelgap probe performer_pytorch:SelfAttention --interface layer \
  --arg dim=d_model --arg heads=1 --arg dim_head=d_model --arg nb_features=rank --out results/probe-performer "$@"

# linear-attention-transformer (softmax-normalised q and k features): rank = the head width.
kernelgap probe linear_attention_transformer.linear_attention_transformer:SelfAttention --interface layer \
  --arg dim=d_model --arg heads=1 --arg dim_head=rank --out results/probe-lat "$@"

# fla-core's feature maps in plain normalized linear attention (a 20-line adapter in the package).
for map in hedgehog t2r dpfp taylor relu; do
  kernelgap probe kernelgap.probe.zoo:FlaLinearAttention --kwargs "{\"feature_map\": \"$map\"}" \
    --out "results/probe-fla-$map" "$@"
done

# Softmax attention takes no rank (trained once per seed): x-transformers' Attention, one head of width
# d_model; its arguments named like a state size are bound to their defaults (the gate ranks unused).
kernelgap probe x_transformers.x_transformers:Attention --interface layer --arg dim=d_model --arg heads=1 \
  --arg dim_head=d_model --arg value_dim_head=d_model --arg gate_values_rank=null --arg output_gate_rank=null \
  --arg data_dependent_alibi_per_row_dim_head=8 --out results/probe-x-transformers "$@"

# A module written in a file, given by its path:
kernelgap probe examples/my_attention.py:MyAttention --out results/probe-my-attention "$@"

# A causal module is detected and read on the final query:
kernelgap probe performer_pytorch:SelfAttention --interface layer --arg causal=true \
  --arg dim=d_model --arg heads=1 --arg dim_head=d_model --arg nb_features=rank --out results/probe-performer-causal "$@"
