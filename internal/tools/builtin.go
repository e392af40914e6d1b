package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	toolconfig "github.com/managed-agents/managed-agents/internal/tools/config"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// Result is the outcome of one built-in tool call as the model sees it: the text of the
// tool_result block and whether it reports an error. A tool that fails (bad input, a missing
// file, a timeout) still produces a Result; RunBuiltin never returns a Go error.
type Result struct {
	Text string
	// Content, when set, is the result's content blocks, which the model gets instead of Text
	// (read of an image or a PDF: the image or document block, then a text block that says
	// what it is; Text is that text alone, for logs). Nil means Text as one text block.
	Content []wire.ContentBlock
	IsError bool
	// cutAt, when positive, says the text holds only the first cutAt bytes of a command's
	// output, so a spill file of it must not claim to hold the whole output.
	cutAt int
}

// MaxResultChars is the longest result text handed to the model; longer output is cut and the
// full text kept in a sandbox file (API.md §3.2).
const MaxResultChars = 100_000

// StateDir is the hidden workspace directory where the built-ins keep their state (the bash
// working directory), spilled outputs and the per-call records of RunBuiltinOnce. Keeping
// state in the sandbox, not in Go, makes the tools stateless across calls, processes and
// providers. glob and grep never list it.
const StateDir = ".managed-agents"

// outputsDir holds the full text of results cut at MaxResultChars.
const outputsDir = StateDir + "/outputs"

// builtinFunc runs one tool on its raw input.
type builtinFunc func(ctx context.Context, sb sandbox.Sandbox, input json.RawMessage) Result

// builtins maps each executable built-in to its implementation. web_fetch and web_search are
// declared tools without an implementation on this server.
var builtins = map[string]builtinFunc{
	wire.ToolNameBash:      runBash,
	wire.ToolNameRead:      runRead,
	wire.ToolNameWrite:     runWrite,
	wire.ToolNameEdit:      runEdit,
	wire.ToolNameGlob:      runGlob,
	wire.ToolNameGrep:      runGrep,
	wire.ToolNameWebFetch:  notImplemented(wire.ToolNameWebFetch),
	wire.ToolNameWebSearch: notImplemented(wire.ToolNameWebSearch),
}

// NeedsSandbox reports whether the built-in tool name runs in a sandbox (every built-in but
// the web tools, which this server does not execute).
func NeedsSandbox(name string) bool {
	return toolconfig.IsBuiltIn(name) && name != wire.ToolNameWebFetch && name != wire.ToolNameWebSearch
}

// IsWebTool reports whether name is one of the server-side web tools (web_fetch, web_search),
// which run on the worker, not in a sandbox.
func IsWebTool(name string) bool {
	return name == wire.ToolNameWebFetch || name == wire.ToolNameWebSearch
}

// RunBuiltin executes the built-in tool name with the input the model gave it, inside sb.
// Every tool works only through sb's Exec, ReadFile and WriteFile, so it behaves the same on
// every provider. Unknown tools, invalid input and sandbox failures come back as a Result with
// IsError set. Text longer than MaxResultChars is cut and the whole text written to a file
// under StateDir/outputs, which the result names. A call run again runs again: callers that
// have a call id and may retry use RunBuiltinOnce.
func RunBuiltin(ctx context.Context, sb sandbox.Sandbox, name string, input json.RawMessage) Result {
	if problem := checkBuiltin(sb, name); problem != nil {
		return *problem
	}
	run := builtins[name]
	return finish(ctx, sb, run(ctx, sb, input))
}

// checkBuiltin reports why name cannot run in sb, or nil if it can.
func checkBuiltin(sb sandbox.Sandbox, name string) *Result {
	if _, ok := builtins[name]; !ok {
		res := errorf("unknown built-in tool %q (expected one of %s)", name, strings.Join(toolconfig.BuiltInNames(), ", "))
		return &res
	}
	if NeedsSandbox(name) && sb == nil {
		res := errorf("%s needs a sandbox, and this session has none", name)
		return &res
	}
	return nil
}

// finish turns a tool's raw result into what the model gets: valid UTF-8 without NUL
// (command output and file names may be any bytes; the log's jsonb stores neither, see
// wire.LogSafeJSON), with U+FFFD in their place, cut and spilled past MaxResultChars.
func finish(ctx context.Context, sb sandbox.Sandbox, res Result) Result {
	res.Text = logSafe(res.Text)
	if res.Content != nil {
		// Blocks carry their data in base64 and short texts of their own: nothing to spill.
		for i, b := range res.Content {
			if b.Text != nil {
				text := logSafe(*b.Text)
				res.Content[i].Text = &text
			}
		}
		res.cutAt = 0
		return res
	}
	res = spill(ctx, sb, res)
	// cutAt only informs the spill note; callers compare results as the model sees them.
	res.cutAt = 0
	return res
}

// logSafe is s as valid UTF-8 without NUL, with U+FFFD in their place.
func logSafe(s string) string {
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", wire.Replacement), wire.Replacement)
}

func notImplemented(name string) builtinFunc {
	return func(context.Context, sandbox.Sandbox, json.RawMessage) Result {
		return errorf("the %s tool is not implemented on this server", name)
	}
}

// decodeInput strictly decodes a tool's input: unknown fields and wrong types are errors that
// name the field. An absent input decodes as {} so required-field checks report it.
func decodeInput(tool string, input json.RawMessage, v any) error {
	trimmed := strings.TrimSpace(string(input))
	if trimmed == "" || trimmed == "null" {
		input = json.RawMessage("{}")
	} else if trimmed[0] != '{' {
		return fmt.Errorf("invalid input for %s: expected a JSON object", tool)
	}
	if err := wire.DecodeStrict(input, v); err != nil {
		return fmt.Errorf("invalid input for %s: %w", tool, err)
	}
	return nil
}

func errorf(format string, args ...any) Result {
	return Result{Text: fmt.Sprintf(format, args...), IsError: true}
}

func inputError(tool, format string, args ...any) Result {
	return errorf("invalid input for %s: %s", tool, fmt.Sprintf(format, args...))
}

// sandboxError turns a sandbox failure into a message a model can act on.
func sandboxError(tool, path string, err error) Result {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errorf("%s was canceled: %v", tool, err)
	case errors.Is(err, sandbox.ErrOutsideWorkspace):
		return errorf("%s: %q is outside the workspace: paths are relative to the workspace root, and `..`, absolute paths elsewhere and symbolic links that lead out of it are refused", tool, path)
	case errors.Is(err, sandbox.ErrNotExist):
		return errorf("%s: %q does not exist", tool, path)
	case errors.Is(err, sandbox.ErrGone):
		return errorf("%s: the session's sandbox no longer exists", tool)
	}
	return errorf("%s: %v", tool, err)
}

// spill cuts a result longer than MaxResultChars. The full text goes to a file named by its
// content hash, so a retried call overwrites rather than piles up copies.
func spill(ctx context.Context, sb sandbox.Sandbox, res Result) Result {
	total := utf8.RuneCountInString(res.Text)
	if total <= MaxResultChars {
		return res
	}
	sum := sha256.Sum256([]byte(res.Text))
	path := outputsDir + "/" + hex.EncodeToString(sum[:8]) + ".txt"
	var note string
	if sb == nil {
		note = "the full output could not be saved: no sandbox"
	} else if err := sb.WriteFile(ctx, path, []byte(res.Text)); err != nil {
		note = fmt.Sprintf("the full output could not be saved: %v", err)
	} else {
		requestPrune(ctx, sb)
		note = fmt.Sprintf("the full output is in %s; read it in parts with the read tool's view_range or search it with grep", path)
		if res.cutAt > 0 {
			note = fmt.Sprintf("the full text of this result is in %s; it holds only the first %d bytes of the command's output (see the note at its end), not all of it; read it in parts with the read tool's view_range or search it with grep", path, res.cutAt)
		}
	}
	marker := fmt.Sprintf("\n\n[output truncated: showing the first %%d of %d characters; %s]", total, note)
	keep := MaxResultChars - utf8.RuneCountInString(fmt.Sprintf(marker, MaxResultChars))
	res.Text = firstRunes(res.Text, keep) + fmt.Sprintf(marker, keep)
	return res
}

// firstRunes returns the first n runes of s.
func firstRunes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}
