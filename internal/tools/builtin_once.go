package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// callsDir holds one directory of records per call run by RunBuiltinOnce, named by the call
// id. The records live in the sandbox because the sandbox outlives the worker that started a
// call on every provider (a local work directory, a container, a pod), and they are written
// through Exec, ReadFile and WriteFile only, so they work the same everywhere.
//
// A record is needed only until the call's agent.tool_result is committed; nothing prunes
// them, and nothing depends on how many there are. request, started and exit are a few bytes,
// result and intent a few hundred; a bash output record holds everything the command wrote
// (the result shows the first bytes, up to the exec output cap), so a session's records grow
// by its commands' output. glob and grep skip StateDir, and the whole workspace goes with the
// sandbox. Deleting a call directory is safe once its result is committed.
const callsDir = StateDir + "/calls"

// Record files in a call directory.
const (
	// recRequest is the tool and its input, written before a bash command is started.
	recRequest = "request.json"
	// recStarted is bash's claim, created exclusively by the wrapper script before the command
	// runs: "<pid> <process start time> <deadline in unix seconds>".
	recStarted = "started"
	// recOutput is the bash command's output, stdout and stderr interleaved as written, cut
	// at MaxStoredOutput bytes.
	recOutput = "output"
	// recDropped is how many bytes of output came after the first MaxStoredOutput and were
	// counted but not kept, written once the command's output is closed.
	recDropped = "dropped"
	// recPruned replaces a finished call's output once bashPrune deleted it: its size.
	recPruned = "pruned"
	// recExit is bash's outcome, "exit <status>" or "timeout <status>", followed by the count
	// of discarded output bytes when it is known, written last.
	recExit = "exit"
	// recIntent is the change an edit is about to write, before it writes it.
	recIntent = "intent.json"
	// recResult is the result of a write or edit that changed the file.
	recResult = "result.json"
)

// maxCallIDLen bounds a call id, which becomes a directory name.
const maxCallIDLen = 128

// callIDPattern admits the event ids the runtime passes (sevt_…) and nothing that could be a
// path: no separators, no dots.
var callIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// callDir is the workspace-relative directory of one call's records.
type callDir string

func (d callDir) file(name string) string { return string(d) + "/" + name }

// onceFunc runs one tool with side effects so that a call id never takes effect twice.
type onceFunc func(ctx context.Context, sb sandbox.Sandbox, call callDir, input json.RawMessage) Result

// onceBuiltins are the built-ins with side effects. read, glob and grep change nothing, so
// running them again is harmless and they keep no records.
var onceBuiltins = map[string]onceFunc{
	wire.ToolNameBash:  runBashOnce,
	wire.ToolNameWrite: runWriteOnce,
	wire.ToolNameEdit:  runEditOnce,
}

// RunBuiltinOnce is RunBuiltin for a call with an id (the agent.tool_use event id): however
// often it is called with the same id — retried after a worker died, or twice at the same
// time — the tool takes effect at most once, and every call after the first completed one
// returns the first one's result. It keeps per-call records under StateDir/calls/<callID> in
// the sandbox itself:
//
//   - bash: the script that runs the command claims the call, records its output and, last,
//     its exit status. A retry returns the recorded result; if the first run is still going
//     (its process outlived the worker) it waits for it, up to the call's timeout; if the
//     first run died without an exit status it returns an error result saying the call was
//     interrupted and may have partially run. It never starts the command a second time.
//   - write and edit: the result is recorded after the change (edit also records the change
//     before writing it), so a retry returns it instead of, say, "old_string not found".
//   - read, glob, grep and the web tools: run as RunBuiltin, since they change nothing.
//
// A call id must be a plain name (letters, digits, '_' and '-').
func RunBuiltinOnce(ctx context.Context, sb sandbox.Sandbox, callID, name string, input json.RawMessage) Result {
	if problem := checkBuiltin(sb, name); problem != nil {
		return *problem
	}
	run, ok := onceBuiltins[name]
	if !ok {
		return finish(ctx, sb, builtins[name](ctx, sb, input))
	}
	if len(callID) > maxCallIDLen || !callIDPattern.MatchString(callID) {
		return errorf("%s: cannot record the call: its id %q is not a plain name of at most %d letters, digits, '_' or '-'", name, callID, maxCallIDLen)
	}
	return finish(ctx, sb, run(ctx, sb, callDir(callsDir+"/"+callID), input))
}

// recordedResult is the JSON form of a write or edit result.
type recordedResult struct {
	Text    string `json:"text"`
	IsError bool   `json:"is_error,omitempty"`
}

// readResult returns the recorded result of a call, if there is a complete one.
func readResult(ctx context.Context, sb sandbox.Sandbox, call callDir) (Result, bool) {
	var rec recordedResult
	if !readJSON(ctx, sb, call.file(recResult), &rec) {
		return Result{}, false
	}
	return Result{Text: rec.Text, IsError: rec.IsError}, true
}

// recordResult saves a call's result. A failure is not reported: the change it describes is
// already made, and a retry without the record redoes a write (same content) or recognises
// an edit by its intent record.
func recordResult(ctx context.Context, sb sandbox.Sandbox, call callDir, res Result) {
	_ = writeJSON(ctx, sb, call.file(recResult), recordedResult{Text: res.Text, IsError: res.IsError})
}

// readJSON decodes a record; false when it is missing, unreadable or incomplete (a write that
// was cut short leaves a prefix, which does not decode).
func readJSON(ctx context.Context, sb sandbox.Sandbox, path string, v any) bool {
	data, err := sb.ReadFile(ctx, path)
	return err == nil && json.Unmarshal(data, v) == nil
}

func writeJSON(ctx context.Context, sb sandbox.Sandbox, path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return sb.WriteFile(ctx, path, data)
}

// runWriteOnce writes unless the call's result is recorded. Without a record it writes again:
// the same content gives the same file.
func runWriteOnce(ctx context.Context, sb sandbox.Sandbox, call callDir, raw json.RawMessage) Result {
	if res, ok := readResult(ctx, sb, call); ok {
		return res
	}
	res := runWrite(ctx, sb, raw)
	if !res.IsError {
		recordResult(ctx, sb, call, res)
	}
	return res
}

// editIntent is what an edit is about to write, recorded before the file is: if the worker
// dies between writing the file and recording the result, the retry finds the file already in
// the After state and answers with Text instead of editing again.
type editIntent struct {
	Before string `json:"before"` // digest of the file before the edit
	After  string `json:"after"`  // digest of the file after it
	Text   string `json:"text"`   // the success result
}

// Attempts of the same edit may run at once (a retry while the first attempt is still alive);
// one may read the file while another rewrites it. The reader then waits this long, at most,
// for the file to settle in the before or after state.
const (
	editSettleTimeout = 2 * time.Second
	editSettlePoll    = 5 * time.Millisecond
)

// runEditOnce edits unless the call's result is recorded or its intent shows the edit is
// already in the file. The order of reads — the file, then the intent — matters for attempts
// running at once: an attempt writes the intent before the file, so whoever reads a file that
// another attempt has started to change also finds that attempt's intent.
func runEditOnce(ctx context.Context, sb sandbox.Sandbox, call callDir, raw json.RawMessage) Result {
	in, problem := parseEdit(raw)
	if problem != nil {
		return *problem
	}
	if res, ok := readResult(ctx, sb, call); ok {
		return res
	}
	data, intent, problem := readEditState(ctx, sb, call, in.FilePath)
	if problem != nil {
		return *problem
	}
	if intent != nil && digest(data) == intent.After {
		res := Result{Text: intent.Text}
		recordResult(ctx, sb, call, res)
		return res
	}
	text, res := in.apply(string(data))
	if res.IsError {
		return res
	}
	next := editIntent{Before: digest(data), After: digest([]byte(text)), Text: res.Text}
	if err := writeJSON(ctx, sb, call.file(recIntent), next); err != nil {
		return sandboxError(wire.ToolNameEdit, call.file(recIntent), err)
	}
	if err := sb.WriteFile(ctx, in.FilePath, []byte(text)); err != nil {
		return sandboxError(wire.ToolNameEdit, in.FilePath, err)
	}
	recordResult(ctx, sb, call, res)
	return res
}

// readEditState reads the file to edit and the call's intent record, if any. Another attempt
// may be writing either right now (writes are not atomic): an intent that exists but does not
// decode, or a file in neither of the intent's states, is waited for. An intent that does not
// exist means no attempt had started to write the file when it was read.
func readEditState(ctx context.Context, sb sandbox.Sandbox, call callDir, path string) ([]byte, *editIntent, *Result) {
	deadline := time.Now().Add(editSettleTimeout)
	for {
		data, err := sb.ReadFile(ctx, path)
		if err != nil {
			res := sandboxError(wire.ToolNameEdit, path, err)
			return nil, nil, &res
		}
		raw, err := sb.ReadFile(ctx, call.file(recIntent))
		if errors.Is(err, sandbox.ErrNotExist) {
			return data, nil, nil
		}
		if err != nil {
			res := sandboxError(wire.ToolNameEdit, call.file(recIntent), err)
			return nil, nil, &res
		}
		var intent editIntent
		if json.Unmarshal(raw, &intent) == nil {
			if d := digest(data); d == intent.Before || d == intent.After {
				return data, &intent, nil
			}
		}
		if time.Now().After(deadline) {
			res := errorf("edit: %s changed while an earlier attempt of this call was editing it, so the edit was not applied again; read the file to see its state", path)
			return nil, nil, &res
		}
		if err := sleep(ctx, editSettlePoll); err != nil {
			res := sandboxError(wire.ToolNameEdit, path, err)
			return nil, nil, &res
		}
	}
}

func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
