package azurefake

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
)

// listPageSize is how many VMs one page of a listing holds: small, so a
// client's paging is exercised.
const listPageSize = 2

// maxCustomData is Azure's limit on custom data, before base64.
const maxCustomData = 64 * 1024

// operation is a long-running operation, read through its
// Azure-AsyncOperation URL.
type operation struct {
	key     string // the VM
	create  bool   // a creation: its status follows the VM's provisioning
	failure *Failure
	start   time.Time
}

// serveARM answers one ARM request: the virtual machines of a resource
// group, their instance views, and operation statuses.
func (c *Cloud) serveARM(w http.ResponseWriter, req *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.admitLocked(w, req) {
		return
	}
	seg := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	is := func(i int, lit string) bool { return len(seg) > i && strings.EqualFold(seg[i], lit) }
	switch {
	case len(seg) == 8 && is(0, "subscriptions") && is(2, "providers") && is(3, "Microsoft.Compute") && is(4, "locations") && is(6, "operations"):
		if req.Method == http.MethodGet {
			c.getOperationLocked(w, seg[7])
			return
		}
	case len(seg) >= 7 && len(seg) <= 9 && is(0, "subscriptions") && is(2, "resourceGroups") && is(4, "providers") &&
		is(5, "Microsoft.Compute") && is(6, "virtualMachines"):
		rg := seg[3]
		switch {
		case len(seg) == 7 && req.Method == http.MethodGet:
			c.listLocked(w, req, rg)
			return
		case len(seg) == 8 && req.Method == http.MethodPut:
			c.putLocked(w, req, rg, seg[7])
			return
		case len(seg) == 8 && req.Method == http.MethodGet:
			c.getLocked(w, rg, seg[7])
			return
		case len(seg) == 8 && req.Method == http.MethodDelete:
			c.deleteLocked(w, req, rg, seg[7])
			return
		case len(seg) == 9 && is(8, "instanceView") && req.Method == http.MethodGet:
			c.instanceViewLocked(w, rg, seg[7])
			return
		}
	}
	writeError(w, http.StatusBadRequest, "UnsupportedOperation", fmt.Sprintf("azurefake does not serve %s %s", req.Method, req.URL.Path))
}

// putLocked creates (or updates) a VM. A creation answers 201 with the
// VM Creating and an Azure-AsyncOperation to poll.
func (c *Cloud) putLocked(w http.ResponseWriter, req *http.Request, rg, name string) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "InvalidRequestContent", err.Error())
		return
	}
	var spec armcompute.VirtualMachine
	if err := json.Unmarshal(body, &spec); err != nil {
		writeError(w, http.StatusBadRequest, "InvalidRequestContent", "The request content was invalid and could not be deserialized: "+err.Error())
		return
	}
	c.creates = append(c.creates, createRecord{rg: rg, name: name, body: body})
	key := vmKey(rg, name)
	old := c.vms[key]
	if old != nil && req.Header.Get("If-None-Match") == "*" {
		writeError(w, http.StatusPreconditionFailed, "PreconditionFailed", fmt.Sprintf("The resource '%s' already exists and If-None-Match is '*'.", name))
		return
	}
	if f, ok := takeRule(&c.refuse, name); ok {
		writeFailure(w, f)
		return
	}
	if msg := validateVM(spec); msg != "" {
		writeError(w, http.StatusBadRequest, "InvalidParameter", msg)
		return
	}
	if mp := maxPriceText(body); mp != "" && !maxPriceValid(mp) {
		writeFailure(w, LaunchFailure("MaxPriceValueInvalid"))
		return
	}
	now := c.now()
	if old != nil {
		// An update: the model changes, the state does not.
		old.spec, old.body = stripSecrets(spec), body
		c.writeVMLocked(w, http.StatusOK, old, "")
		return
	}
	v := &vm{rg: rg, name: name, id: newGUID(), spec: stripSecrets(spec), body: body, created: now,
		provisioning: "Creating", power: "starting"}
	if f, ok := takeRule(&c.failProv, name); ok {
		v.provisioning, v.power, v.failure = "Failed", "", &f
	}
	c.vms[key] = v
	c.startOperationLocked(w, req, key, str(spec.Location), true, nil)
	c.writeVMLocked(w, http.StatusCreated, v, "Creating")
}

// validateVM checks what Azure would refuse outright.
func validateVM(spec armcompute.VirtualMachine) string {
	p := spec.Properties
	switch {
	case str(spec.Location) == "":
		return "The value of parameter location is invalid."
	case p == nil || p.HardwareProfile == nil || p.HardwareProfile.VMSize == nil:
		return "The value of parameter hardwareProfile.vmSize is invalid."
	case p.BillingProfile != nil && (p.Priority == nil || *p.Priority == armcompute.VirtualMachinePriorityTypesRegular):
		return "Billing profile can only be set for Spot or Low priority virtual machines."
	}
	if p.OSProfile != nil && p.OSProfile.CustomData != nil {
		data, err := base64.StdEncoding.DecodeString(*p.OSProfile.CustomData)
		if err != nil {
			return "Custom data in OSProfile must be in Base64 encoding."
		}
		if len(data) > maxCustomData {
			return fmt.Sprintf("Custom data in OSProfile must be at most %d bytes before encoding.", maxCustomData)
		}
	}
	return ""
}

func (c *Cloud) getLocked(w http.ResponseWriter, rg, name string) {
	v := c.lookupLocked(rg, name)
	if v == nil {
		writeNotFound(w, rg, name)
		return
	}
	c.writeVMLocked(w, http.StatusOK, v, "")
}

func (c *Cloud) instanceViewLocked(w http.ResponseWriter, rg, name string) {
	v := c.lookupLocked(rg, name)
	if v == nil {
		writeNotFound(w, rg, name)
		return
	}
	state := strings.ToLower(c.stateLocked(v))
	prov := &armcompute.InstanceViewStatus{
		Code:          ptr("ProvisioningState/" + state),
		Level:         ptr(armcompute.StatusLevelTypesInfo),
		DisplayStatus: ptr("Provisioning " + state),
	}
	if v.failure != nil {
		*prov.Code += "/" + v.failure.Code
		prov.Level, prov.Message = ptr(armcompute.StatusLevelTypesError), ptr(v.failure.Message)
	}
	view := armcompute.VirtualMachineInstanceView{ComputerName: ptr(v.name), Statuses: []*armcompute.InstanceViewStatus{prov}}
	if v.power != "" {
		view.Statuses = append(view.Statuses, &armcompute.InstanceViewStatus{Code: ptr("PowerState/" + v.power),
			Level: ptr(armcompute.StatusLevelTypesInfo), DisplayStatus: ptr("VM " + v.power)})
	}
	writeJSON(w, http.StatusOK, view)
}

// listLocked writes one page of a resource group's VMs, by name. The
// nextLink's $skiptoken is the last name served, so listings are
// independent of each other and a VM created or deleted meanwhile moves
// no other one to another page.
func (c *Cloud) listLocked(w http.ResponseWriter, req *http.Request, rg string) {
	after := strings.ToLower(req.URL.Query().Get("$skiptoken"))
	var names []string
	for _, v := range c.vms {
		if n := strings.ToLower(v.name); strings.EqualFold(v.rg, rg) && n > after {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	page := armcompute.VirtualMachineListResult{Value: []*armcompute.VirtualMachine{}}
	for _, n := range names[:min(listPageSize, len(names))] {
		m := c.modelLocked(c.vms[vmKey(rg, n)], "")
		page.Value = append(page.Value, &m)
	}
	if len(names) > listPageSize {
		q := req.URL.Query()
		q.Set("$skiptoken", names[listPageSize-1])
		page.NextLink = ptr(fmt.Sprintf("%s://%s%s?%s", scheme(req), req.URL.Host, req.URL.Path, q.Encode()))
	}
	writeJSON(w, http.StatusOK, page)
}

// deleteLocked deletes a VM: it is gone at once, and the operation reads
// Succeeded (or, for a failure set with FailDeletes, Failed with the VM
// still there). Deleting a VM that does not exist is 204 No Content.
func (c *Cloud) deleteLocked(w http.ResponseWriter, req *http.Request, rg, name string) {
	c.deletes = append(c.deletes, name)
	v := c.lookupLocked(rg, name)
	if v == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	var f *Failure
	if c.deleteFail > 0 {
		c.deleteFail--
		f = &Failure{Status: http.StatusConflict, Code: "OperationPreempted", Message: "Operation execution has been preempted by a more recent operation."}
	} else {
		delete(c.vms, vmKey(v.rg, v.name))
	}
	c.startOperationLocked(w, req, vmKey(v.rg, v.name), str(v.spec.Location), false, f)
	w.WriteHeader(http.StatusAccepted)
}

// startOperationLocked records a long-running operation and sets the
// headers that point the client's poller at it.
func (c *Cloud) startOperationLocked(w http.ResponseWriter, req *http.Request, key, location string, create bool, f *Failure) {
	id := strings.ToLower(newGUID())
	c.ops[id] = &operation{key: key, create: create, failure: f, start: c.now()}
	sub := strings.Split(strings.Trim(req.URL.Path, "/"), "/")[1]
	base := fmt.Sprintf("%s://%s/subscriptions/%s/providers/Microsoft.Compute/locations/%s/operations/%s?api-version=%s",
		scheme(req), req.URL.Host, sub, location, id, req.URL.Query().Get("api-version"))
	w.Header().Set("Azure-AsyncOperation", base)
	if !create {
		w.Header().Set("Location", base+"&monitor=true")
	}
	w.Header().Set("Retry-After", "0")
}

// getOperationLocked writes an operation's status. A creation's follows
// its VM: InProgress while Creating, Succeeded once provisioned, Failed
// with the VM's failure, Canceled if the VM went away meanwhile.
func (c *Cloud) getOperationLocked(w http.ResponseWriter, id string) {
	op := c.ops[strings.ToLower(id)]
	if op == nil {
		writeError(w, http.StatusNotFound, "NotFound", "The operation "+id+" was not found.")
		return
	}
	status, f := "Succeeded", op.failure
	if op.create {
		v, state := c.vms[op.key], ""
		if v != nil {
			state = c.stateLocked(v)
		}
		switch {
		case v == nil:
			status = "Canceled"
			f = &Failure{Code: "OperationCanceled", Message: "The operation was canceled: the virtual machine was deleted."}
		case state == "Failed":
			f = v.failure
			if f == nil {
				f = &Failure{Code: "ProvisioningFailed", Message: "Provisioning of the virtual machine failed."}
			}
		case state == "Creating":
			status = "InProgress"
		}
	}
	doc := map[string]any{"name": id, "startTime": op.start.UTC().Format(time.RFC3339Nano)}
	if f != nil && status == "Succeeded" {
		status = "Failed"
	}
	doc["status"] = status
	if status != "InProgress" {
		doc["endTime"] = c.now().UTC().Format(time.RFC3339Nano)
	}
	if f != nil {
		doc["error"] = map[string]string{"code": f.Code, "message": f.Message}
	}
	writeJSON(w, http.StatusOK, doc)
}

// writeVMLocked writes a VM as ARM returns it; provisioning, if given,
// overrides the state shown.
func (c *Cloud) writeVMLocked(w http.ResponseWriter, status int, v *vm, provisioning string) {
	writeJSON(w, status, c.modelLocked(v, provisioning))
}

// modelLocked is a VM as ARM returns it: the request's model without its
// secrets, with its identity and provisioning state. The stored model is
// never modified, so the copy shares its pointers safely.
func (c *Cloud) modelLocked(v *vm, provisioning string) armcompute.VirtualMachine {
	m := v.spec
	m.Name = ptr(v.name)
	m.Type = ptr("Microsoft.Compute/virtualMachines")
	m.ID = ptr(vmID(v.rg, v.name))
	props := armcompute.VirtualMachineProperties{}
	if m.Properties != nil {
		props = *m.Properties
	}
	if provisioning == "" {
		provisioning = c.stateLocked(v)
	}
	props.ProvisioningState = ptr(provisioning)
	props.VMID = ptr(strings.ToLower(v.id))
	props.TimeCreated = ptr(v.created.UTC())
	m.Properties = &props
	return m
}

// vmID is a VM's resource ID; the subscription is not tracked.
func vmID(rg, name string) string {
	return "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/" + rg + "/providers/Microsoft.Compute/virtualMachines/" + name
}

func scheme(req *http.Request) string {
	if req.URL.Scheme != "" {
		return req.URL.Scheme
	}
	return "https"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "InternalServerError", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeError writes an ARM error body.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func writeFailure(w http.ResponseWriter, f Failure) {
	status := f.Status
	if status == 0 {
		status = http.StatusConflict
	}
	writeError(w, status, f.Code, f.Message)
}

func writeNotFound(w http.ResponseWriter, rg, name string) {
	writeError(w, http.StatusNotFound, "ResourceNotFound",
		fmt.Sprintf("The Resource 'Microsoft.Compute/virtualMachines/%s' under resource group '%s' was not found.", name, rg))
}

func ptr[T any](v T) *T { return &v }

func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
