"""Kernel layer: closed-form latency models of single GPU kernels (dense GEMM, context and
decode attention, collectives; grouped MoE GEMM in ``moe_kernel``), each a roofline times
shape terms whose few parameters per GPU × dtype are fitted by least squares on log latency to
NVIDIA AIConfigurator 0.12.0's measured kernel tables (``scripts/extract_kernel_tables.py``;
parameters and a validation subset in ``model/data/reference/kernels/``); the dense GEMM law
is also fitted to training GEMMs measured with PyTorch on Hopper (``training_fit``,
``scripts/fit_training_gemms.py``), which training uses there. Everything
broadcasts over numpy arrays of candidates; no table lookup at pricing time."""
