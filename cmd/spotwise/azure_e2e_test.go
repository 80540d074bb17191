package main

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/internal/server"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/providers/azure"
	"github.com/spotwise/spotwise/providers/azure/azurefake"
)

const (
	e2eSize    = "Standard_NC24ads_A100_v4"
	e2eSSHKey  = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUm ops@example"
	e2eSubnet  = "/subscriptions/00000000-0000-0000-0000-0000000000e2/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/gpu/subnets/jobs"
	azureNotBy = 10 * time.Second // how far ahead the test's Preempt is announced (Azure: about 30 s)
)

// A job on Azure: priced from the (fake) Retail Prices API, launched as a
// Spot VM, evicted with a Scheduled Events Preempt that only the VM's own
// agent hears: the agent checkpoints, approves the event and tells the
// scheduler, which places the job again; the new VM resumes from the
// checkpoint and the job finishes with the uninterrupted run's result.
func TestAzureJobSurvivesAPreemptEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end on the fake Azure")
	}
	t.Parallel() // mostly waits on real time
	cloud := azurefake.New()
	t.Cleanup(cloud.Close)
	cloud.SetPrice("eastus", e2eSize, azurefake.Consumption, "3.673")
	cloud.SetPrice("eastus", e2eSize, azurefake.Spot, "0.7346")
	cs := startCloudServer(t, func(c *server.Config, natsURL, ckptURI string) {
		c.Providers.Azure = &azure.Config{
			SubscriptionID: "00000000-0000-0000-0000-0000000000e2", ResourceGroup: "spotwise-e2e",
			Regions: []string{"eastus"}, VMSizes: []string{e2eSize}, SubnetID: e2eSubnet,
			Image:         azure.Image{Publisher: "microsoft-dsvm", Offer: "ubuntu-hpc", SKU: "2204", Version: "latest"},
			AdminUsername: "spotwise", SSHPublicKey: e2eSSHKey,
			PollInterval: azure.Duration(time.Second),
			Endpoints:    azure.Endpoints{RetailPrices: cloud.RetailPricesURL()},
			Agent:        azure.AgentBootstrap{NATSURL: natsURL, Checkpoints: ckptURI},
		}
	}, server.WithAzureOptions(azure.WithTransport(cloud.Transport()), azure.WithCredential(cloud.Credential())))

	id := cs.submit(t, cloudJob("azure"))
	boot := func(n int) (azurefake.Create, *azurefake.ScheduledEvents, *bootedAgent) {
		t.Helper()
		testutil.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
			if len(cloud.Creates()) < n {
				return fmt.Errorf("VM %d not created yet (%d)", n, len(cloud.Creates()))
			}
			return nil
		})
		vm := cloud.Creates()[n-1]
		argv, workload, err := azurefake.ParseCustomData(vm.CustomData)
		if err != nil {
			t.Fatal(err)
		}
		se := azurefake.StartScheduledEvents()
		t.Cleanup(se.Close)
		return vm, se, bootAgent(t, argv, workload, scriptCreds(t, vm.CustomData), "--metadata-endpoint", se.URL())
	}
	vm1, se1, agent1 := boot(1)
	cur := cs.waitJob(t, id, "running", 60*time.Second, func(j *api.JobView) bool {
		return j.State == job.Running && j.Progress >= 0.25
	})
	if p := cur.Placement; p.Provider != "azure" || p.Purchase != "spot" || p.PricePerHour != money.MustParse("0.7346") {
		t.Fatalf("placed on %+v, want the Spot A100 at the Retail Prices API's $0.7346/h", p)
	}
	if vm1.Priority != "Spot" || vm1.EvictionPolicy != "Delete" || vm1.MaxPrice == nil || vm1.Tags == nil {
		t.Fatalf("VM 1 created as %s/%s, max price %v, tags %v", vm1.Priority, vm1.EvictionPolicy, vm1.MaxPrice, vm1.Tags)
	}

	// Azure announces the eviction to the VM alone.
	notBefore := time.Now().Add(azureNotBy).Truncate(time.Second)
	event := se1.Preempt(vm1.Name, notBefore)
	vm2, _, agent2 := boot(2)
	if vm2.Name == vm1.Name || vm2.Priority != "Spot" {
		t.Fatalf("replacement VM %s (%s) after %s", vm2.Name, vm2.Priority, vm1.Name)
	}
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if !slices.Contains(se1.Acked(), event) {
			return fmt.Errorf("the Preempt event %s is not approved yet (approved: %v)", event, se1.Acked())
		}
		return nil
	})
	// With its checkpoint stored, spotwise deletes the VM rather than pay
	// for it until NotBefore (Azure would evict it then).
	testutil.CheckFor(t, time.Until(notBefore), 20*time.Millisecond, func() error {
		if slices.Contains(cloud.VMs(), vm1.Name) {
			return fmt.Errorf("VM %s still there after its checkpoint", vm1.Name)
		}
		return nil
	})
	agent1.kill()

	done := cs.waitJob(t, id, "finished", 90*time.Second, func(j *api.JobView) bool { return j.State.Terminal() })
	checkSurvived(t, done, agent2)
	if n := len(cloud.Creates()); n != 2 {
		t.Errorf("%d VMs created, want 2: nothing bought twice", n)
	}
	// The finished job's VM is deleted; nothing is left running.
	testutil.CheckFor(t, 15*time.Second, 50*time.Millisecond, func() error {
		if left := cloud.VMs(); len(left) != 0 {
			return fmt.Errorf("VMs left after the job: %v", left)
		}
		return nil
	})
}
