package web_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/auth"
	"github.com/spotwise/spotwise/events/eventstest"
	"github.com/spotwise/spotwise/internal/server"
	"github.com/spotwise/spotwise/internal/testutil"
	"github.com/spotwise/spotwise/job"
)

// browser starts headless Chromium (Debian's chromium package). Without
// one the test is skipped, unless SPOTWISE_REQUIRE_BROWSER is set (CI
// sets it: there the browser tests must run).
func browser(t *testing.T) context.Context {
	t.Helper()
	path := os.Getenv("SPOTWISE_CHROMIUM")
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path != "" {
			break
		}
		path, _ = exec.LookPath(name)
	}
	if path == "" {
		if os.Getenv("SPOTWISE_REQUIRE_BROWSER") != "" {
			t.Fatal("no chromium to drive (apt-get install chromium, or set SPOTWISE_CHROMIUM)")
		}
		t.Skip("no chromium: the dashboard's browser tests need Debian's chromium package")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1400, 1000))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(cancelCtx)
	// A person confirms what the page asks (cancelling a job).
	err := chromedp.Listen(ctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			go func() {
				_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
			}()
		}
	})
	if err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// screenshot writes what the browser shows to the artifacts directory
// (SPOTWISE_ARTIFACTS, else bin/artifacts under the repository), where CI
// keeps it.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("SPOTWISE_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "bin", "artifacts")
	}
	dir = filepath.Join(dir, "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// run runs browser actions with a bound, failing the test with what was
// being done.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(cctx, actions...); err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
		t.Fatalf("%s: %v\nthe page shows:\n%s", what, err, body)
	}
}

// waitText waits until the element's text satisfies ok.
func waitText(t *testing.T, ctx context.Context, what, sel string, ok func(string) bool) string {
	t.Helper()
	var text string
	deadline := time.Now().Add(60 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var err error
		text, err = chromedp.Run(cctx, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
		cancel()
		if err == nil && ok(text) {
			return text
		}
		if time.Now().After(deadline) {
			body, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
			t.Fatalf("%s: %q shows %q (%v); the page:\n%s", what, sel, text, err, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func startServer(t *testing.T) *server.Server {
	t.Helper()
	cfg := server.Defaults()
	cfg.DataDir = t.TempDir()
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.NATS.Listen = ""
	// A job of the examples runs for minutes of wall time: long enough to
	// be seen running, preempted and moved, and cancelled.
	cfg.Sim.Speed = 60
	cfg.Scheduler.ReconcileInterval = job.Duration(time.Second)
	cfg.Scheduler.Arbitrage.Enabled = false
	cfg.Teams = map[string]server.TeamConfig{"vision": {Budget: server.BudgetConfig{MonthlyUSD: "1000.00"}}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := server.Start(ctx, cfg, eventstest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func submit(t *testing.T, c *api.Client, name, team string) *api.JobView {
	t.Helper()
	spec := fmt.Sprintf(`{"name": %q, "team": %q, "command": ["python", "train.py"],
		"resources": {"gpus_per_node": 1}, "work": "40h on T4", "purchase": "spot",
		"checkpoint": {"interval": "30m"}}`, name, team)
	v, _, err := c.Submit(context.Background(), []byte(spec), "application/json", "")
	if err != nil {
		t.Fatalf("submitting %s: %v", name, err)
	}
	return v
}

func waitRunning(t *testing.T, c *api.Client, id string) *api.JobView {
	t.Helper()
	var v *api.JobView
	testutil.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		var err error
		if v, err = c.Get(context.Background(), id); err != nil {
			return err
		}
		if v.State != job.Running {
			return fmt.Errorf("job %s is %s (%s)", id, v.State, v.Message)
		}
		return nil
	})
	return v
}

// What a person sees on the dashboard of a real server (embedded NATS, the
// simulated cloud), driven in headless Chromium: the sign-in prompt, the
// jobs with their state and cost, a job's timeline after a preemption, a
// cancel that works, the market and the spend chart.
func TestDashboardInABrowser(t *testing.T) {
	s := startServer(t)
	ctx := browser(t)
	base := "http://" + s.HTTPAddr()
	op := api.NewClient(s.HTTPAddr())
	op.Token = s.OperatorToken()

	first := submit(t, op, "resnet-sweep-7", "vision")
	second := submit(t, op, "bert-ablation", "nlp")
	waitRunning(t, op, first.ID)
	waitRunning(t, op, second.ID)

	t.Run("unauthenticated: a sign-in prompt, and a wrong token is refused", func(t *testing.T) {
		run(t, ctx, "opening the server's address", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#login")))
		waitText(t, ctx, "the prompt", "#login h2", func(s string) bool { return s == "Sign in to spotwise" })
		url, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(url, "/ui/") {
			t.Errorf("/ leads to %s, want the dashboard", url)
		}
		screenshot(t, ctx, "sign-in")
		run(t, ctx, "signing in with a wrong token", chromedp.SendKeys(chromedp.CSS("#login-token"), "spw_wrong"), chromedp.Click(chromedp.CSS("#login-submit")))
		waitText(t, ctx, "the refusal", "#login-error", func(s string) bool { return strings.Contains(s, "not accepted") })
	})

	t.Run("the jobs list shows each job's name, state and cost", func(t *testing.T) {
		run(t, ctx, "signing in", chromedp.SetValue(chromedp.CSS("#login-token"), s.OperatorToken()), chromedp.Click(chromedp.CSS("#login-submit")),
			chromedp.WaitVisible(chromedp.CSS("#jobs")))
		row := fmt.Sprintf(`#jobs tr[data-id=%q]`, first.ID)
		waitText(t, ctx, "the job's row", row+" td.name", func(s string) bool { return s == "resnet-sweep-7" })
		waitText(t, ctx, "the job's state", row+" .badge", func(s string) bool { return s == "running" })
		// Its cost grows from $0 as it runs.
		waitText(t, ctx, "the job's cost", row+" td.cost", func(s string) bool { return strings.HasPrefix(s, "$") && s != "$0.00" })
		waitText(t, ctx, "the other job", fmt.Sprintf(`#jobs tr[data-id=%q] td.name`, second.ID), func(s string) bool { return s == "bert-ablation" })
		screenshot(t, ctx, "jobs")

		// Filtered by team, the other team's job is gone.
		run(t, ctx, "filtering by team", chromedp.Navigate(base+"/ui/#/jobs?team=nlp"), chromedp.WaitVisible(chromedp.CSS("#jobs")))
		waitText(t, ctx, "the nlp list", "#jobs tbody", func(s string) bool {
			return strings.Contains(s, "bert-ablation") && !strings.Contains(s, "resnet-sweep-7")
		})
	})

	t.Run("a job's timeline shows its preemption and the move", func(t *testing.T) {
		run(t, ctx, "opening the job", chromedp.Navigate(base+"/ui/#/jobs/"+first.ID), chromedp.WaitVisible(chromedp.CSS("#timeline")))
		waitText(t, ctx, "the job's name", "#job-name", func(s string) bool { return s == "resnet-sweep-7" })
		// What it saved against on-demand so far (early on, maybe less
		// than nothing: the boot is paid, little work is done).
		waitText(t, ctx, "its savings", "#job-savings", func(s string) bool { return strings.Contains(s, "$") })
		before := waitRunning(t, op, first.ID)
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/sim/preempt", strings.NewReader(`{"job": "`+first.ID+`"}`))
		req.Header.Set("Authorization", "Bearer "+s.OperatorToken())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("preempting: %s", resp.Status)
		}
		// The page follows by itself: the notice, then the job running
		// on a new attempt.
		waitText(t, ctx, "the timeline", "#timeline", func(s string) bool {
			return strings.Contains(s, "interruption-notice") && strings.Contains(s, fmt.Sprintf("attempt %d", before.Attempt+1))
		})
		waitText(t, ctx, "the state after the move", "#job-state", func(s string) bool { return s == "running" })
		// Its output: both attempts', the second resuming from the
		// checkpoint the first saved.
		waitText(t, ctx, "the job's output", "#logs", func(s string) bool {
			return strings.Contains(s, "checkpoint saved") && strings.Contains(s, "resuming from checkpoint")
		})
		screenshot(t, ctx, "job-timeline")
	})

	t.Run("cancel from the job page", func(t *testing.T) {
		run(t, ctx, "opening the other job", chromedp.Navigate(base+"/ui/#/jobs/"+second.ID), chromedp.WaitVisible(chromedp.CSS("#cancel")))
		waitText(t, ctx, "its name", "#job-name", func(s string) bool { return s == "bert-ablation" })
		// The page redraws the job's header on each refresh: a click
		// that lands as the button is replaced is lost, as it would be
		// for a person, who clicks again.
		for try := 0; ; try++ {
			run(t, ctx, "cancelling", chromedp.Click(chromedp.CSS("#cancel")))
			cancelled := func() bool {
				v, err := op.Get(context.Background(), second.ID)
				return err == nil && v.State == job.Cancelled
			}
			deadline := time.Now().Add(5 * time.Second)
			for !cancelled() && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
			if cancelled() || try == 5 {
				break
			}
		}
		waitText(t, ctx, "its state", "#job-state", func(s string) bool { return s == "cancelled" })
		v, err := op.Get(context.Background(), second.ID)
		if err != nil || v.State != job.Cancelled {
			t.Fatalf("after the click the server has the job %v (%v)", v.State, err)
		}
	})

	t.Run("the market lists offers with prices and plots one", func(t *testing.T) {
		run(t, ctx, "opening the market", chromedp.Navigate(base+"/ui/#/market?purchase=spot"), chromedp.WaitVisible(chromedp.CSS("#offers tbody tr")))
		rows := waitText(t, ctx, "the offers", "#offers tbody", func(s string) bool { return strings.Contains(s, "spot") && strings.Contains(s, "$") })
		if strings.Contains(rows, "on-demand") {
			t.Errorf("filtered to spot, the market shows on-demand offers")
		}
		run(t, ctx, "the price chart", chromedp.WaitVisible(chromedp.CSS(`#price-chart svg polyline`)))
		screenshot(t, ctx, "market")
	})

	t.Run("the costs page charts spend per team", func(t *testing.T) {
		run(t, ctx, "opening costs", chromedp.Navigate(base+"/ui/#/costs?group_by=team&hours=6"), chromedp.WaitVisible(chromedp.CSS("#spend-chart")))
		total := waitText(t, ctx, "the total", "#spend-total", func(s string) bool { return strings.HasPrefix(s, "$") && s != "$0.00" })
		waitText(t, ctx, "the savings", "#savings-total", func(s string) bool { return strings.Contains(s, "$") })
		waitText(t, ctx, "the overhead", "#overhead-total", func(s string) bool { return strings.HasPrefix(s, "$") })
		waitText(t, ctx, "vision's budget", "#budgets", func(s string) bool {
			return strings.Contains(s, "vision") && strings.Contains(s, "$1,000") && strings.Contains(s, "alerts at 80%, 100%")
		})
		legend := waitText(t, ctx, "the legend", ".legend", func(s string) bool { return strings.Contains(s, "vision") && strings.Contains(s, "nlp") })
		bars, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#spend-chart rect").length`))
		if err != nil || bars == 0 {
			t.Errorf("the spend chart has no bars (total %s, legend %s)", total, legend)
		}
		screenshot(t, ctx, "costs")
	})

	t.Run("a team's viewer sees only its team", func(t *testing.T) {
		tok, err := op.CreateToken(context.Background(), api.TokenRequest{Name: "browser", Team: "nlp", Role: auth.Viewer, TTL: job.Duration(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		run(t, ctx, "signing in as nlp's viewer", chromedp.Evaluate[chromedp.Void](`sessionStorage.clear()`), chromedp.Navigate(base+"/ui/#/jobs"), chromedp.Reload(),
			chromedp.WaitVisible(chromedp.CSS("#login")), chromedp.SetValue(chromedp.CSS("#login-token"), tok.Token), chromedp.Click(chromedp.CSS("#login-submit")),
			chromedp.WaitVisible(chromedp.CSS("#jobs")))
		waitText(t, ctx, "nlp's jobs", "#jobs tbody", func(s string) bool {
			return strings.Contains(s, "bert-ablation") && !strings.Contains(s, "resnet-sweep-7")
		})
	})
}
