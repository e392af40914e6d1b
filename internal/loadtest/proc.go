package loadtest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of the times in /proc/<pid>/stat: 100 on every Linux
// architecture Go supports (the kernel scales its internal HZ to it for user space).
const clockTicks = 100

// The groups a server's process tree is split into: the server itself (with the commands its
// local sandbox runs), and the children dev starts.
const (
	groupServer   = "server"
	groupPostgres = "postgres"
	groupTemporal = "temporal"
	groupClient   = "bench"
	// groupMachine is every CPU of the machine, busy: it also counts what the tree cannot,
	// processes that left the server's tree (a bash tool call's output keeper outlives its
	// shell and is reparented to init) and exited there, as well as the load generator and
	// anything else running.
	groupMachine = "machine"
)

// procStat is what the load tool reads of one process.
type procStat struct {
	pid, ppid int
	comm      string
	// cpuTicks is utime+stime+cutime+cstime: the process's own CPU time and that of the
	// children it has reaped (a backend PostgreSQL forked, a bash the sandbox ran), so a sum
	// over the live processes of a tree counts every exited descendant once.
	cpuTicks int64
}

// parseStat reads /proc/<pid>/stat. The command name is between the first '(' and the last
// ')' and may hold spaces and parentheses.
func parseStat(b []byte) (procStat, error) {
	open, closing := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return procStat{}, fmt.Errorf("stat %q: no command name", b)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:open])))
	if err != nil {
		return procStat{}, fmt.Errorf("stat: pid: %w", err)
	}
	// After the name: state(3) ppid(4) … utime(14) stime(15) cutime(16) cstime(17).
	f := strings.Fields(string(b[closing+1:]))
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("stat of %d: %d fields after the name, want at least 15", pid, len(f))
	}
	ps := procStat{pid: pid, comm: string(b[open+1 : closing])}
	if ps.ppid, err = strconv.Atoi(f[1]); err != nil {
		return procStat{}, fmt.Errorf("stat of %d: ppid: %w", pid, err)
	}
	for _, s := range f[11:15] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("stat of %d: cpu times: %w", pid, err)
		}
		ps.cpuTicks += n
	}
	return ps, nil
}

// memory is what /proc/<pid>/status says of a process's resident set, in bytes.
type memory struct {
	rss, hwm int64 // VmRSS now, VmHWM (the peak since start)
}

// parseStatus reads VmRSS and VmHWM from /proc/<pid>/status (kB lines); a kernel thread or
// a zombie has neither and reads as zero.
func parseStatus(b []byte) (memory, error) {
	var m memory
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return memory{}, fmt.Errorf("status: %s: %w", name, err)
		}
		if name == "VmRSS" {
			m.rss = kb << 10
		} else {
			m.hwm = kb << 10
		}
	}
	return m, sc.Err()
}

// procFS reads processes under a /proc mount; tests point it at a fake one.
type procFS string

// all reads the stat of every process; one that exits while it is read is left out.
func (fs procFS) all() (map[int]procStat, error) {
	entries, err := os.ReadDir(string(fs))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", fs, err)
	}
	out := map[int]procStat{}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(string(fs), e.Name(), "stat"))
		if err != nil {
			continue // exited
		}
		ps, err := parseStat(b)
		if err != nil {
			return nil, err
		}
		out[ps.pid] = ps
	}
	return out, nil
}

func (fs procFS) memory(pid int) memory {
	b, err := os.ReadFile(filepath.Join(string(fs), strconv.Itoa(pid), "status"))
	if err != nil {
		return memory{} // exited
	}
	m, _ := parseStatus(b)
	return m
}

// groupUsage is one group of processes at one moment.
type groupUsage struct {
	name     string
	pid      int   // the group's first process: the server, the postmaster, the Temporal CLI
	cpuTicks int64 // summed over the group's live processes
	rssSum   int64 // VmRSS summed over the group's processes (shared pages once per process)
	hwm      int64 // VmHWM of the group's first process
	procs    int
}

// treeUsage reads the process tree under root and sums it by group: a child of root named
// postgres or temporal heads its group with all its descendants; everything else (root, the
// commands it runs) is the server's.
func (fs procFS) treeUsage(root int) (map[string]*groupUsage, error) {
	procs, err := fs.all()
	if err != nil {
		return nil, err
	}
	if _, ok := procs[root]; !ok {
		return nil, fmt.Errorf("process %d is not running", root)
	}
	children := map[int][]int{}
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p.pid)
	}
	out := map[string]*groupUsage{}
	var walk func(pid int, group string)
	walk = func(pid int, group string) {
		p := procs[pid]
		if pid != root && p.ppid == root && (p.comm == groupPostgres || p.comm == groupTemporal) {
			group = p.comm
		}
		g := out[group]
		if g == nil {
			g = &groupUsage{name: group, pid: pid}
			out[group] = g
		}
		m := fs.memory(pid)
		if pid == g.pid {
			g.hwm = m.hwm
		}
		g.cpuTicks += p.cpuTicks
		g.rssSum += m.rss
		g.procs++
		kids := children[pid]
		slices.Sort(kids)
		for _, c := range kids {
			walk(c, group)
		}
	}
	walk(root, groupServer)
	return out, nil
}

// selfUsage is this process (the load generator) alone.
func (fs procFS) selfUsage() (*groupUsage, error) {
	pid := os.Getpid()
	b, err := os.ReadFile(filepath.Join(string(fs), strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil, fmt.Errorf("read own stat: %w", err)
	}
	ps, err := parseStat(b)
	if err != nil {
		return nil, err
	}
	m := fs.memory(pid)
	return &groupUsage{name: groupClient, pid: pid, cpuTicks: ps.cpuTicks, rssSum: m.rss, hwm: m.hwm, procs: 1}, nil
}

// machineUsage is the machine's busy CPU time from the first line of /proc/stat (user, nice,
// system, irq, softirq and steal; guest time is inside user), or nil when it cannot be read.
func (fs procFS) machineUsage() *groupUsage {
	b, err := os.ReadFile(filepath.Join(string(fs), "stat"))
	if err != nil {
		return nil
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return nil
	}
	var busy int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system [idle iowait] irq softirq steal
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return nil
		}
		busy += n
	}
	return &groupUsage{name: groupMachine, cpuTicks: busy}
}
