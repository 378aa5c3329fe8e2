"""The pieces of benchmarks/benchmark.py, one concept per module (the machine itself:
:mod:`attnmt.machine`).

measure    timing (interleaved variants, medians) and peak memory
matmul     the torch.mm peak GFLOP/s per precision, and whether bf16 is native
workload   the composed config, real token-bucketed batches and test sentences
context    what every bench gets: options, device, the workload, the matmul peaks
training   training steps of every preset, and the torch.nn.Transformer reference
split      an RNN training step's time by section (encoder, decoder loop, output, ...)
reference  the reference model: the PyTorch translation tutorial's Seq2SeqTransformer
sdpa       fused scaled-dot-product attention vs the explicit softmax path
decoding   greedy and beam search through the Translator; cached vs recomputed prefix
datapath   corpus read, cleaning, encoding and batching, in pairs/s
kernels    attnmt's dropout and smoothed cross-entropy vs torch's
ct2        attnmt vs its CTranslate2 export
report     ratios, the markdown table and the JSON file
"""
