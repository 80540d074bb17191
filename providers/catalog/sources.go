package catalog

// Per-instance-type source notes. Every price row of a type comes from the
// one snapshot its Source names; spot figures are what that snapshot
// recorded, summarised as the median over the region's availability zones
// (lower middle value for an even count; zones without a figure skipped). A
// zone median at or above on-demand (the feed's way of saying "no spot
// market there") is left out and SpotDiscount applies instead.
const (
	awsSkyPilotV7 = "AWS list prices (Linux, shared tenancy) and zone spot prices from the SkyPilot catalog " +
		"snapshot catalogs/v7/aws/vms.csv @ 001367d22a00, crawled by SkyPilot from the AWS price list and " +
		"spot-price history, first half of 2025; spot = median of zone spot prices"
	awsSkyPilotV8 = "AWS list prices from the SkyPilot catalog snapshot catalogs/v8/aws/vms.csv @ 00148f2af367, " +
		"second half of 2025, after AWS's June 2025 P4/P5 price cut (p4d.24xlarge us-east-1 $21.957642, was " +
		"$32.7726); spot = median of zone spot prices"
	awsSkyPilotV3 = "AWS list prices from the older SkyPilot catalog catalogs/v3/aws.csv @ 76b7d2d7053 (US regions only). " +
		"P2 is a retired previous-generation family that no current AWS feed lists; kept for replaying old traces"
	azureSkyPilotV6 = "Azure pay-as-you-go Linux prices and spot prices from the SkyPilot catalog snapshot " +
		"catalogs/v6/azure/vms.csv @ 098741e70562 (Azure Retail Prices API, US regions only, 2024); " +
		"vCPU/memory/GPU counts from the same file except ND96isr_H100_v5, which the file lists with 12 GPUs " +
		"where Azure documents 8"
	gcpSkyPilotV8 = "GCP on-demand and spot prices from the SkyPilot catalog snapshot catalogs/v8/gcp/vms.csv " +
		"@ 006059e0f18a (Cloud Billing Catalog, 2025): machine (vCPU+memory) price plus the attached GPUs' " +
		"price, both from that file. Regions whose GPU row is an outlier (about half the list price, " +
		"apparently a different SKU such as DWS flex-start) are left out"
	gcpSkyPilotV8Flagged = gcpSkyPilotV8 + ". UNVERIFIED: the file's A100 80GB GPU rows disagree between " +
		"regions by up to 2.4x; only us-east5 and asia-southeast1, whose figures look like full list " +
		"prices, are kept"
)

// sources lists where every set of figures came from and when.
var sources = []Source{
	{
		What: "AWS EC2 prices: G4dn, G5, G6, G6e, P3, P3dn",
		URL:  "https://github.com/skypilot-org/skypilot-catalog/blob/001367d22a0033fac286a8c71aeac7109e431bcb/catalogs/v7/aws/vms.csv",
		Date: "2025-H1 (snapshot; predates the 2025-06-01 P4/P5 price cut, postdates the Dec 2024 P5en launch)",
		Note: "Read from a stored copy of the SkyPilot catalog file; SkyPilot builds it from the AWS Price List API and " +
			"EC2 spot-price history. On-demand is the Linux shared-tenancy list price; spot is the median of the " +
			"zones' prices at crawl time. List prices change; live price feeds override these.",
	},
	{
		What: "AWS EC2 prices: P4d, P4de, P5",
		URL:  "https://github.com/skypilot-org/skypilot-catalog/blob/00148f2af3672e2229b4f7bf8157d5a3f36e3c35/catalogs/v8/aws/vms.csv",
		Date: "2025-H2 (snapshot; after the 2025-06-01 P4/P5 price cut)",
		Note: "Read from a stored copy of the SkyPilot catalog file. AWS cut P4d/P4de/P5 on-demand prices in June 2025; " +
			"the older snapshot used for the G and P3 families still shows the pre-cut figures, so these three " +
			"types are taken from this newer one.",
	},
	{
		What: "AWS EC2 prices: P2 (K80)",
		URL:  "https://github.com/skypilot-org/skypilot-catalog/blob/76b7d2d7053660d7346ca260dc48456aa4d4ec08/catalogs/v3/aws.csv",
		Date: "2022-2023 (old snapshot, exact date unknown)",
		Note: "P2 has been retired and is absent from current catalogs; its figures are historical and only there so " +
			"that traces naming p2.xlarge can be replayed.",
	},
	{
		What: "Azure VM prices: NCasT4_v3, NCv3, NVadsA10_v5, NC A100 v4, NDv2, ND A100 v4, NDm A100 v4, ND H100 v5",
		URL:  "https://github.com/skypilot-org/skypilot-catalog/blob/098741e70562f65d7af1cceb81e33b284f742604/catalogs/v6/azure/vms.csv",
		Date: "2024 (snapshot; exact date not recorded in the file)",
		Note: "Read from a stored copy of the SkyPilot catalog file, built from the Azure Retail Prices API. It covers " +
			"US regions only, so westeurope, northeurope and japaneast have no Azure prices here; regions without " +
			"availability zones (westus, northcentralus) are left out. Spot is Azure's spot list price; the H100 v5 " +
			"rows carry no spot price.",
	},
	{
		What: "GCP Compute Engine prices: A2, A3, G2",
		URL:  "https://github.com/skypilot-org/skypilot-catalog/blob/006059e0f18acb1341e22a27751e9f80df6ba92f/catalogs/v8/gcp/vms.csv",
		Date: "2025 (snapshot; exact date not recorded in the file)",
		Note: "Read from a stored copy of the SkyPilot catalog file, built from the Cloud Billing Catalog API. Instance " +
			"price = machine row + GPU row. Several GPU rows (A100 40GB in europe-west4 and Asia, H100 in " +
			"us-central1/us-west1/us-west4, A100 80GB in most regions) are about half of the list price seen " +
			"elsewhere and look like another SKU; those regions are left out rather than guessed. The A100 80GB " +
			"figures kept are unverified.",
	},
	{
		What: "GPU specifications (memory, peak dense FP32/FP16/BF16 TFLOPS)",
		URL:  "https://www.nvidia.com/en-us/data-center/ (T4, V100, A10, L4, L40S, A100, H100, H200, K80 datasheets); https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html",
		Date: "as published by the vendors (K80 2014 - H200 2024)",
		Note: "Tensor-core figures without sparsity, entered from the vendors' published datasheets (not re-read " +
			"from stored copies when this catalog was assembled). A10G has no vendor datasheet; its figures are as " +
			"reported in https://www.baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference/ (the stored copy " +
			"confirms the article's point: A10 favours tensor throughput, A10G CUDA-core throughput, same " +
			"24 GB/600 GB/s memory) and are the least certain of the set.",
	},
	{
		What: "Relative training throughput (V100 = 1.0)",
		URL:  "https://github.com/lambdal/deeplearning-benchmark/tree/0551cb70ffdc155dc4cb2c10dddebb65651c3883/pytorch",
		Date: "2023 (Lambda PyTorch benchmarks on NGC PyTorch 22.10)",
		Note: "Measured for V100, A10, A100 40GB PCIe, A100 80GB SXM4 and H100 SXM5 from pytorch-train-throughput-" +
			"{fp16,fp32}.csv (also at https://lambdalabs.com/gpu-benchmarks). Other GPUs and the whole inference " +
			"column are derived from these anchors by datasheet ratios and the ordering in public MLPerf " +
			"Training/Inference results; see gpus.go for each GPU's basis.",
	},
}
