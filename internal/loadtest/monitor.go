package loadtest

import (
	"context"
	"slices"
	"sync"
	"time"
)

// ProcessUsage is what one group of processes cost during a run. The server's group holds
// the server process and the commands its local sandbox ran; postgres the postmaster and its
// backends; temporal the Temporal CLI dev server; bench this load generator, which shares
// the machine; machine every CPU of the machine (no pid, processes or memory), which also
// counts processes that left the server's tree before they exited.
type ProcessUsage struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
	// Processes is how many processes the group had at the end of the run.
	Processes  int     `json:"processes"`
	CPUSeconds float64 `json:"cpu_seconds"`
	// CPUMillisPerTurn is CPUSeconds over the turns the run completed.
	CPUMillisPerTurn float64 `json:"cpu_ms_per_turn"`
	// PeakRSSBytes is VmHWM of the group's first process: its peak since it started.
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
	// PeakRSSSumBytes is the largest VmRSS summed over the group's processes in the run's
	// samples (every 250 ms): shared pages (PostgreSQL's shared buffers) count once per process.
	PeakRSSSumBytes int64 `json:"peak_rss_sum_bytes"`
	// RSSBytes is VmRSS summed over the group's processes at the end of the run.
	RSSBytes int64 `json:"rss_bytes"`
}

// monitor samples a server's process tree (root 0: no server on this machine, only the
// load generator itself) and keeps the peak RSS of each group since the last mark.
type monitor struct {
	fs   procFS
	root int

	mu    sync.Mutex
	peaks map[string]int64
}

func newMonitor(fs procFS, root int) *monitor {
	return &monitor{fs: fs, root: root, peaks: map[string]int64{}}
}

// sample reads every group now and raises the peaks.
func (m *monitor) sample() (map[string]*groupUsage, error) {
	groups := map[string]*groupUsage{}
	if m.root != 0 {
		var err error
		if groups, err = m.fs.treeUsage(m.root); err != nil {
			return nil, err
		}
	}
	self, err := m.fs.selfUsage()
	if err != nil {
		return nil, err
	}
	groups[groupClient] = self
	if m.root != 0 {
		if machine := m.fs.machineUsage(); machine != nil {
			groups[groupMachine] = machine
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, g := range groups {
		m.peaks[name] = max(m.peaks[name], g.rssSum)
	}
	return groups, nil
}

// run samples every interval until ctx ends; a failed sample (the server exited) is skipped.
func (m *monitor) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _ = m.sample()
		}
	}
}

// mark starts a window: it resets the peaks and returns the groups as they are now.
func (m *monitor) mark() (map[string]*groupUsage, error) {
	m.mu.Lock()
	clear(m.peaks)
	m.mu.Unlock()
	return m.sample()
}

// usage is what each group used between start (from mark) and now, with turns completed
// in between; the groups come in a fixed order: server, postgres, temporal, then the rest.
func (m *monitor) usage(start map[string]*groupUsage, turns int) ([]ProcessUsage, error) {
	end, err := m.sample()
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []ProcessUsage
	for name, g := range end {
		if name == groupMachine && start[name] == nil {
			continue // a total since boot is no window
		}
		u := ProcessUsage{Name: name, PID: g.pid, Processes: g.procs, PeakRSSBytes: g.hwm,
			PeakRSSSumBytes: m.peaks[name], RSSBytes: g.rssSum}
		ticks := g.cpuTicks
		if s := start[name]; s != nil {
			ticks -= s.cpuTicks
		}
		u.CPUSeconds = float64(ticks) / clockTicks
		if turns > 0 {
			u.CPUMillisPerTurn = u.CPUSeconds * 1000 / float64(turns)
		}
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b ProcessUsage) int { return groupOrder(a.Name) - groupOrder(b.Name) })
	return out, nil
}

func groupOrder(name string) int {
	switch name {
	case groupServer:
		return 0
	case groupPostgres:
		return 1
	case groupTemporal:
		return 2
	case groupMachine:
		return 4
	default:
		return 3
	}
}
