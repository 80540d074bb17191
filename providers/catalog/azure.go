package catalog

// azureTypes are the Azure GPU VM sizes in the catalog. The NC A100 v4 sizes
// carry A100 80GB PCIe cards (catalogued as A100-80GB); NCv3 carries V100
// PCIe cards (catalogued as V100). Prices cover Azure's US regions only.
var azureTypes = []InstanceType{
	{
		Provider: "azure", Name: "Standard_NC4as_T4_v3", GPU: "T4", GPUs: 1, VCPUs: 4, MemoryGiB: 28,
		Source: azureSkyPilotV6,
		Prices: []Price{
			p("eastus", "0.526", "0.062699"),
			p("eastus2", "0.526", "0.05786"),
			p("centralus", "0.594", "0.06534"),
			p("southcentralus", "0.631", "0.06941"),
			p("westus2", "0.526", "0.061595"),
			p("westus3", "0.526", "0.05786"),
		},
	},
	{
		Provider: "azure", Name: "Standard_NC8as_T4_v3", GPU: "T4", GPUs: 1, VCPUs: 8, MemoryGiB: 56,
		Source: azureSkyPilotV6,
		Prices: []Price{
			p("eastus", "0.752", "0.089638"),
			p("eastus2", "0.752", "0.08272"),
			p("centralus", "0.849", "0.09339"),
			p("southcentralus", "0.902", "0.09922"),
			p("westus2", "0.752", "0.088059"),
			p("westus3", "0.752", "0.08272"),
		},
	},
	{
		Provider: "azure", Name: "Standard_NC16as_T4_v3", GPU: "T4", GPUs: 1, VCPUs: 16, MemoryGiB: 110,
		Source: azureSkyPilotV6,
		Prices: []Price{
			p("eastus", "1.204", "0.143517"),
			p("eastus2", "1.204", "0.13244"),
			p("centralus", "1.36", "0.1496"),
			p("southcentralus", "1.445", "0.15895"),
			p("westus2", "1.204", "0.140988"),
			p("westus3", "1.204", "0.13244"),
		},
	},
	{
		Provider: "azure", Name: "Standard_NC64as_T4_v3", GPU: "T4", GPUs: 4, VCPUs: 64, MemoryGiB: 440,
		Source: azureSkyPilotV6,
		Prices: []Price{
			p("eastus", "4.352", "0.518758"),
			p("eastus2", "4.352", "0.47872"),
			p("centralus", "4.907", "0.53977"),
			p("southcentralus", "5.222", "0.57442"),
			p("westus2", "4.352", "0.509619"),
			p("westus3", "4.352", "0.47872"),
		},
	},
	{
		Provider: "azure", Name: "Standard_NC6s_v3", GPU: "V100", GPUs: 1, VCPUs: 6, MemoryGiB: 112,
		Source: azureSkyPilotV6,
		Prices: []Price{
			p("eastus", "3.06", "0.3978"),
			p("eastus2", "3.06", "0.404838"),
			p("centralus", "3.458", "0.394212"),
			p("southcentralus", "3.366", "0.388773"),
			p("westus2", "3.06", "0.35343"),
			p("westus3", "3.06", "0.3366"),
		},
	},
	{
		Provider: "azure", Name: "Standard_NC12s_v3", GPU: "V100", GPUs: 2, VCPUs: 12, MemoryGiB: 224,
		Source: azureSkyPilotV6,
		Prices: []Price{
			p("eastus", "6.12", "0.7956"),
			p("eastus2", "6.12", "0.809676"),
			p("centralus", "6.916", "0.788424"),
			p("southcentralus", "6.732", "0.777546"),
			p("westus2", "6.12", "0.70686"),
			p("westus3", "6.12", "0.6732"),
		},
	},
	{
		Provider: "azure", Name: "Standard_NC24s_v3", GPU: "V100", GPUs: 4, VCPUs: 24, MemoryGiB: 448,
		Source: azureSkyPilotV6,
		Prices: []Price{
			p("eastus", "12.24", "1.5912"),
			p("eastus2", "12.24", "1.619352"),
			p("centralus", "13.831", "1.576734"),
			p("southcentralus", "13.464", "1.555092"),
			p("westus2", "12.24", "1.41372"),
			p("westus3", "12.24", "1.3464"),
		},
	},
	{
		Provider: "azure", Name: "Standard_NC24rs_v3", GPU: "V100", GPUs: 4, VCPUs: 24, MemoryGiB: 448,
		Interconnect: "InfiniBand (RDMA)",
		Source:       azureSkyPilotV6,
		Prices: []Price{
			p("eastus", "13.46", "1.7498"),
			p("eastus2", "13.464", "1.781287"),
			p("centralus", "15.214", "1.734396"),
			p("southcentralus", "14.8104", "1.710601"),
			p("westus2", "13.46", "1.55463"),
			p("westus3", "13.46", "1.4806"),
		},
	},
	{
		Provider: "azure", Name: "Standard_NV36ads_A10_v5", GPU: "A10", GPUs: 1, VCPUs: 36, MemoryGiB: 440,
		Source: azureSkyPilotV6,
		Prices: []Price{
			p("eastus", "3.2", "0.8"),
			p("eastus2", "3.2", "0.8"),
			p("southcentralus", "3.84", "0.96"),
			p("westus2", "3.2", "0.8"),
			p("westus3", "3.2", "0.8"),
		},
	},
	{
		Provider: "azure", Name: "Standard_NV72ads_A10_v5", GPU: "A10", GPUs: 2, VCPUs: 72, MemoryGiB: 880,
		Source: azureSkyPilotV6,
		Prices: []Price{
			p("eastus", "6.52", "1.63"),
			p("eastus2", "6.52", "1.63"),
			p("southcentralus", "7.824", "1.956"),
			p("westus2", "6.52", "1.63"),
			p("westus3", "6.52", "1.63"),
		},
	},
	{
		Provider: "azure", Name: "Standard_NC24ads_A100_v4", GPU: "A100-80GB", GPUs: 1, VCPUs: 24, MemoryGiB: 220,
		Source: azureSkyPilotV6,
		Prices: []Price{
			p("eastus", "3.673", "0.444433"),
			p("eastus2", "3.673", "0.47749"),
			p("centralus", "4.15", "0.4565"),
			p("southcentralus", "4.408", "0.57304"),
			p("westus2", "3.673", "0.615962"),
			p("westus3", "3.673", "0.40403"),
		},
	},
	{
		Provider: "azure", Name: "Standard_NC48ads_A100_v4", GPU: "A100-80GB", GPUs: 2, VCPUs: 48, MemoryGiB: 440,
		Source: azureSkyPilotV6,
		Prices: []Price{
			p("eastus", "7.346", "0.888866"),
			p("eastus2", "7.346", "0.95498"),
			p("centralus", "8.301", "0.91311"),
			p("southcentralus", "8.815", "1.14595"),
			p("westus2", "7.346", "1.231924"),
			p("westus3", "7.346", "0.80806"),
		},
	},
	{
		Provider: "azure", Name: "Standard_NC96ads_A100_v4", GPU: "A100-80GB", GPUs: 4, VCPUs: 96, MemoryGiB: 880,
		Source: azureSkyPilotV6,
		Prices: []Price{
			p("eastus", "14.692", "1.777732"),
			p("eastus2", "14.692", "1.90996"),
			p("centralus", "16.602", "1.82622"),
			p("southcentralus", "17.63", "2.2919"),
			p("westus2", "14.692", "2.463848"),
			p("westus3", "14.692", "1.61612"),
		},
	},
	{
		Provider: "azure", Name: "Standard_ND40rs_v2", GPU: "V100-32GB", GPUs: 8, VCPUs: 40, MemoryGiB: 672,
		Interconnect: "InfiniBand EDR 100 Gb/s; NVLink",
		Source:       azureSkyPilotV6,
		Prices: []Price{
			p("eastus", "22.032", "2.42352"),
			p("southcentralus", "26.438", "2.90818"),
			p("westus2", "22.032", "2.42352"),
		},
	},
	{
		Provider: "azure", Name: "Standard_ND96asr_v4", GPU: "A100-40GB", GPUs: 8, VCPUs: 96, MemoryGiB: 900,
		Interconnect: "InfiniBand HDR 200 Gb/s x8; NVSwitch",
		Source:       azureSkyPilotV6,
		Prices: []Price{
			p("eastus", "27.197", "2.99167"),
			p("southcentralus", "32.63", "3.5893"),
			p("westus2", "27.197", "2.99167"),
		},
	},
	{
		Provider: "azure", Name: "Standard_ND96amsr_A100_v4", GPU: "A100-80GB", GPUs: 8, VCPUs: 96, MemoryGiB: 1800,
		Interconnect: "InfiniBand HDR 200 Gb/s x8; NVSwitch",
		Source:       azureSkyPilotV6,
		Prices: []Price{
			p("eastus", "32.77", "3.6047"),
			p("eastus2", "32.77", "3.611254"),
			p("southcentralus", "39.324", "4.32564"),
		},
	},
	{
		Provider: "azure", Name: "Standard_ND96isr_H100_v5", GPU: "H100", GPUs: 8, VCPUs: 96, MemoryGiB: 1900,
		Interconnect: "InfiniBand NDR 400 Gb/s x8; NVSwitch",
		Source:       azureSkyPilotV6,
		Prices: []Price{
			p("eastus", "98.32", ""),
			p("eastus2", "98.32", ""),
		},
	},
}
