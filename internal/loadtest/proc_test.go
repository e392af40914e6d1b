package loadtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseStat(t *testing.T) {
	t.Parallel()
	// A name with a space and a parenthesis; utime 11, stime 22, cutime 33, cstime 44.
	line := "4242 (tmux: server) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 11 22 33 44 20 0 1 0 123 4096 10 18446744073709551615\n"
	got, err := parseStat([]byte(line))
	require.NoError(t, err)
	require.Equal(t, procStat{pid: 4242, ppid: 1, comm: "tmux: server) x", cpuTicks: 110}, got)

	for _, bad := range []string{"", "12 no name", "12 (short) S 1 2 3"} {
		_, err := parseStat([]byte(bad))
		require.Error(t, err, bad)
	}
}

func TestParseStatus(t *testing.T) {
	t.Parallel()
	got, err := parseStatus([]byte("Name:\tpostgres\nVmPeak:\t  300000 kB\nVmHWM:\t   20480 kB\nVmRSS:\t   10240 kB\nThreads:\t1\n"))
	require.NoError(t, err)
	require.Equal(t, memory{rss: 10 << 20, hwm: 20 << 20}, got)

	kernel, err := parseStatus([]byte("Name:\tkthreadd\nState:\tS (sleeping)\n"))
	require.NoError(t, err)
	require.Zero(t, kernel)
}

// fakeProc writes a /proc with the processes given as pid → (ppid, comm, cpu ticks, rss kB, hwm kB).
type fakeProcess struct {
	ppid     int
	comm     string
	ticks    int64
	rss, hwm int64
}

func writeFakeProc(t *testing.T, dir string, procs map[int]fakeProcess) {
	t.Helper()
	for pid, p := range procs {
		d := filepath.Join(dir, strconv.Itoa(pid))
		require.NoError(t, os.MkdirAll(d, 0o755))
		// The ticks split over utime and cstime: both count.
		stat := fmt.Sprintf("%d (%s) S %d 1 1 0 -1 0 0 0 0 0 %d 0 0 %d 20 0 1 0 1 1 1\n", pid, p.comm, p.ppid, p.ticks-1, 1)
		require.NoError(t, os.WriteFile(filepath.Join(d, "stat"), []byte(stat), 0o644))
		status := fmt.Sprintf("Name:\t%s\nVmHWM:\t%d kB\nVmRSS:\t%d kB\n", p.comm, p.hwm, p.rss)
		require.NoError(t, os.WriteFile(filepath.Join(d, "status"), []byte(status), 0o644))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "self"), 0o755)) // not a pid: skipped
}

func TestTreeUsageGroupsAServersChildren(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFakeProc(t, dir, map[int]fakeProcess{
		1:   {0, "init", 5, 1, 1},
		100: {1, "managed-agents", 300, 50_000, 60_000},
		101: {100, "postgres", 40, 20_000, 25_000},
		102: {101, "postgres", 60, 10_000, 12_000}, // a backend
		103: {101, "postgres", 10, 8_000, 8_000},
		104: {100, "temporal", 500, 90_000, 95_000},
		105: {100, "bash", 2, 3_000, 3_000},     // a sandbox command: the server's
		106: {105, "postgres", 7, 1_000, 1_000}, // not dev's PostgreSQL: still the server's
		200: {1, "postgres", 1000, 1, 1},        // another cluster on the machine
	})
	got, err := procFS(dir).treeUsage(100)
	require.NoError(t, err)
	require.Equal(t, map[string]*groupUsage{
		groupServer:   {name: groupServer, pid: 100, cpuTicks: 309, rssSum: 54_000 << 10, hwm: 60_000 << 10, procs: 3},
		groupPostgres: {name: groupPostgres, pid: 101, cpuTicks: 110, rssSum: 38_000 << 10, hwm: 25_000 << 10, procs: 3},
		groupTemporal: {name: groupTemporal, pid: 104, cpuTicks: 500, rssSum: 90_000 << 10, hwm: 95_000 << 10, procs: 1},
	}, got)

	_, err = procFS(dir).treeUsage(999)
	require.ErrorContains(t, err, "process 999 is not running")
}

func TestMonitorUsageIsTheWindowsDelta(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The monitor also reads this process; give it an entry in the fake /proc.
	self := os.Getpid()
	procs := map[int]fakeProcess{
		100:  {1, "managed-agents", 100, 40_000, 40_000},
		101:  {100, "postgres", 50, 10_000, 10_000},
		self: {1, "loadtest.test", 10, 5_000, 5_000},
	}
	writeFakeProc(t, dir, procs)
	writeCPU := func(user, nice, system, idle, iowait, irq, softirq, steal int) {
		line := fmt.Sprintf("cpu  %d %d %d %d %d %d %d %d 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n", user, nice, system, idle, iowait, irq, softirq, steal)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o644))
	}
	writeCPU(1000, 10, 500, 90_000, 30, 5, 7, 0)
	m := newMonitor(procFS(dir), 100)
	start, err := m.mark()
	require.NoError(t, err)

	// The window: the server spends 2 s, a backend appears and 0.5 s of PostgreSQL's goes into
	// it, the server's memory rises and falls back between samples.
	procs[100] = fakeProcess{1, "managed-agents", 300, 80_000, 80_000}
	procs[102] = fakeProcess{101, "postgres", 50, 2_000, 2_000}
	writeFakeProc(t, dir, procs)
	_, err = m.sample()
	require.NoError(t, err)
	procs[100] = fakeProcess{1, "managed-agents", 300, 45_000, 80_000}
	writeFakeProc(t, dir, procs)
	// The machine was busy 2.93 s (idle and iowait are not): more than the tree, which missed a
	// process that left it.
	writeCPU(1200, 10, 590, 95_000, 90, 5, 10, 0)

	got, err := m.usage(start, 4)
	require.NoError(t, err)
	require.Equal(t, []ProcessUsage{
		{Name: groupServer, PID: 100, Processes: 1, CPUSeconds: 2, CPUMillisPerTurn: 500, PeakRSSBytes: 80_000 << 10, PeakRSSSumBytes: 80_000 << 10, RSSBytes: 45_000 << 10},
		{Name: groupPostgres, PID: 101, Processes: 2, CPUSeconds: 0.5, CPUMillisPerTurn: 125, PeakRSSBytes: 10_000 << 10, PeakRSSSumBytes: 12_000 << 10, RSSBytes: 12_000 << 10},
		{Name: groupClient, PID: self, Processes: 1, CPUSeconds: 0, CPUMillisPerTurn: 0, PeakRSSBytes: 5_000 << 10, PeakRSSSumBytes: 5_000 << 10, RSSBytes: 5_000 << 10},
		{Name: groupMachine, CPUSeconds: 2.93, CPUMillisPerTurn: 732.5},
	}, got)

	// Without a readable /proc/stat the machine's row is left out, not an error.
	require.NoError(t, os.Remove(filepath.Join(dir, "stat")))
	got, err = m.usage(start, 4)
	require.NoError(t, err)
	require.Len(t, got, 3)
}
