package catalog

// Throughput figures are relative to one V100 16 GB (= 1.0) per class.
//
// Measured anchors come from Lambda's public PyTorch training benchmark
// tables (lambdal/deeplearning-benchmark, pytorch/pytorch-train-throughput-
// {fp16,fp32}.csv, 2023 run on NGC PyTorch 22.10): V100 16GB, A10, A100 40GB
// PCIe, A100 80GB SXM4 and H100 80GB SXM5, single GPU.
//
//   - TrainMixed: geometric mean of the FP16 (AMP) ratios for the language
//     models in that table (BERT-base/-large SQuAD, GNMT, Transformer-XL
//     base/large). A100 80GB SXM4 measures 2.66 (BERT-Large 2.67,
//     Transformer-XL large 2.95); on 8 GPUs the same table gives 2.8 for
//     8xA100 80GB vs 8xV100, in line with NVIDIA's "about 3x V100" for
//     BERT-Large training. That is the ratio behind the spotwise example
//     (BERT-Large ~6 h on V100, ~2 h on A100).
//   - TrainFP32: geometric mean over all seven models of the table's FP32
//     runs. On Ampere and Hopper those runs use TF32 tensor cores (the NGC
//     default), which is why they sit well above the peak-FP32 ratio.
//   - Inference: no recent public benchmark runs V100 beside the newer
//     parts, so this column is derived: MLPerf Inference per-accelerator
//     ordering (T4 < L4 < A10 < L40S < A100 < H100 < H200; MI300X ~ H100 on
//     Llama-2-70B) scaled by datasheet FP16 tensor and memory-bandwidth
//     ratios. Treat it as an estimate.
//
// GPUs that Lambda's table does not cover (K80, T4, L4, L40S, H200, MI300X,
// A10G, V100-32GB, A100 40GB SXM4) are derived from the nearest measured
// part by datasheet ratios; each Source says which.
var gpus = []GPU{
	{
		Name: "K80", Family: "K80", Vendor: "nvidia", MemoryGB: 12,
		// One GK210 die (half a K80 board), which is what clouds sell as
		// "1 K80" (AWS p2.xlarge). The board is 8.73 TFLOPS FP32 boost.
		FP32TFLOPS: 4.37, FP16TFLOPS: 0, BF16TFLOPS: 0,
		Throughput: Throughput{TrainMixed: 0.07, TrainFP32: 0.22, Inference: 0.1},
		Source: "NVIDIA Tesla K80 datasheet (per GK210 die); throughput derived: FP32 ~0.22x V100 from peak FP32 and bandwidth, " +
			"no tensor cores so mixed precision runs at FP32 speed (V100 FP32/AMP ratio 0.32 in Lambda's table)",
	},
	{
		Name: "T4", Family: "T4", Vendor: "nvidia", MemoryGB: 16,
		FP32TFLOPS: 8.1, FP16TFLOPS: 65, BF16TFLOPS: 0,
		Throughput: Throughput{TrainMixed: 0.3, TrainFP32: 0.4, Inference: 0.5},
		Source: "NVIDIA T4 datasheet (65 FP16 tensor TFLOPS, 320 GB/s, 70 W); throughput derived from datasheet ratios to V100 " +
			"(tensor 0.52x, bandwidth 0.36x); not measured against V100",
	},
	{
		Name: "V100", Family: "V100", Vendor: "nvidia", MemoryGB: 16,
		FP32TFLOPS: 15.7, FP16TFLOPS: 125, BF16TFLOPS: 0,
		Throughput: Throughput{TrainMixed: 1, TrainFP32: 1, Inference: 1},
		Source: "NVIDIA V100 datasheet (SXM2: 15.7 FP32, 125 FP16 tensor TFLOPS); baseline of every ratio; " +
			"Lambda benchmark row 'LambdaCloud V100 16GB'",
	},
	{
		Name: "V100-32GB", Family: "V100", Vendor: "nvidia", MemoryGB: 32,
		FP32TFLOPS: 15.7, FP16TFLOPS: 125, BF16TFLOPS: 0,
		Throughput: Throughput{TrainMixed: 1, TrainFP32: 1, Inference: 1},
		Source:     "NVIDIA V100 datasheet (SXM2 32 GB); same GV100 chip and clocks as the 16 GB part, so same throughput",
	},
	{
		Name: "A10", Family: "A10", Vendor: "nvidia", MemoryGB: 24,
		FP32TFLOPS: 31.2, FP16TFLOPS: 125, BF16TFLOPS: 125,
		Throughput: Throughput{TrainMixed: 0.82, TrainFP32: 1.32, Inference: 1.1},
		Source: "NVIDIA A10 datasheet (31.2 FP32, 125 FP16/BF16 tensor TFLOPS dense, 600 GB/s); training measured " +
			"(Lambda table, 'LambdaCloud A10'); inference derived",
	},
	{
		Name: "A10G", Family: "A10G", Vendor: "nvidia", MemoryGB: 24,
		// NVIDIA publishes no A10G datasheet; AWS-only variant of GA102 with
		// the A10's memory (24 GB, 600 GB/s) but less tensor throughput.
		FP32TFLOPS: 35, FP16TFLOPS: 70, BF16TFLOPS: 70,
		Throughput: Throughput{TrainMixed: 0.75, TrainFP32: 1.35, Inference: 1.05},
		Source: "No NVIDIA datasheet; specs as reported by Baseten 'NVIDIA A10 vs A10G for ML model inference' " +
			"(35 FP32, 70 FP16 tensor TFLOPS, same 24 GB/600 GB/s as A10); throughput derived from the measured A10 " +
			"(lower tensor rate, higher FP32 rate, same bandwidth)",
	},
	{
		Name: "L4", Family: "L4", Vendor: "nvidia", MemoryGB: 24,
		FP32TFLOPS: 30.3, FP16TFLOPS: 121, BF16TFLOPS: 121,
		Throughput: Throughput{TrainMixed: 0.65, TrainFP32: 0.95, Inference: 1.15},
		Source: "NVIDIA L4 datasheet (30.3 FP32, 121 FP16/BF16 tensor TFLOPS dense, 300 GB/s, 72 W); derived: " +
			"A10-class tensor rate at half the bandwidth for training; about 2.3x T4 for inference as reported for MLPerf " +
			"Inference v3.x (not re-checked)",
	},
	{
		Name: "L40S", Family: "L40S", Vendor: "nvidia", MemoryGB: 48,
		FP32TFLOPS: 91.6, FP16TFLOPS: 362, BF16TFLOPS: 362,
		Throughput: Throughput{TrainMixed: 2.0, TrainFP32: 3.3, Inference: 2.5},
		Source: "NVIDIA L40S datasheet (91.6 FP32, 362 FP16/BF16 tensor TFLOPS dense, 864 GB/s); derived from A100 " +
			"(higher tensor peak, ~half the bandwidth, no NVLink); not measured against V100",
	},
	{
		Name: "A100-40GB", Family: "A100", Vendor: "nvidia", MemoryGB: 40,
		FP32TFLOPS: 19.5, FP16TFLOPS: 312, BF16TFLOPS: 312,
		Throughput: Throughput{TrainMixed: 2.6, TrainFP32: 4.0, Inference: 2.5},
		Source: "NVIDIA A100 datasheet (19.5 FP32, 312 FP16/BF16 tensor TFLOPS dense, 1.55 TB/s); SXM4 40GB lies between " +
			"Lambda's measured A100 40GB PCIe (AMP 2.17, FP32 3.60) and A100 80GB SXM4 (AMP 2.66, FP32 4.63); NVIDIA cites " +
			"about 3x V100 for BERT-Large training",
	},
	{
		Name: "A100-80GB", Family: "A100", Vendor: "nvidia", MemoryGB: 80,
		FP32TFLOPS: 19.5, FP16TFLOPS: 312, BF16TFLOPS: 312,
		Throughput: Throughput{TrainMixed: 2.8, TrainFP32: 4.6, Inference: 2.8},
		Source: "NVIDIA A100 datasheet (80 GB, 2.0 TB/s); training measured (Lambda 'A100 80GB SXM4': AMP 2.66 on 1 GPU, " +
			"2.8 on 8 GPUs vs 8xV100; FP32/TF32 4.63); inference derived",
	},
	{
		Name: "H100", Family: "H100", Vendor: "nvidia", MemoryGB: 80,
		FP32TFLOPS: 67, FP16TFLOPS: 989, BF16TFLOPS: 989,
		Throughput: Throughput{TrainMixed: 4.7, TrainFP32: 7.8, Inference: 5.5},
		Source: "NVIDIA H100 SXM5 datasheet (67 FP32, 989 FP16/BF16 tensor TFLOPS dense, 3.35 TB/s); training measured " +
			"(Lambda 'H100 80GB SXM5', FP16/BF16 without FP8: AMP 4.70, FP32/TF32 7.80); inference derived (about 2x A100 in MLPerf)",
	},
	{
		Name: "H200", Family: "H200", Vendor: "nvidia", MemoryGB: 141,
		FP32TFLOPS: 67, FP16TFLOPS: 989, BF16TFLOPS: 989,
		Throughput: Throughput{TrainMixed: 5.3, TrainFP32: 8.6, Inference: 7.7},
		Source: "NVIDIA H200 datasheet (same compute as H100 SXM, 141 GB at 4.8 TB/s); derived from H100 (about 1.1x for training, 1.4x for LLM " +
			"inference, as reported for MLPerf v4.0; ratios not re-checked against the published results tables)",
	},
	{
		Name: "MI300X", Family: "MI300X", Vendor: "amd", MemoryGB: 192,
		FP32TFLOPS: 163.4, FP16TFLOPS: 1307.4, BF16TFLOPS: 1307.4,
		Throughput: Throughput{TrainMixed: 4.5, TrainFP32: 7.5, Inference: 5.5},
		Source: "AMD Instinct MI300X datasheet (163.4 FP32, 1307.4 FP16/BF16 matrix TFLOPS dense, 192 GB at 5.3 TB/s); " +
			"derived: about H100-level as reported for MLPerf Inference v4.1 Llama-2-70B, slightly below H100 for training " +
			"(ratios not re-checked against the published results tables)",
	},
}
