package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// Limits of the bash tool. The tool sets them on every request, rather than relying on the
// provider's defaults, so a command behaves the same on every provider.
const (
	DefaultBashTimeout = 120 * time.Second
	MaxBashTimeout     = 10 * time.Minute
	bashMaxOutput      = 1 << 20
)

const (
	// MaxStoredOutput caps the output a recorded call (RunBuiltinOnce) keeps on disk, in its
	// output record; the rest is counted and discarded, so a `yes`, which writes GBs a
	// second, cannot fill the disk. It is past what a result shows (bashMaxOutput), so the
	// result can tell a long output from one cut at the cap.
	MaxStoredOutput = 4 << 20
	// MaxStateOutput bounds the output records and spill files a sandbox keeps in all (about
	// sixteen calls at the cap; passed by up to about pruneAfter between prunes, see
	// bashPrune); the oldest go first.
	MaxStateOutput = 64 << 20
)

// bashCwdFile keeps the shell's working directory between calls. Each call is a fresh bash
// process; the script below restores the directory at its start and saves it on exit.
const bashCwdFile = StateDir + "/bash/cwd"

// bashRestoreCwd restores the working directory saved by the previous call (falling back to
// the workspace root, and saying so, when it is gone) and defines __ma_save_cwd, which saves
// it again if the command changed it: most commands do not, and rewriting a file is not free
// (ext4 flushes a file truncated and rewritten when it is closed). It uses only builtins in
// the common path, so a call costs one process. The save uses >| so a command that sets
// noclobber does not stop it.
const bashRestoreCwd = `__ma_cwd_file="$PWD/` + bashCwdFile + `"
__ma_cwd_was=$PWD
if [ -s "$__ma_cwd_file" ]; then
	IFS= read -r -d '' __ma_cwd < "$__ma_cwd_file"
	if cd -- "$__ma_cwd" 2>/dev/null; then
		__ma_cwd_was=$PWD
	else
		__ma_cwd_was=
		printf '[the previous working directory %s no longer exists; running in the workspace root]\n' "$__ma_cwd" >&2
	fi
	unset __ma_cwd
fi
__ma_save_cwd() {
	[ "$PWD" = "$__ma_cwd_was" ] && return
	{ printf '%s' "$PWD" >|"$__ma_cwd_file"; } 2>/dev/null ||
		{ mkdir -p "${__ma_cwd_file%/*}" && printf '%s' "$PWD" >|"$__ma_cwd_file"; } 2>/dev/null
}
`

// bashPrologue arranges for the working directory to be saved however the command ends (also
// through `exit`). The EXIT trap leaves the command's exit status untouched.
const bashPrologue = bashRestoreCwd + `trap __ma_save_cwd EXIT
`

type bashInput struct {
	Command   string `json:"command"`
	Restart   bool   `json:"restart"`
	TimeoutMS *int64 `json:"timeout_ms"`
}

func runBash(ctx context.Context, sb sandbox.Sandbox, raw json.RawMessage) Result {
	in, timeout, problem := parseBash(raw)
	if problem != nil {
		return *problem
	}
	if in.Restart {
		if res := restartShell(ctx, sb); res.IsError || in.Command == "" {
			return res
		}
	}
	res, err := sb.Exec(ctx, sandbox.ExecRequest{
		Command:   bashPrologue + "eval " + shellQuote(in.Command) + "\n",
		Timeout:   timeout,
		MaxOutput: bashMaxOutput,
	})
	if err != nil {
		return sandboxError(wire.ToolNameBash, "", err)
	}
	return bashResult(res, timeout, recordedOutput{})
}

// parseBash decodes and checks a bash input; a non-nil Result says what is wrong with it. A
// blank command becomes "", which only a restart allows.
func parseBash(raw json.RawMessage) (bashInput, time.Duration, *Result) {
	var in bashInput
	if err := decodeInput(wire.ToolNameBash, raw, &in); err != nil {
		res := errorf("%v", err)
		return in, 0, &res
	}
	timeout, problem := bashTimeout(in.TimeoutMS)
	if problem != "" {
		res := inputError(wire.ToolNameBash, "%s", problem)
		return in, 0, &res
	}
	if strings.IndexByte(in.Command, 0) >= 0 {
		res := inputError(wire.ToolNameBash, "command contains a NUL byte")
		return in, 0, &res
	}
	if strings.TrimSpace(in.Command) == "" {
		in.Command = ""
		if !in.Restart {
			res := inputError(wire.ToolNameBash, "command is required (or restart: true)")
			return in, 0, &res
		}
	}
	return in, timeout, nil
}

// restartShell forgets the saved working directory; an empty state file means "start in the
// workspace root". Doing it again changes nothing, so a bare restart needs no call record.
func restartShell(ctx context.Context, sb sandbox.Sandbox) Result {
	if err := sb.WriteFile(ctx, bashCwdFile, nil); err != nil {
		return sandboxError(wire.ToolNameBash, bashCwdFile, err)
	}
	return Result{Text: "The shell was restarted; the working directory is the workspace root again."}
}

// bashTimeout maps timeout_ms to the command timeout; values above the maximum are lowered to
// it rather than refused, since a model cannot know the server's limit.
func bashTimeout(ms *int64) (time.Duration, string) {
	switch {
	case ms == nil || *ms == 0:
		return DefaultBashTimeout, ""
	case *ms < 0:
		return 0, fmt.Sprintf("timeout_ms must be positive (got %d)", *ms)
	case *ms >= MaxBashTimeout.Milliseconds():
		return MaxBashTimeout, ""
	}
	return time.Duration(*ms) * time.Millisecond, ""
}

// bashResult builds the result of a finished command; rec is what its records say about a
// recorded call's output (zero for an unrecorded one).
func bashResult(res sandbox.ExecResult, timeout time.Duration, rec recordedOutput) Result {
	output := res.Output
	if res.Truncated {
		output = cutPartialRune(output)
	}
	out := strings.TrimRight(outputText(output), "\n")
	cutAt := 0
	if res.Truncated {
		if out != "" {
			out += "\n"
		}
		out += rec.note()
		cutAt = bashMaxOutput
	}
	if res.TimedOut {
		text := fmt.Sprintf("The command timed out after %s and was killed, with every process it started.", timeout)
		if out != "" {
			text += " Output before the timeout:\n" + out
		}
		return Result{Text: text, IsError: true, cutAt: cutAt}
	}
	if res.ExitCode != 0 {
		if out != "" {
			out += "\n"
		}
		out += fmt.Sprintf("[exit code %d]", res.ExitCode)
	}
	if out == "" {
		out = "(no output)"
	}
	return Result{Text: out, cutAt: cutAt}
}

// outputText is a command's output as text. Output with NUL bytes (`find -print0`, `cat` of a
// binary file) is binary: finish shows those bytes as U+FFFD, as it does invalid UTF-8, and a
// note here says so and how to see the real bytes, so the model does not take the rendering
// for the content.
func outputText(out []byte) string {
	nul := bytes.Count(out, []byte{0})
	if nul == 0 {
		return string(out)
	}
	return string(out) + fmt.Sprintf("\n[binary output: %d bytes, %d of them NUL; NUL bytes and invalid UTF-8 are shown as %s; pipe through `xxd` or `base64` to see the bytes]",
		len(out), nul, wire.Replacement)
}

// cutPartialRune drops a multi-byte character the output cap cut in two, which is not binary.
func cutPartialRune(out []byte) []byte {
	for i := len(out) - 1; i >= 0 && i >= len(out)-utf8.UTFMax; i-- {
		if utf8.RuneStart(out[i]) {
			if !utf8.FullRune(out[i:]) {
				return out[:i]
			}
			break
		}
	}
	return out
}

// shellQuote quotes s as one bash word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
