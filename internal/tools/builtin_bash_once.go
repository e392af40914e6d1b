package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// What the bash wrapper script prints on the Exec output. It is the only writer there: the
// command's output goes to the output record, so nothing the command prints can pose as
// these.
const (
	// bashBusy: another run of the call holds the claim; the command was not started.
	bashBusy = "managed-agents: this call has already started\n"
	// bashNoRecord prefixes why the call could not be claimed; the command was not started.
	bashNoRecord = "managed-agents: cannot record the call: "
)

// Limits of the machinery around a recorded bash call.
const (
	// wrapperMaxOutput caps the Exec output, which carries only the wrapper's own messages.
	wrapperMaxOutput = 4096
	// probeTimeout bounds one check on a run that another attempt started.
	probeTimeout = 30 * time.Second
	// orphanGrace is how long past its deadline a run that outlived its worker may go on
	// before a retry kills it. A worker that is alive kills its run at the deadline itself and
	// records the timeout; the grace keeps a retry from racing it.
	orphanGrace = 5 * time.Second
	// awaitSlack is added to a retry's own bound on waiting, past the timeout and the grace,
	// for the probes themselves.
	awaitSlack = 10 * time.Second
	// The interval between checks on a run that another attempt started grows from pollMin
	// to pollMax: short commands are answered quickly, long ones cost a check a second.
	pollMin = 10 * time.Millisecond
	pollMax = time.Second
	// headTimeout bounds reading the start of an output record too large for ReadFile.
	headTimeout = time.Minute
)

// bashOnceClaim claims the call by creating the started record exclusively (noclobber opens
// with O_EXCL), so of two runs of the same call only one gets past it. The record holds what a
// retry needs to tell whether this run can still finish: the shell's pid, its start time (so
// a reused pid is not mistaken for it) and its deadline. Then all output goes to the output
// record through head, which keeps its first MaxStoredOutput bytes, and then wc, which counts
// and discards the rest: a command that prints without end fills no disk, and it is not
// stopped for it, since what it does matters more than what it says (a verbose build still
// builds). GNU head -c reads no byte past its count, so wc's count is exact; stdbuf makes
// head write each read at once, so what a killed command printed is on disk.
//
// head and wc (the keeper, a coprocess) run in a process group of their own (`set -m` for
// the coprocess only: bash gives a job started under job control its own group, and the
// command's jobs, started after `set +m`, stay in the shell's): a provider that kills the
// command's process group (at its timeout, or when the shell ends) leaves them to write out
// what is still in the pipe, after which they end, since every writer is gone. The dropped
// record, written last, says they are done. bash puts the coprocess in its group before the
// coproc command returns; the command still starts only once the keeper says "ready" on the
// coprocess pipe (its record is open); at the end it says "done" there (bashOnceFinish waits
// for it), then prunes the sandbox's records (bashPrune) with its output closed. Waiting on
// the pipe costs no polling. Without stdbuf, head or wc in the sandbox no keeper starts (the
// shell checks first, so a keeper never exits before the command while job control is on,
// and its pipe never swallows the output): the output is then recorded uncapped, as a plain
// append, rather than lost. The keeper's stderr is replaced (exec 2>/dev/null), not
// redirected for the group: bash would keep a copy of the old one, the Exec's output pipe,
// and Exec would wait for the keeper, its count and its prune.
//
// Every process started costs a millisecond or two of CPU (exec and dynamic loading), and
// those after the command also cost the result's latency, so the keeper starts only head
// (through stdbuf), and wc at the cap: it is the forked shell itself, not a shell it execs,
// and it learns the output's size from the position of its descriptor of the output record
// (/proc/$BASHPID/fdinfo/3, its "pos:" line; appends leave it at the end of the file)
// rather than from wc. Less than the cap means head read to the end, so nothing was dropped;
// the size also counts toward the prune (bashPrune). Where /proc cannot tell (gVisor's
// fdinfo had no pos line before 2026), or head failed, wc counts as it always did.
// Apart from the keeper, builtins only.
const bashOnceClaim = `__ma_stat=
{ read -r __ma_stat < "/proc/$$/stat"; } 2>/dev/null
set -f
set -- ${__ma_stat##*") "}
set +f
__ma_deadline=-
printf -v __ma_now '%(%s)T' -1 2>/dev/null && __ma_deadline=$((__ma_now + @TIMEOUT@))
set -C
if ! { printf '%s %s %s\n' "$$" "${20:--}" "$__ma_deadline" >"$__ma_call/` + recStarted + `"; } 2>/dev/null; then
	set +C
	if [ -e "$__ma_call/` + recStarted + `" ]; then printf '%s' '@BUSY@'; exit 0; fi
	printf '%s%s\n' '@NORECORD@' "$__ma_call is not writable"; exit 1
fi
set +C --
unset __ma_stat __ma_now __ma_deadline
if ! { : >"$__ma_call/` + recOutput + `"; } 2>/dev/null; then
	printf '%s%s\n' '@NORECORD@' "$__ma_call/` + recOutput + ` is not writable"; exit 1
fi
if command -v stdbuf >/dev/null && command -v head >/dev/null && command -v wc >/dev/null; then
	set -m
	coproc __MA_KEEPER {
		exec 2>/dev/null
		set -- @STORED@ "$__ma_call" @PRUNE@
		exec 3>>"$2/` + recOutput + `" || exit 1
		echo ready
		k=-
		if stdbuf -o0 head -c "$1" >&3; then read -r f k </proc/$BASHPID/fdinfo/3 && [ "$f" = pos: ] || k=-; fi
		case $k in '' | *[!0-9]*) k=- ;; esac
		if [ "$k" != - ] && [ "$k" -lt "$1" ]; then echo 0 >|"$2/` + recDropped + `"; else wc -c >|"$2/` + recDropped + `"; fi
		exec 3>&-
		read -r n <"$2/` + recDropped + `"
		s=$2/../../` + bashUnpruned + ` p=
		c() {
			[ -f "$s" ] || [ ! -e "$s" ] || rm -rf -- "$s"
			u=; { read -r u <"$s"; } 2>/dev/null
			case $u in '' | *[!0-9]*) u=0 ;; esac
			if [ $((u + k)) -gt @PRUNE_AFTER@ ]; then echo 0 >|"$s"; return 0; fi
			[ "$k" = 0 ] || echo $((u + k)) >|"$s"
			return 1
		}
		[ "$k" = - ] || { c && p=1; }
		echo "done $n"
		exec >/dev/null
		if [ "$k" = - ]; then
			k=$(wc -c <"$2/` + recOutput + `")
			case $k in '' | *[!0-9]*) k=0 ;; esac
			c && p=1
		fi
		[ -n "$p" ] || exit 0
		eval "$3"
	}
	set +m
fi
__ma_sync=${__MA_KEEPER[0]} __ma_keep=${__MA_KEEPER[1]}
if [ -n "$__ma_sync" ] && read -r -t 10 -u "$__ma_sync" __ma_ready; then
	exec >&"$__ma_keep" 2>&1 {__ma_keep}>&-
else
	exec >>"$__ma_call/` + recOutput + `" 2>&1
fi
unset __ma_ready __ma_keep
`

// bashPrune keeps the output records and spill files under StateDir to MaxStateOutput bytes
// in all: newest first, whatever is past the budget goes. A finished call's output record is
// emptied and a pruned record says how large it was, so its replay says its output was
// deleted rather than that it had none; the command is never run again. A call without an
// exit record is never touched: it may be running or being answered. Spill files are
// deleted (the result that named them was given long ago). It runs after the dropped
// record, off the result's path, in $2, the call's directory. It walks every call's records,
// so a run costs in proportion to the calls the sandbox has made (its first find alone takes
// 10 ms of CPU at 400 calls here): it runs only once the calls since the last run have kept
// more than pruneAfter bytes in all, which the keepers add up in the bashUnpruned record, or
// after a spill file was written (spill sets the record past pruneAfter). A session of small
// outputs then walks its records once per pruneAfter bytes, not once every few calls; between
// runs the budget is passed by about pruneAfter and the spill files of the calls since the
// last bash call. The keeper counts, and restarts the count when it will prune, before it
// says "done" (a read and a write of a small record, builtins only), so after the result it
// writes in the sandbox only what the prune itself does (a sandbox removed right after a
// call, as tests do, races nothing else); where /proc gives no size it counts after, with
// wc. A keeper killed in its prune leaves the budget passed until pruneAfter more is kept.
// Two keepers adding at once may lose one's bytes, which only delays a run (the tools run a
// session's calls one at a time). A record that is not a regular file (the agent made a FIFO
// there, which would block the keeper) is removed.
const bashPrune = `cd "$2/../.." 2>/dev/null || exit 0
{ find calls -mindepth 2 -maxdepth 2 -name ` + recOutput + ` -size +0 -printf '%T@ %s %p\n'; find outputs -maxdepth 1 -type f -printf '%T@ %s %p\n'; } 2>/dev/null |
sort -rn | { __ma_total=0; while read -r _ size path; do
	__ma_total=$((__ma_total + size))
	[ "$__ma_total" -le @BUDGET@ ] && continue
	case $path in
	calls/*) [ -s "${path%/*}/` + recExit + `" ] && { printf '%s\n' "$size" >|"${path%/*}/` + recPruned + `" && : >|"$path"; } 2>/dev/null ;;
	*) rm -f -- "$path" ;;
	esac
done; }
`

// bashOnceFinish records the exit status, after the working directory, however the command
// ends through the shell (also through exit). A command that replaces or kills the shell
// skips it; the worker then records what Exec saw.
//
// Before that it closes its output and waits, for up to a second, for the keeper to write
// out what is still in the pipe and say "done", so the exit record is not written before the
// output it belongs to. The keeper's count of dropped bytes goes into the exit record, so
// every replay reports the same total. A background process that keeps the output open
// outlasts the wait: the count is then missing and the result says "more than".
const bashOnceFinish = `__ma_finish() {
	__ma_status=$?
	__ma_save_cwd
	exec >&- 2>&-
	__ma_done= __ma_dropped=
	read -r -t 1 -u "$__ma_sync" __ma_done __ma_dropped
	case $__ma_done$__ma_dropped in done*[!0-9]* | done) __ma_dropped= ;; done*) ;; *) __ma_dropped= ;; esac
	{ printf 'exit %d%s\n' "$__ma_status" "${__ma_dropped:+ $__ma_dropped}" >|"$__ma_call/` + recExit + `"; } 2>/dev/null
}
trap __ma_finish EXIT
`

// bashProbe tells a retry what became of a run another attempt started: finished (the exit
// record is there), starting (the claim is not filled in yet), running, gone (the process is
// dead or another one has its pid), or killed (it outlived its deadline and the grace, so the
// probe killed its process group, or the process if it leads none).
const bashProbe = `__ma_call=@CALL@
if [ -s "$__ma_call/` + recExit + `" ]; then echo finished; exit 0; fi
pid= start= deadline=
{ read -r pid start deadline < "$__ma_call/` + recStarted + `"; } 2>/dev/null
case $pid in ''|*[!0-9]*) echo starting; exit 0 ;; esac
stat=
{ read -r stat < "/proc/$pid/stat"; } 2>/dev/null
if [ -n "$stat" ]; then
	set -f
	set -- ${stat##*") "}
	set +f
	case $1 in Z|X) echo gone; exit 0 ;; esac
	if [ "$start" != - ] && [ "${20}" != "$start" ]; then echo gone; exit 0; fi
elif ! kill -0 "$pid" 2>/dev/null; then
	echo gone; exit 0
fi
now=
printf -v now '%(%s)T' -1 2>/dev/null
case $deadline$now in ''|*[!0-9]*) echo running; exit 0 ;; esac
if [ "$now" -le $((deadline + @GRACE@)) ]; then echo running; exit 0; fi
kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
echo killed
`

// bashUnpruned, under StateDir, holds the bytes calls have kept since bashPrune last ran.
const bashUnpruned = "unpruned"

// pruneAfter is how many bytes kept since bashPrune last ran make a call's keeper run it.
const pruneAfter = MaxStoredOutput / 2

// requestPrune makes the next bash call's keeper prune (bashPrune): spill files, which no
// keeper counts, then stay within MaxStateOutput too. Failing only delays the prune.
func requestPrune(ctx context.Context, sb sandbox.Sandbox) {
	_ = sb.WriteFile(ctx, StateDir+"/"+bashUnpruned, []byte(strconv.Itoa(pruneAfter+1)+"\n"))
}

// States of a run as bashProbe reports them.
const (
	runFinished = "finished"
	runStarting = "starting"
	runRunning  = "running"
	runGone     = "gone"
	runKilled   = "killed"
	// runUnfinished is not a probe answer: the retry's own bound ran out first.
	runUnfinished = "unfinished"
)

// bashOnceScript is the whole wrapper: claim, restart if asked, restore the working directory,
// record the exit status on the way out, run the command.
func bashOnceScript(call callDir, in bashInput, timeout time.Duration) string {
	var b strings.Builder
	b.WriteString(`__ma_call="$PWD/"` + shellQuote(string(call)) + "\n")
	b.WriteString(strings.NewReplacer(
		"@TIMEOUT@", strconv.Itoa(int(math.Ceil(timeout.Seconds()))),
		"@STORED@", strconv.Itoa(MaxStoredOutput),
		"@PRUNE_AFTER@", strconv.Itoa(pruneAfter),
		"@PRUNE@", shellQuote(strings.ReplaceAll(bashPrune, "@BUDGET@", strconv.Itoa(MaxStateOutput))),
		"@BUSY@", bashBusy,
		"@NORECORD@", bashNoRecord,
	).Replace(bashOnceClaim))
	if in.Restart {
		// Inside the claim, so a retry that finds the call done does not reset the directory
		// the command left.
		b.WriteString(`{ : >|"$PWD/` + bashCwdFile + `"; } 2>/dev/null` + "\n")
	}
	b.WriteString(bashRestoreCwd)
	b.WriteString(bashOnceFinish)
	b.WriteString("eval " + shellQuote(in.Command) + "\n")
	return b.String()
}

// runBashOnce runs a bash call at most once per call directory (see RunBuiltinOnce).
func runBashOnce(ctx context.Context, sb sandbox.Sandbox, call callDir, raw json.RawMessage) Result {
	in, timeout, problem := parseBash(raw)
	if problem != nil {
		return *problem
	}
	if in.Command == "" {
		// A bare restart only empties the state file: doing it again changes nothing.
		return restartShell(ctx, sb)
	}
	if rec, ok := readBashExit(ctx, sb, call); ok {
		return recordedBash(ctx, sb, call, rec, timeout)
	}
	// The request record also creates the call directory, which the wrapper's claim needs.
	req, err := json.Marshal(struct {
		Tool  string          `json:"tool"`
		Input json.RawMessage `json:"input"`
	}{wire.ToolNameBash, raw})
	if err != nil {
		return errorf("bash: encode the call record: %v", err)
	}
	if err := sb.WriteFile(ctx, call.file(recRequest), req); err != nil {
		return sandboxError(wire.ToolNameBash, "", err)
	}
	res, err := sb.Exec(ctx, sandbox.ExecRequest{
		Command:   bashOnceScript(call, in, timeout),
		Timeout:   timeout,
		MaxOutput: wrapperMaxOutput,
	})
	if err != nil {
		return afterExecFailure(ctx, sb, call, timeout, err)
	}
	switch out := string(res.Output); {
	case out == bashBusy:
		return awaitBash(ctx, sb, call, timeout)
	case strings.HasPrefix(out, bashNoRecord):
		return errorf("bash: the command was not run: %s", strings.TrimSpace(strings.TrimPrefix(out, bashNoRecord)))
	}
	return settleBash(ctx, sb, call, res, timeout)
}

// afterExecFailure decides what a failed Exec means. A cancelled call is reported as such
// (the caller emits no result); otherwise the sandbox may have failed after the command
// started, and then the records, not the error, say how the call ends.
func afterExecFailure(ctx context.Context, sb sandbox.Sandbox, call callDir, timeout time.Duration, err error) Result {
	if ctx.Err() != nil {
		return sandboxError(wire.ToolNameBash, "", err)
	}
	if _, readErr := sb.ReadFile(ctx, call.file(recStarted)); readErr == nil {
		return awaitBash(ctx, sb, call, timeout)
	}
	return sandboxError(wire.ToolNameBash, "", err)
}

// settleBash builds the result of a run this attempt started and saw end. If the shell ended
// without recording its status — the provider killed it at the timeout, or the command
// replaced or killed the shell — it records what Exec saw, so a retry answers the same.
func settleBash(ctx context.Context, sb sandbox.Sandbox, call callDir, res sandbox.ExecResult, timeout time.Duration) Result {
	awaitOutput(ctx, sb, call)
	rec, ok := readBashExit(ctx, sb, call)
	if !ok {
		rec = bashExit{status: res.ExitCode, timedOut: res.TimedOut}
		rec.dropped, rec.counted = readDropped(ctx, sb, call)
		// Unrecorded, a retry would report the call as interrupted: less exact, still once.
		_ = sb.WriteFile(ctx, call.file(recExit), []byte(rec.String()))
	}
	return recordedBash(ctx, sb, call, rec, timeout)
}

// awaitBash waits for a run that another attempt started, checking on it with a growing
// interval: its recorded result once it has one, an interrupted result if it died without one
// or outlived its timeout. It never starts the command.
func awaitBash(ctx context.Context, sb sandbox.Sandbox, call callDir, timeout time.Duration) Result {
	bound := time.NewTimer(timeout + orphanGrace + awaitSlack)
	defer bound.Stop()
	for wait := pollMin; ; wait = min(2*wait, pollMax) {
		if rec, ok := readBashExit(ctx, sb, call); ok {
			return recordedBash(ctx, sb, call, rec, timeout)
		}
		state, err := probeBash(ctx, sb, call)
		if err != nil {
			return sandboxError(wire.ToolNameBash, "", err)
		}
		if state == runGone || state == runKilled {
			// The run may have recorded its status just before it ended.
			if rec, ok := readBashExit(ctx, sb, call); ok {
				return recordedBash(ctx, sb, call, rec, timeout)
			}
			return interruptedBash(ctx, sb, call, state, timeout)
		}
		tick := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			tick.Stop()
			return sandboxError(wire.ToolNameBash, "", ctx.Err())
		case <-bound.C:
			tick.Stop()
			return interruptedBash(ctx, sb, call, runUnfinished, timeout)
		case <-tick.C:
		}
	}
}

// outputGrace bounds how long a result waits for the output records to be complete.
const outputGrace = time.Second

// awaitOutput waits, for at most outputGrace, for the dropped record that head and wc write
// once the command's output is closed and on disk. It matters where the shell did not wait
// for them itself: it was killed at the timeout, replaced, or its worker died. A background
// process still holding the output outlasts the wait; the result then shows what is there.
func awaitOutput(ctx context.Context, sb sandbox.Sandbox, call callDir) {
	deadline := time.Now().Add(outputGrace)
	for wait := pollMin; ; wait = min(2*wait, 100*time.Millisecond) {
		if _, err := sb.ReadFile(ctx, call.file(recDropped)); err == nil || !errors.Is(err, sandbox.ErrNotExist) || time.Now().After(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// probeBash runs bashProbe for the call.
func probeBash(ctx context.Context, sb sandbox.Sandbox, call callDir) (string, error) {
	script := strings.NewReplacer(
		"@CALL@", shellQuote(string(call)),
		"@GRACE@", strconv.Itoa(int(orphanGrace.Seconds())),
	).Replace(bashProbe)
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: script, Timeout: probeTimeout, MaxOutput: wrapperMaxOutput})
	if err != nil {
		return "", fmt.Errorf("check on the running command: %w", err)
	}
	switch state := strings.TrimSpace(string(res.Output)); state {
	case runFinished, runStarting, runRunning, runGone, runKilled:
		return state, nil
	}
	return "", fmt.Errorf("check on the running command: unexpected answer %q (exit code %d)", res.Output, res.ExitCode)
}

// bashExit is the exit record: the shell's status, and whether the provider killed the
// command at its timeout.
type bashExit struct {
	status   int
	timedOut bool
	// dropped is how many bytes of output past MaxStoredOutput were discarded, if counted:
	// kept with the status so that every replay tells the same total.
	dropped int64
	counted bool
}

func (e bashExit) String() string {
	kind := "exit"
	if e.timedOut {
		kind = "timeout"
	}
	if e.counted {
		return fmt.Sprintf("%s %d %d\n", kind, e.status, e.dropped)
	}
	return fmt.Sprintf("%s %d\n", kind, e.status)
}

// readBashExit returns the call's exit record if it is there and complete. Records are
// written in one small write, but a reader may still catch one empty or cut short: only a
// whole line counts.
func readBashExit(ctx context.Context, sb sandbox.Sandbox, call callDir) (bashExit, bool) {
	data, err := sb.ReadFile(ctx, call.file(recExit))
	if err != nil {
		return bashExit{}, false
	}
	line, ok := strings.CutSuffix(string(data), "\n")
	if !ok {
		return bashExit{}, false
	}
	kind, rest, ok := strings.Cut(line, " ")
	num, count, counted := strings.Cut(rest, " ")
	status, err := strconv.Atoi(num)
	if !ok || err != nil || (kind != "exit" && kind != "timeout") {
		return bashExit{}, false
	}
	rec := bashExit{status: status, timedOut: kind == "timeout"}
	if counted {
		if rec.dropped, err = strconv.ParseInt(count, 10, 64); err != nil || rec.dropped < 0 {
			return bashExit{}, false
		}
		rec.counted = true
	}
	return rec, true
}

// recordedBash builds a call's result from its records, the same way every time.
func recordedBash(ctx context.Context, sb sandbox.Sandbox, call callDir, rec bashExit, timeout time.Duration) Result {
	out, err := readOutput(ctx, sb, call)
	if err != nil {
		return sandboxError(wire.ToolNameBash, "", fmt.Errorf("read the command's recorded output: %w", err))
	}
	if rec.counted {
		out.dropped = rec.dropped
	}
	return bashResult(sandbox.ExecResult{ExitCode: rec.status, Output: out.head, Truncated: out.truncated(), TimedOut: rec.timedOut}, timeout, out)
}

// interruptedBash is the result of a run that ended, or was given up on, without an exit
// record: its worker died while it ran. It is never run again, since it may have done part
// of its work.
func interruptedBash(ctx context.Context, sb sandbox.Sandbox, call callDir, state string, timeout time.Duration) Result {
	text := "The command was interrupted by a worker failure before its result was recorded, so it may have partially run. It was not run again: check what it did before running it again."
	switch state {
	case runKilled:
		text += fmt.Sprintf(" It was still running past its timeout of %s and was killed.", timeout)
	case runUnfinished:
		text += fmt.Sprintf(" It did not finish within its timeout of %s.", timeout)
	}
	// The output is only a help here; without it the result still says what matters.
	awaitOutput(ctx, sb, call)
	out, _ := readOutput(ctx, sb, call)
	res := Result{IsError: true}
	if got := strings.TrimRight(string(out.head), "\n"); got != "" {
		text += " Output recorded before the interruption:\n" + got
		if out.truncated() {
			text += "\n" + out.note()
			res.cutAt = bashMaxOutput
		}
	}
	res.Text = text
	return res
}

// recordedOutput is what a call's output records say: the start of the output, how much of
// it was stored, and how much more was counted and dropped (-1: not known; the exit record
// carries the count when there is one).
type recordedOutput struct {
	head    []byte
	stored  int
	dropped int64
	// more: the record holds more than head.
	more bool
	// pruned says bashPrune emptied the record, which held prunedSize bytes.
	pruned     bool
	prunedSize int64
}

func (o recordedOutput) truncated() bool {
	return o.more || o.stored >= MaxStoredOutput || o.pruned
}

// note says exactly how the output was cut, for the result.
func (o recordedOutput) note() string {
	if o.pruned {
		return fmt.Sprintf("[output deleted: the %d bytes of output recorded for this call were deleted later, to keep the sandbox's records under %d bytes]", o.prunedSize, MaxStateOutput)
	}
	if o.stored < MaxStoredOutput {
		return fmt.Sprintf("[output truncated: the command wrote more than %d bytes]", bashMaxOutput)
	}
	total := "more than " + strconv.Itoa(o.stored)
	if o.dropped >= 0 {
		total = strconv.FormatInt(int64(o.stored)+o.dropped, 10)
	}
	return fmt.Sprintf("[output truncated: the command wrote %s bytes; the first %d are shown, and only the first %d were kept, the rest was discarded]",
		total, len(o.head), o.stored)
}

// readOutput returns the first bashMaxOutput bytes of the call's output records and what
// they say about the rest. It only reads: other attempts may be reading the records at the
// same time.
func readOutput(ctx context.Context, sb sandbox.Sandbox, call callDir) (recordedOutput, error) {
	path := call.file(recOutput)
	out := recordedOutput{dropped: -1}
	// The output first, the pruned record second: a prune writes its record before it empties
	// the output, so an output read while a prune ran is always followed by a record that says
	// so, and every replay after the prune reports the same.
	pruned := func() bool {
		if rec, err := sb.ReadFile(ctx, call.file(recPruned)); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(rec)), 10, 64); err == nil {
				out = recordedOutput{dropped: -1, pruned: true, prunedSize: n}
				return true
			}
		}
		return false
	}
	data, err := sb.ReadFile(ctx, path)
	if pruned() {
		return out, nil
	}
	switch {
	case err == nil:
	case errors.Is(err, sandbox.ErrNotExist):
		return out, nil
	case ctx.Err() != nil, errors.Is(err, sandbox.ErrGone), errors.Is(err, sandbox.ErrOutsideWorkspace):
		return out, err
	default:
		// Most likely too large for ReadFile on this provider: let the sandbox cut it. The
		// record is then at least that large, more than bashMaxOutput.
		if data, err = headOfFile(ctx, sb, path, bashMaxOutput+1); err != nil {
			return out, err
		}
	}
	out.stored = len(data)
	out.head, out.more = data, len(data) > bashMaxOutput
	if out.more {
		out.head = data[:bashMaxOutput]
	}
	return out, nil
}

// readDropped returns the keeper's count of discarded output, if it has written one.
func readDropped(ctx context.Context, sb sandbox.Sandbox, call callDir) (int64, bool) {
	rec, err := sb.ReadFile(ctx, call.file(recDropped))
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(rec)), 10, 64)
	return n, err == nil && n >= 0
}

// headOfFile reads the first n bytes of a workspace file with a command.
func headOfFile(ctx context.Context, sb sandbox.Sandbox, path string, n int) ([]byte, error) {
	res, err := sb.Exec(ctx, sandbox.ExecRequest{
		Command:   fmt.Sprintf("head -c %d -- %s", n, shellQuote(path)),
		Timeout:   headTimeout,
		MaxOutput: n,
	})
	if err != nil {
		return nil, fmt.Errorf("read the start of %s: %w", path, err)
	}
	if res.ExitCode != 0 || res.TimedOut {
		return nil, fmt.Errorf("read the start of %s: exit code %d: %s", path, res.ExitCode, strings.TrimSpace(string(res.Output)))
	}
	return res.Output, nil
}
