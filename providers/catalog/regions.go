package catalog

// regions lists the cloud regions spotwise knows. Zone names are the
// providers' own: AWS "us-east-1a", Azure "<region>-<n>" for its numbered
// availability zones, GCP "us-central1-a". Regions are listed where the
// catalog has prices or the job-spec vocabulary needs them (Azure
// westeurope, northeurope and japaneast carry no prices yet: the bundled
// Azure price snapshot covers US regions only).
var regions = []Region{
	// AWS
	{Provider: "aws", Name: "us-east-1", Geography: "us", Location: "US East (N. Virginia)", Zones: []string{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1e", "us-east-1f"}},
	{Provider: "aws", Name: "us-east-2", Geography: "us", Location: "US East (Ohio)", Zones: []string{"us-east-2a", "us-east-2b", "us-east-2c"}},
	{Provider: "aws", Name: "us-west-2", Geography: "us", Location: "US West (Oregon)", Zones: []string{"us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"}},
	{Provider: "aws", Name: "ca-central-1", Geography: "ca", Location: "Canada (Central, Montreal)", Zones: []string{"ca-central-1a", "ca-central-1b", "ca-central-1d"}},
	{Provider: "aws", Name: "eu-west-1", Geography: "eu", Location: "Europe (Ireland)", Zones: []string{"eu-west-1a", "eu-west-1b", "eu-west-1c"}},
	{Provider: "aws", Name: "eu-west-2", Geography: "uk", Location: "Europe (London)", Zones: []string{"eu-west-2a", "eu-west-2b", "eu-west-2c"}},
	{Provider: "aws", Name: "eu-central-1", Geography: "eu", Location: "Europe (Frankfurt)", Zones: []string{"eu-central-1a", "eu-central-1b", "eu-central-1c"}},
	{Provider: "aws", Name: "eu-north-1", Geography: "eu", Location: "Europe (Stockholm)", Zones: []string{"eu-north-1a", "eu-north-1b", "eu-north-1c"}},
	{Provider: "aws", Name: "ap-northeast-1", Geography: "asia", Location: "Asia Pacific (Tokyo)", Zones: []string{"ap-northeast-1a", "ap-northeast-1c", "ap-northeast-1d"}},
	{Provider: "aws", Name: "ap-southeast-1", Geography: "asia", Location: "Asia Pacific (Singapore)", Zones: []string{"ap-southeast-1a", "ap-southeast-1b", "ap-southeast-1c"}},
	{Provider: "aws", Name: "ap-southeast-2", Geography: "oceania", Location: "Asia Pacific (Sydney)", Zones: []string{"ap-southeast-2a", "ap-southeast-2b", "ap-southeast-2c"}},
	{Provider: "aws", Name: "ap-south-1", Geography: "asia", Location: "Asia Pacific (Mumbai)", Zones: []string{"ap-south-1a", "ap-south-1b", "ap-south-1c"}},
	// Azure
	{Provider: "azure", Name: "eastus", Geography: "us", Location: "East US (Virginia)", Zones: []string{"eastus-1", "eastus-2", "eastus-3"}},
	{Provider: "azure", Name: "eastus2", Geography: "us", Location: "East US 2 (Virginia)", Zones: []string{"eastus2-1", "eastus2-2", "eastus2-3"}},
	{Provider: "azure", Name: "centralus", Geography: "us", Location: "Central US (Iowa)", Zones: []string{"centralus-1", "centralus-2", "centralus-3"}},
	{Provider: "azure", Name: "southcentralus", Geography: "us", Location: "South Central US (Texas)", Zones: []string{"southcentralus-1", "southcentralus-2", "southcentralus-3"}},
	{Provider: "azure", Name: "westus2", Geography: "us", Location: "West US 2 (Washington)", Zones: []string{"westus2-1", "westus2-2", "westus2-3"}},
	{Provider: "azure", Name: "westus3", Geography: "us", Location: "West US 3 (Arizona)", Zones: []string{"westus3-1", "westus3-2", "westus3-3"}},
	{Provider: "azure", Name: "westeurope", Geography: "eu", Location: "West Europe (Netherlands)", Zones: []string{"westeurope-1", "westeurope-2", "westeurope-3"}},
	{Provider: "azure", Name: "northeurope", Geography: "eu", Location: "North Europe (Ireland)", Zones: []string{"northeurope-1", "northeurope-2", "northeurope-3"}},
	{Provider: "azure", Name: "japaneast", Geography: "asia", Location: "Japan East (Tokyo, Saitama)", Zones: []string{"japaneast-1", "japaneast-2", "japaneast-3"}},
	// GCP
	{Provider: "gcp", Name: "us-central1", Geography: "us", Location: "Council Bluffs, Iowa", Zones: []string{"us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"}},
	{Provider: "gcp", Name: "us-east1", Geography: "us", Location: "Moncks Corner, South Carolina", Zones: []string{"us-east1-b", "us-east1-c", "us-east1-d"}},
	{Provider: "gcp", Name: "us-east4", Geography: "us", Location: "Ashburn, Virginia", Zones: []string{"us-east4-a", "us-east4-b", "us-east4-c"}},
	{Provider: "gcp", Name: "us-east5", Geography: "us", Location: "Columbus, Ohio", Zones: []string{"us-east5-a", "us-east5-b", "us-east5-c"}},
	{Provider: "gcp", Name: "us-west1", Geography: "us", Location: "The Dalles, Oregon", Zones: []string{"us-west1-a", "us-west1-b", "us-west1-c"}},
	{Provider: "gcp", Name: "us-west4", Geography: "us", Location: "Las Vegas, Nevada", Zones: []string{"us-west4-a", "us-west4-b", "us-west4-c"}},
	{Provider: "gcp", Name: "europe-west1", Geography: "eu", Location: "St. Ghislain, Belgium", Zones: []string{"europe-west1-b", "europe-west1-c", "europe-west1-d"}},
	{Provider: "gcp", Name: "europe-west2", Geography: "uk", Location: "London", Zones: []string{"europe-west2-a", "europe-west2-b", "europe-west2-c"}},
	{Provider: "gcp", Name: "europe-west3", Geography: "eu", Location: "Frankfurt", Zones: []string{"europe-west3-a", "europe-west3-b", "europe-west3-c"}},
	{Provider: "gcp", Name: "europe-west4", Geography: "eu", Location: "Eemshaven, Netherlands", Zones: []string{"europe-west4-a", "europe-west4-b", "europe-west4-c"}},
	{Provider: "gcp", Name: "me-west1", Geography: "me", Location: "Tel Aviv", Zones: []string{"me-west1-a", "me-west1-b", "me-west1-c"}},
	{Provider: "gcp", Name: "asia-east1", Geography: "asia", Location: "Changhua County, Taiwan", Zones: []string{"asia-east1-a", "asia-east1-b", "asia-east1-c"}},
	{Provider: "gcp", Name: "asia-northeast1", Geography: "asia", Location: "Tokyo", Zones: []string{"asia-northeast1-a", "asia-northeast1-b", "asia-northeast1-c"}},
	{Provider: "gcp", Name: "asia-southeast1", Geography: "asia", Location: "Jurong West, Singapore", Zones: []string{"asia-southeast1-a", "asia-southeast1-b", "asia-southeast1-c"}},
}
