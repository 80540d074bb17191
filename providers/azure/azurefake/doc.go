// Package azurefake is a fake Azure subscription for tests: the ARM
// endpoints of Microsoft.Compute virtual machines, served in process
// through a policy.Transporter to the real armcompute client, the Azure
// Retail Prices API on a loopback HTTP server, and an instance metadata
// service (Scheduled Events) per simulated VM. It lets the Azure
// provider's tests, and end-to-end tests of the whole daemon, buy VMs,
// watch them boot, evict them and read back what was bought, without a
// subscription or a network.
//
// A daemon is pointed at it with a Config whose endpoints.retail_prices is
// c.RetailPricesURL(), and the options azure.WithTransport(c.Transport())
// and azure.WithCredential(c.Credential()):
//
//	c := azurefake.New()
//	defer c.Close()
//	c.SetPrice("eastus", "Standard_NC24ads_A100_v4", azurefake.Consumption, "3.673")
//	c.SetPrice("eastus", "Standard_NC24ads_A100_v4", azurefake.Spot, "0.4444326")
//
// What it does like Azure: create-only PUTs (If-None-Match), long-running
// operations polled through Azure-AsyncOperation, paged listings with
// nextLink, provisioning and power states in the instance view, ARM error
// bodies ({"error":{"code","message"}}) with Azure's status and message
// for any refusal, made to order (FailLaunches: a placement failure fails
// the creation's operation, anything else the PUT, as Azure sends each
// code), Spot max prices with more than 5 decimals refused,
// throttling with Retry-After, Spot evictions under the VM's eviction
// policy, and the Retail Prices API's rows, OData filter and paging. What
// it does not: networking, disks, images, identities, quotas of its own.
//
// It must not import providers/azure: that package's own tests use it.
// Every exported method is safe for concurrent use.
package azurefake
