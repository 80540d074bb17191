package providers

import "testing"

func TestIsIDIsIDsEquality(t *testing.T) {
	o := Offer{Provider: "aws", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p3.2xlarge", Purchase: Spot}
	for _, id := range []string{
		o.ID(), "", "aws", "aws/", "aws/us-east-1/us-east-1a/p3.2xlarge/", "aws/us-east-1/us-east-1a/p3.2xlarge/spotx",
		"aws/us-east-1/us-east-1a/p3.2xlarge/on-demand", "aws/us-east-1/us-east-1b/p3.2xlarge/spot",
		"azure/us-east-1/us-east-1a/p3.2xlarge/spot", "aws/us-east-1/us-east-1a/p3.2xlarge/spot/",
		"aws-us-east-1/us-east-1a/p3.2xlarge/spot", "aws/us-east-1/us-east-1a/p3/2xlarge/spot",
	} {
		if got, want := o.IsID(id), id == o.ID(); got != want {
			t.Errorf("IsID(%q) = %v, want %v", id, got, want)
		}
	}
	// Parts holding the separator: still exactly the IDs' equality.
	odd := Offer{Provider: "a/b", Region: "c", Zone: "", InstanceType: "d", Purchase: OnDemand}
	for _, id := range []string{odd.ID(), "a/b/c//d/on-demand", "a/b/c/d//on-demand", "a/b/c//d/on-demand/"} {
		if got, want := odd.IsID(id), id == odd.ID(); got != want {
			t.Errorf("IsID(%q) = %v, want %v", id, got, want)
		}
	}
}

func FuzzIsID(f *testing.F) {
	f.Add("aws", "us-east-1", "us-east-1a", "p3.2xlarge", "spot", "aws/us-east-1/us-east-1a/p3.2xlarge/spot")
	f.Add("a/b", "c", "", "d", "on-demand", "a/b/c//d/on-demand")
	f.Fuzz(func(t *testing.T, p, r, z, it, pu, id string) {
		o := Offer{Provider: p, Region: r, Zone: z, InstanceType: it, Purchase: PurchaseOption(pu)}
		if got, want := o.IsID(id), id == o.ID(); got != want {
			t.Fatalf("IsID(%q) of %+v = %v, want %v", id, o, got, want)
		}
		if !o.IsID(o.ID()) {
			t.Fatalf("%+v is not its own ID", o)
		}
	})
}
