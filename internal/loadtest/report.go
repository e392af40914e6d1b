package loadtest

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// showProgress writes "what: done/total turns, N errors, X turns/s" to cfg.Progress until the
// returned stop is called: rewritten in place five times a second on a terminal, a line
// every five seconds otherwise.
func (r *runner) showProgress(ctx context.Context, what string, total int) (stop func()) {
	w := r.cfg.Progress
	if w == nil {
		return func() {}
	}
	every, end := 5*time.Second, "\n"
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			every, end = 200*time.Millisecond, ""
		}
	}
	began := time.Now()
	line := func() string {
		done := r.done.Load()
		return fmt.Sprintf("\r%s: %d/%d turns, %d errors, %.1f turns/s", what, done, total, r.failed.Load(),
			float64(done)/time.Since(began).Seconds())
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				fmt.Fprint(w, line()+"\n")
				return
			case <-t.C:
				fmt.Fprint(w, line()+end)
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// WriteTable prints rep for a person: one row per scenario, then the processes of each run.
func WriteTable(w io.Writer, rep *Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "server %s (%s), %d CPUs\n\n", rep.BaseURL, rep.Server, rep.CPUs)
	if idle := rep.Idle; idle != nil {
		fmt.Fprintf(w, "idle: %d of %d sessions open (one plain turn each, stream open), %d errors%s\n", idle.Opened, idle.Sessions, idle.Errors, kinds(idle.ErrorsByKind))
		if len(idle.Processes) > 0 {
			fmt.Fprintln(tw, "process\tpid\tRSS before\tRSS after\tper idle session\tpeak RSS\t")
			for _, p := range idle.Processes {
				per := "-"
				if idle.Opened > 0 {
					per = fmt.Sprintf("%.0fKiB", float64(p.RSSAfterBytes-p.RSSBeforeBytes)/float64(idle.Opened)/(1<<10))
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t\n", p.Name, p.PID, mib(float64(p.RSSBeforeBytes)), mib(float64(p.RSSAfterBytes)), per, mib(float64(p.PeakRSSBytes)))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}
		fmt.Fprintln(w)
	}
	if len(rep.Runs) == 0 {
		return nil
	}
	fmt.Fprintln(tw, "scenario\tsessions\tsubs\tturns\terrors\tturn p50\tp90\tp99\tmax\tPOST p50\tp99\tturns/s\tevents/s\tdelivery p50\tp99\tCPU/turn\t")
	for _, run := range rep.Runs {
		cpu := "-"
		if run.Processes != nil {
			cpu = msec(run.CPUMillisPerTurn)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t%.0f\t%s\t%s\t%s\t\n",
			run.Scenario, run.Sessions, run.SubscribersPerSession, run.Turns, run.Errors,
			msec(run.TurnLatency.P50), msec(run.TurnLatency.P90), msec(run.TurnLatency.P99), msec(run.TurnLatency.Max),
			msec(run.PostAck.P50), msec(run.PostAck.P99), run.TurnsPerSecond, run.EventsPerSecond,
			msec(run.Delivery.P50), msec(run.Delivery.P99), cpu)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, run := range rep.Runs {
		if run.Errors > 0 {
			fmt.Fprintf(w, "%s errors:%s\n", run.Scenario, kinds(run.ErrorsByKind))
		}
	}
	for _, run := range rep.Runs {
		if len(run.Processes) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s: processes over %.1f s\n", run.Scenario, run.DurationSeconds)
		fmt.Fprintln(tw, "process\tpid\tprocs\tCPU s\tCPU/turn\tpeak RSS\tpeak RSS (sum)\t")
		for _, p := range run.Processes {
			if p.Name == groupMachine {
				fmt.Fprintf(tw, "%s\t-\t-\t%.2f\t%s\t-\t-\t\n", p.Name, p.CPUSeconds, msec(p.CPUMillisPerTurn))
				continue
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%s\t%s\t%s\t\n", p.Name, p.PID, p.Processes, p.CPUSeconds, msec(p.CPUMillisPerTurn),
				mib(float64(p.PeakRSSBytes)), mib(float64(p.PeakRSSSumBytes)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func kinds(m map[string]int) string {
	var parts []string
	for k, n := range m {
		parts = append(parts, fmt.Sprintf(" %s=%d", k, n))
	}
	slices.Sort(parts)
	return strings.Join(parts, "")
}

func msec(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0fms", v)
	}
	return fmt.Sprintf("%.1fms", v)
}

func mib(b float64) string { return fmt.Sprintf("%.1fMiB", b/(1<<20)) }
