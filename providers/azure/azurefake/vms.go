package azurefake

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
)

// vm is one VM of the subscription.
type vm struct {
	rg, name     string
	id           string
	spec         armcompute.VirtualMachine // as created, without secrets; never modified
	body         []byte                    // the request that created it (or AddVM's model)
	created      time.Time
	provisioning string // Creating, Succeeded, Failed, Deleting, ...
	power        string // starting, running, deallocated, ... ("" none)
	failure      *Failure
}

// createRecord is one PUT as received.
type createRecord struct {
	rg, name string
	body     []byte
}

// rule applies a failure to the VMs whose name starts with prefix, left
// more times (for ever when left is negative).
type rule struct {
	prefix string
	f      Failure
	left   int
}

// takeRule finds the first rule for a VM name and uses it once.
func takeRule(rules *[]rule, name string) (Failure, bool) {
	for i := range *rules {
		r := &(*rules)[i]
		if !strings.HasPrefix(name, r.prefix) {
			continue
		}
		f := r.f
		if r.left > 0 {
			if r.left--; r.left == 0 {
				*rules = slices.Delete(*rules, i, i+1)
			}
		}
		return f, true
	}
	return Failure{}, false
}

func vmKey(rg, name string) string { return strings.ToLower(rg + "/" + name) }

// lookupLocked finds a VM of a resource group (names are case-insensitive).
func (c *Cloud) lookupLocked(rg, name string) *vm { return c.vms[vmKey(rg, name)] }

// findLocked finds a VM by name in any resource group.
func (c *Cloud) findLocked(name string) *vm {
	keys := slices.Sorted(maps.Keys(c.vms))
	for _, k := range keys {
		if strings.EqualFold(c.vms[k].name, name) {
			return c.vms[k]
		}
	}
	return nil
}

// stateLocked is a VM's provisioning state now: a VM Creating boots by
// itself once the boot delay has passed, unless states are manual.
func (c *Cloud) stateLocked(v *vm) string {
	if !c.manual && v.provisioning == "Creating" && v.power == "starting" && !c.now().Before(v.created.Add(c.bootDelay)) {
		v.provisioning, v.power = "Succeeded", "running"
	}
	return v.provisioning
}

// stripSecrets drops what ARM never returns: custom data and passwords.
func stripSecrets(spec armcompute.VirtualMachine) armcompute.VirtualMachine {
	if spec.Properties == nil || spec.Properties.OSProfile == nil {
		return spec
	}
	props := *spec.Properties
	osp := *props.OSProfile
	osp.CustomData, osp.AdminPassword = nil, nil
	props.OSProfile = &osp
	spec.Properties = &props
	return spec
}

// Failure is an ARM error: the HTTP status (409 Conflict when zero), the
// error code and its message, as Azure writes them.
type Failure struct {
	Status  int
	Code    string
	Message string
}

// LaunchFailure is Azure's answer to a VM creation that fails with code:
// the HTTP status and the message Azure gives (409 Conflict and a generic
// message for a code not listed here).
func LaunchFailure(code string) Failure {
	f, ok := launchFailures[code]
	if !ok {
		f = Failure{Status: http.StatusConflict, Message: "The operation failed (" + code + ")."}
	}
	f.Code = code
	return f
}

// launchFailures are Azure's status and message per code.
var launchFailures = map[string]Failure{
	"SkuNotAvailable": {Status: http.StatusConflict, Message: "The requested VM size for resource 'Following SKUs have failed for Capacity Restrictions' " +
		"is currently not available in this location. Please try another size or deploy to a different location or different zone."},
	"AllocationFailed":                      {Status: http.StatusConflict, Message: "Allocation failed. We do not have sufficient capacity for the requested VM size in this region."},
	"ZonalAllocationFailed":                 {Status: http.StatusConflict, Message: "Allocation failed. We do not have sufficient capacity for the requested VM size in this zone."},
	"OverconstrainedAllocationRequest":      {Status: http.StatusConflict, Message: "Allocation failed. VM(s) with the following constraints cannot be allocated, because the condition is too restrictive."},
	"OverconstrainedZonalAllocationRequest": {Status: http.StatusConflict, Message: "Allocation failed. VM(s) with the following constraints cannot be allocated in the zone, because the condition is too restrictive."},
	"QuotaExceeded": {Status: http.StatusConflict, Message: "Operation could not be completed as it results in exceeding approved standardNDASv4_A100Family Cores quota. " +
		"Additional details - Deployment Model: Resource Manager, Location: eastus, Current Limit: 192, Current Usage: 96, Additional Required: 192, (Minimum) New Limit Required: 288."},
	"OperationNotAllowed": {Status: http.StatusConflict, Message: "Operation could not be completed as it results in exceeding approved Total Regional Low-priority vCPUs quota. " +
		"Additional details - Deployment Model: Resource Manager, Location: eastus, Current Limit: 200, Current Usage: 192, Additional Required: 96, (Minimum) New Limit Required: 288."},
	"SpotPriceGreaterThanProvidedMaxPrice": {Status: http.StatusConflict, Message: "Unable to perform operation 'Create VM' since the provided max price " +
		"is lower than the current spot price for the Azure Spot VM size in this region."},
	"InsufficientSubnetSize":               {Status: http.StatusBadRequest, Message: "Subnet 'gpu' with address prefix '10.0.0.0/28' does not have enough capacity for 1 IP addresses."},
	"MaxPriceValueInvalid":                 {Status: http.StatusBadRequest, Message: "Max price value is invalid: it must be -1 or greater than zero, with at most 5 decimal places."},
	"AzureSpotIsNotSupportedForThisVMSize": {Status: http.StatusBadRequest, Message: "Azure Spot is not supported for this VM size."},
	"InvalidParameter":                     {Status: http.StatusBadRequest, Message: "The value of parameter imageReference is invalid."},
	"AuthorizationFailed": {Status: http.StatusForbidden, Message: "The client '5f1b7a2c-0000-0000-0000-000000000000' with object id " +
		"'5f1b7a2c-0000-0000-0000-000000000000' does not have authorization to perform action 'Microsoft.Compute/virtualMachines/write' " +
		"over scope '/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/spotwise-test' or the scope is invalid. " +
		"If access was recently granted, please refresh your credentials."},
	"SubscriptionNotRegistered": {Status: http.StatusConflict, Message: "The subscription is not registered to use namespace 'Microsoft.Compute'."},
	"MissingSubscriptionRegistration": {Status: http.StatusConflict, Message: "The subscription is not registered to use namespace 'Microsoft.Compute'. " +
		"See https://aka.ms/rps-not-found for how to register subscriptions."},
	"ResourceGroupNotFound":  {Status: http.StatusNotFound, Message: "Resource group 'spotwise-test' could not be found."},
	"InternalExecutionError": {Status: http.StatusInternalServerError, Message: "An internal execution error occurred. Please retry later."},
}

// asyncFailures are the codes Azure reports from the creation's
// long-running operation rather than as the PUT's answer: the request was
// valid, and placing the VM failed.
var asyncFailures = map[string]bool{
	"AllocationFailed": true, "ZonalAllocationFailed": true, "OverconstrainedAllocationRequest": true,
	"OverconstrainedZonalAllocationRequest": true, "InternalExecutionError": true,
}

// FailLaunches makes the next n VM creations fail with f the way Azure
// reports its code: a placement failure (AllocationFailed,
// ZonalAllocationFailed, Overconstrained...) as FailProvisioning does, the
// PUT accepted and its operation Failed; any other code as RefuseCreates
// does, the PUT's error answer. A zero Status or empty Message is
// LaunchFailure's.
func (c *Cloud) FailLaunches(n int, f Failure) {
	c.mu.Lock()
	defer c.mu.Unlock()
	def := LaunchFailure(f.Code)
	f.Status, f.Message = cmp.Or(f.Status, def.Status), cmp.Or(f.Message, def.Message)
	r := rule{f: f, left: n}
	if asyncFailures[f.Code] {
		c.failProv = append([]rule{r}, c.failProv...)
		return
	}
	c.refuse = append([]rule{r}, c.refuse...)
}

// RefuseCreates answers every PUT of a VM whose name starts with prefix
// with f: Azure refusing the request, nothing created.
func (c *Cloud) RefuseCreates(prefix string, f Failure) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refuse = append([]rule{{prefix, f, -1}}, c.refuse...)
}

// FailProvisioning accepts the PUT of a VM whose name starts with prefix
// (201 Created), and its creation ends Failed with f: the operation reads
// Failed with f's code and message, the VM stays, provisioning state
// Failed, its instance view reads ProvisioningState/failed/<code>.
func (c *Cloud) FailProvisioning(prefix string, f Failure) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failProv = append([]rule{{prefix, f, -1}}, c.failProv...)
}

// FailDeletes makes the next n deletions end Failed (OperationPreempted)
// with the VM still there.
func (c *Cloud) FailDeletes(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deleteFail = n
}

// ClearFailures forgets RefuseCreates, FailProvisioning, FailLaunches and
// FailDeletes (VMs that failed stay failed).
func (c *Cloud) ClearFailures() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refuse, c.failProv, c.deleteFail = nil, nil, 0
}

// Create is one create-or-update request as the fake received it.
type Create struct {
	Name, ResourceGroup string
	Region              string // location
	Zone                string // the zone number ("1"), "" for none
	Size                string // hardwareProfile.vmSize
	// Priority is Spot or Regular (Azure's default when none is sent).
	Priority string
	// EvictionPolicy is a Spot VM's Delete or Deallocate (Azure's default,
	// Deallocate, when none is sent); "" for a Regular VM.
	EvictionPolicy string
	// MaxPrice is billingProfile.maxPrice in dollars an hour (-1: up to
	// the on-demand price); nil without a billing profile.
	MaxPrice *float64
	// MaxPriceText is billingProfile.maxPrice as the request's JSON wrote
	// it ("0.12346"); "" without one.
	MaxPriceText string
	Tags         map[string]string
	// CustomData is the decoded custom data: the boot script.
	CustomData string
	// Request is the whole body, decoded afresh for each caller.
	Request armcompute.VirtualMachine
}

// VM is a VM of the subscription with its state.
type VM struct {
	Create       // the request that created it
	Provisioning string
	Power        string // running, deallocated, ... ("" none)
	// FailureCode is the code a failed provisioning ended with.
	FailureCode string
}

func readCreate(rg, name string, body []byte) Create {
	var spec armcompute.VirtualMachine
	_ = json.Unmarshal(body, &spec)
	cr := Create{Name: name, ResourceGroup: rg, Region: str(spec.Location), Priority: "Regular", Tags: map[string]string{}, Request: spec}
	if len(spec.Zones) > 0 {
		cr.Zone = str(spec.Zones[0])
	}
	for k, v := range spec.Tags {
		cr.Tags[k] = str(v)
	}
	p := spec.Properties
	if p == nil {
		return cr
	}
	if p.HardwareProfile != nil && p.HardwareProfile.VMSize != nil {
		cr.Size = string(*p.HardwareProfile.VMSize)
	}
	if p.Priority != nil {
		cr.Priority = string(*p.Priority)
	}
	if cr.Priority != string(armcompute.VirtualMachinePriorityTypesRegular) {
		cr.EvictionPolicy = string(armcompute.VirtualMachineEvictionPolicyTypesDeallocate)
		if p.EvictionPolicy != nil {
			cr.EvictionPolicy = string(*p.EvictionPolicy)
		}
	}
	if p.BillingProfile != nil && p.BillingProfile.MaxPrice != nil {
		cr.MaxPrice = ptr(*p.BillingProfile.MaxPrice)
		cr.MaxPriceText = maxPriceText(body)
	}
	if p.OSProfile != nil && p.OSProfile.CustomData != nil {
		if b, err := base64.StdEncoding.DecodeString(*p.OSProfile.CustomData); err == nil {
			cr.CustomData = string(b)
		}
	}
	return cr
}

// Creates returns every create-or-update request received, in order,
// refused ones included (throttled ones never reach the VMs).
func (c *Cloud) Creates() []Create {
	c.mu.Lock()
	recs := slices.Clone(c.creates)
	c.mu.Unlock()
	out := make([]Create, len(recs))
	for i, r := range recs {
		out[i] = readCreate(r.rg, r.name, r.body)
	}
	return out
}

// VM returns a VM by name (in any resource group) with its state now.
func (c *Cloud) VM(name string) (VM, bool) {
	c.mu.Lock()
	v := c.findLocked(name)
	if v == nil {
		c.mu.Unlock()
		return VM{}, false
	}
	out := VM{Provisioning: c.stateLocked(v), Power: v.power}
	if v.failure != nil {
		out.FailureCode = v.failure.Code
	}
	rg, body := v.rg, v.body
	c.mu.Unlock()
	out.Create = readCreate(rg, name, body)
	out.Name = v.name
	return out, true
}

// VMs returns the names of the VMs there are now, sorted.
func (c *Cloud) VMs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.vms))
	for _, v := range c.vms {
		out = append(out, v.name)
	}
	slices.Sort(out)
	return out
}

// Deleted returns the VM name of every DELETE request received, in order
// (VMs that did not exist included).
func (c *Cloud) Deleted() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.deletes)
}

// SetState sets a VM's provisioning state (Creating, Succeeded, Failed,
// Deleting, ...) and power state (starting, running, stopped,
// deallocated, ..., "" for none), as Azure would change them.
func (c *Cloud) SetState(name, provisioning, power string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.findLocked(name)
	if v == nil {
		return fmt.Errorf("azurefake: no VM %s", name)
	}
	v.provisioning, v.power = provisioning, power
	return nil
}

// Evict does what Azure does to a Spot VM it takes back, under the VM's
// eviction policy: with Delete the VM (and its disks) is gone; with
// Deallocate it stays, provisioning Succeeded, power state deallocated.
func (c *Cloud) Evict(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.findLocked(name)
	if v == nil {
		return fmt.Errorf("azurefake: no VM %s", name)
	}
	cr := readCreate(v.rg, v.name, v.body)
	switch cr.EvictionPolicy {
	case "":
		return fmt.Errorf("azurefake: VM %s is %s, not Spot: it cannot be evicted", name, cr.Priority)
	case string(armcompute.VirtualMachineEvictionPolicyTypesDelete):
		delete(c.vms, vmKey(v.rg, v.name))
	default:
		v.provisioning, v.power = "Succeeded", "deallocated"
	}
	return nil
}

// AddVM puts a VM in a resource group as if someone else had created it
// (a VM spotwise did not launch, or one from before a restart). Its state
// is vm.Properties.ProvisioningState (default Succeeded) and running.
func (c *Cloud) AddVM(resourceGroup string, model armcompute.VirtualMachine) error {
	body, err := json.Marshal(model)
	if err != nil {
		return fmt.Errorf("azurefake: %w", err)
	}
	name := str(model.Name)
	if name == "" {
		return fmt.Errorf("azurefake: AddVM needs the VM's name")
	}
	prov := "Succeeded"
	if model.Properties != nil && model.Properties.ProvisioningState != nil {
		prov = *model.Properties.ProvisioningState
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.vms[vmKey(resourceGroup, name)] = &vm{rg: resourceGroup, name: name, id: newGUID(), spec: stripSecrets(model),
		body: body, created: c.now(), provisioning: prov, power: "running"}
	return nil
}

// maxPriceText is billingProfile.maxPrice as written in a VM's JSON.
func maxPriceText(body []byte) string {
	var doc struct {
		Properties struct {
			BillingProfile struct {
				MaxPrice json.Number `json:"maxPrice"`
			} `json:"billingProfile"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(body, &doc)
	return doc.Properties.BillingProfile.MaxPrice.String()
}

// maxPriceValid reports whether Azure takes a Spot max price: -1, or above
// zero with at most 5 decimals.
func maxPriceValid(text string) bool {
	v, ok := new(big.Rat).SetString(text)
	if !ok {
		return false
	}
	if v.Cmp(big.NewRat(-1, 1)) == 0 {
		return true
	}
	return v.Sign() > 0 && new(big.Rat).Mul(v, big.NewRat(100000, 1)).IsInt()
}
