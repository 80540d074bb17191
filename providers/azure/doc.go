// Package azure is the providers.Provider for Microsoft Azure virtual
// machines, on the official azure-sdk-for-go (azcore, azidentity and
// armcompute). The agent-side poller of Azure Scheduled Events is
// notices.NewAzure in agent/notices.
//
// It owns:
//   - the configuration of one subscription and resource group (config.go),
//     validated field by field;
//   - prices (prices.go): the Azure Retail Prices API, paged, parsed from
//     its decimal text into exact micro-dollars; reservation rows, which
//     are priced per term, converted to an hourly figure;
//   - offers (offers.go): per region, zone and purchase option (spot,
//     on-demand, and reserved for reservations the team holds), with GPU
//     facts from the bundled catalog, the catalog's prices when the API is
//     unreachable, and a short-lived "no capacity" mark over a capacity
//     error's scope (errors.go reads Azure's codes into capacity, refusal
//     or unknown);
//   - launches (launch.go, customdata.go): one VM per node, named from the
//     launch's idempotency key so a retry finds it, Spot or Regular, with
//     an inline NIC and disks deleted with the VM, and custom data that
//     starts `spotwise agent`;
//   - instance state (instances.go) from the VMs' provisioning and power
//     states, and Terminate;
//   - the event feed (watch.go): offers per region on the price schedule,
//     and instance transitions from polling the VMs (Azure has no push
//     feed of VM state in scope here).
//
// Each SDK sits behind a narrow interface of the calls used (vmAPI). Tests
// drive the real armcompute client and the Retail Prices reader against
// azurefake (a fake subscription speaking ARM's, the price API's and
// IMDS's wire formats), which agent/notices' tests and end-to-end tests of
// the daemon use too.
//
// It must not schedule, decide, or talk to NATS; it never logs credentials,
// tokens, SSH keys or custom data.
package azure
