package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

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

// bashCwdFile keeps the shell's working directory between calls. Each call is a fresh bash
// process; the script below restores the directory at its start and saves it on exit.
const bashCwdFile = StateDir + "/bash/cwd"

// bashPrologue restores the working directory and arranges for it to be saved however the
// command ends (also through `exit`). It uses only builtins in the common path, so a call
// costs one process. The EXIT trap leaves the command's exit status untouched.
const bashPrologue = `__ma_cwd_file="$PWD/` + bashCwdFile + `"
if [ -s "$__ma_cwd_file" ]; then
	IFS= read -r -d '' __ma_cwd < "$__ma_cwd_file"
	cd -- "$__ma_cwd" 2>/dev/null ||
		printf '[the previous working directory %s no longer exists; running in the workspace root]\n' "$__ma_cwd" >&2
	unset __ma_cwd
fi
__ma_save_cwd() {
	{ printf '%s' "$PWD" >"$__ma_cwd_file"; } 2>/dev/null ||
		{ mkdir -p "${__ma_cwd_file%/*}" && printf '%s' "$PWD" >"$__ma_cwd_file"; } 2>/dev/null
}
trap __ma_save_cwd EXIT
`

type bashInput struct {
	Command   string `json:"command"`
	Restart   bool   `json:"restart"`
	TimeoutMS *int64 `json:"timeout_ms"`
}

func runBash(ctx context.Context, sb sandbox.Sandbox, raw json.RawMessage) Result {
	var in bashInput
	if err := decodeInput(wire.ToolNameBash, raw, &in); err != nil {
		return errorf("%v", err)
	}
	timeout, problem := bashTimeout(in.TimeoutMS)
	if problem != "" {
		return inputError(wire.ToolNameBash, "%s", problem)
	}
	if strings.IndexByte(in.Command, 0) >= 0 {
		return inputError(wire.ToolNameBash, "command contains a NUL byte")
	}
	if in.Restart {
		// An empty state file means "start in the workspace root".
		if err := sb.WriteFile(ctx, bashCwdFile, nil); err != nil {
			return sandboxError(wire.ToolNameBash, bashCwdFile, err)
		}
		if strings.TrimSpace(in.Command) == "" {
			return Result{Text: "The shell was restarted; the working directory is the workspace root again."}
		}
	}
	if strings.TrimSpace(in.Command) == "" {
		return inputError(wire.ToolNameBash, "command is required (or restart: true)")
	}
	res, err := sb.Exec(ctx, sandbox.ExecRequest{
		Command:   bashPrologue + "eval " + shellQuote(in.Command) + "\n",
		Timeout:   timeout,
		MaxOutput: bashMaxOutput,
	})
	if err != nil {
		return sandboxError(wire.ToolNameBash, "", err)
	}
	return bashResult(res, timeout)
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

func bashResult(res sandbox.ExecResult, timeout time.Duration) Result {
	out := strings.TrimRight(string(res.Output), "\n")
	if res.Truncated {
		out += fmt.Sprintf("\n[output truncated: the command wrote more than %d bytes]", bashMaxOutput)
	}
	if res.TimedOut {
		text := fmt.Sprintf("The command timed out after %s and was killed, with every process it started.", timeout)
		if out != "" {
			text += " Output before the timeout:\n" + out
		}
		return Result{Text: text, IsError: true}
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
	return Result{Text: out}
}

// shellQuote quotes s as one bash word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
