package server

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/spotwise/spotwise/money"
	"github.com/spotwise/spotwise/scheduler"
)

// exampleTeams reads the commented teams example of the example config.
func exampleTeams(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(configExample)
	if err != nil {
		t.Fatal(err)
	}
	var body []string
	in := false
	for line := range strings.SplitSeq(string(b), "\n") {
		switch {
		case line == "# Teams, for example:":
			in = true
		case in && strings.HasPrefix(line, "#   "):
			body = append(body, "  "+strings.TrimPrefix(line, "#   "))
		case in:
			in = false
		}
	}
	if len(body) == 0 {
		t.Fatal("the example config lacks a teams example")
	}
	return "teams:\n" + strings.Join(body, "\n") + "\n"
}

// The teams section: what operators copy loads and reaches the scheduler
// as written (money exact); every mistake is named by its field.
func TestConfigTeams(t *testing.T) {
	t.Run("the example", func(t *testing.T) {
		c := Defaults()
		if err := c.LoadFile(writeConfig(t, exampleTeams(t))); err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("the teams example does not validate:\n%v", err)
		}
		want := map[string]scheduler.TeamLimits{
			"nlp": {Budget: scheduler.Budget{Monthly: money.MustParse("1000"), SoftPercent: []int{80, 100}, Hard: true},
				Quota: scheduler.Quota{GPUs: 16, GPUsByType: map[string]int{"A100": 8}, Jobs: 10}},
			"vision": {Budget: scheduler.Budget{Monthly: money.MustParse("250")}},
		}
		if got := teamLimits(c.Teams); !reflect.DeepEqual(got, want) {
			t.Errorf("scheduler limits %+v, want %+v", got, want)
		}
	})
	tests := []struct {
		name string
		yaml string
		// field starts the one problem reported ("" = valid); load: the
		// problem comes from reading the file.
		field string
		load  bool
	}{
		{name: "exact cents", yaml: `{nlp: {budget: {monthly_usd: "1234.56"}}}`},
		{name: "quota only", yaml: `{nlp: {quota: {jobs: 3}}}`},
		{name: "amount not a number", yaml: `{nlp: {budget: {monthly_usd: "lots"}}}`, field: "teams.nlp.budget.monthly_usd"},
		{name: "amount with too many decimals", yaml: `{nlp: {budget: {monthly_usd: "1.0000001"}}}`, field: "teams.nlp.budget.monthly_usd"},
		{name: "amount zero", yaml: `{nlp: {budget: {monthly_usd: "0"}}}`, field: "teams.nlp.budget.monthly_usd"},
		{name: "amount negative", yaml: `{nlp: {budget: {monthly_usd: "-5"}}}`, field: "teams.nlp.budget.monthly_usd"},
		{name: "hard with no amount", yaml: `{nlp: {budget: {hard: true}}}`, field: "teams.nlp.budget.monthly_usd"},
		{name: "soft threshold past 100", yaml: `{nlp: {budget: {monthly_usd: "10", soft_percent: [80, 120]}}}`, field: "teams.nlp.budget.soft_percent[1]"},
		{name: "negative GPU quota", yaml: `{nlp: {quota: {gpus: -1}}}`, field: "teams.nlp.quota.gpus"},
		{name: "negative jobs quota", yaml: `{nlp: {quota: {jobs: -2}}}`, field: "teams.nlp.quota.jobs"},
		{name: "a type's quota of 0", yaml: `{nlp: {quota: {gpus_by_type: {H100: 0}}}}`, field: "teams.nlp.quota.gpus_by_type.H100"},
		{name: "an unknown GPU type", yaml: `{nlp: {quota: {gpus_by_type: {A1OO: 8}}}}`, field: "teams.nlp.quota.gpus_by_type.A1OO"},
		{name: "a type's quota above the total", yaml: `{nlp: {quota: {gpus: 4, gpus_by_type: {A100: 8}}}}`, field: "teams.nlp.quota.gpus_by_type.A100"},
		{name: "not a team name", yaml: `{"n l p": {quota: {gpus: 1}}}`, field: "teams.n l p"},
		{name: "an amount written as a number", yaml: `{nlp: {budget: {monthly_usd: 1000}}}`, field: "monthly_usd", load: true},
		{name: "a misspelt key", yaml: `{nlp: {quota: {gpu: 4}}}`, field: "gpu", load: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Defaults()
			err := c.LoadFile(writeConfig(t, "teams: "+tt.yaml+"\n"))
			if tt.load {
				if err == nil || !strings.Contains(err.Error(), tt.field) {
					t.Fatalf("loading: %v, want an error naming %s", err, tt.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			err = c.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("refused a valid configuration:\n%v", err)
				}
				return
			}
			got := problems(err)
			if len(got) != 1 || !strings.HasPrefix(got[0], tt.field+": ") {
				t.Errorf("got %q, want one problem starting with %q", got, tt.field+": ")
			}
		})
	}
}
